"""Build llama-benchy's tokenizer offline, in llama-benchy's own virtualenv (with `gguf`).

    /work/venv-benchy/bin/python bench/benchy_tools.py tokenizer MODEL.gguf OUT/tokenizer.json

llama-benchy needs a Hugging Face tokenizer, and no hub is reachable here: this rebuilds one from
the vocabulary and merges embedded in the GGUF, the ones llama.cpp itself tokenises with.
bench/engine_fidelity.py calls it and writes llama-benchy's corpus (see there).
"""

from __future__ import annotations

import sys
from pathlib import Path

GGUF_CONTROL = 3  # llama.cpp's token type for control tokens (<|im_start|>, …)


def build_tokenizer(gguf_path: str, out_path: str) -> None:
    """A byte-level BPE tokenizer.json from the GGUF's tokenizer.ggml.* arrays."""
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    reader = GGUFReader(gguf_path)

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    if bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode() != "gpt2":
        raise SystemExit("only byte-level BPE (tokenizer.ggml.model = gpt2) GGUFs are supported")
    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, types, strict=True) if kind == GGUF_CONTROL]
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in control])
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(out_path)
    print(f"tokenizer with {len(tokens)} tokens, {len(merges)} merges -> {out_path}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["tokenizer"]:
        build_tokenizer(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
