"""Write a Hugging Face tokenizer.json from a GGUF's own vocabulary (byte-level BPE models only).

llama-benchy needs a tokenizer and no hub is reachable here, so bench/sweep_fidelity.py builds one
from the weights file the server loaded. Run it with a Python that has `gguf` and `tokenizers`
(the separate llama-benchy venv): ``python bench/gguf_tokenizer.py MODEL.gguf OUT_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path


def _strings(reader, key: str) -> list[str]:
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def build(gguf_path: Path, out_dir: Path) -> Path:
    import gguf
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    reader = gguf.GGUFReader(str(gguf_path))
    model = bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode()
    if model != "gpt2":
        raise SystemExit(f"{gguf_path.name}: tokenizer model {model!r} is not byte-level BPE")
    tokens = _strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in _strings(reader, "tokenizer.ggml.merges")]
    kinds = reader.fields["tokenizer.ggml.token_type"]
    token_types = [int(kinds.parts[i][0]) for i in kinds.data]
    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    # SmolLM2's ("smollm") pre-tokenizer: single digits, then GPT-2's byte-level split.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, token_types, strict=True) if kind == 3]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "tokenizer.json"
    tokenizer.save(str(target))
    return target


if __name__ == "__main__":
    print(build(Path(sys.argv[1]), Path(sys.argv[2])))
