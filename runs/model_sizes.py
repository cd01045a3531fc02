"""The model registry: exact parameter counts and KV-cache sizes of the models people run.

A name says "8b" where the weights hold 8.03B and "1b" where they hold 1.24B; the roofline
takes the count from here (or from the run's own metadata) so that a ceiling is not 24% high
because a name rounds. Counts are the GGUF metadata's (llama.cpp's n_params, Ollama's
parameter_size) or the model card's, taken at the lower figure where sources differ (a lower
count gives a higher ceiling). The KV cache per token is 2 (K and V) × layers × KV heads ×
head size × 2 bytes at F16, from each model's config.json. No Django here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runs import normalize


@dataclass(frozen=True)
class KnownModel:
    params_b: float
    # KV cache bytes per token of context at F16 (None: not recorded).
    kv_bytes_per_token: int | None
    source: str


def _kv(layers: int, kv_heads: int, head_dim: int) -> int:
    return 2 * layers * kv_heads * head_dim * 2


# (family pattern on the lowercased id, the size the name states or None for a tag without one
# (Ollama's ":latest"), params B, KV bytes per token).
_DENSE = [
    (r"llama-?3(?:\.[13])?(?!\.2)\b", 8, 8.03, _kv(32, 8, 128)),
    (r"llama-?3(?:\.[13])?(?!\.2)\b", 70, 70.6, _kv(80, 8, 128)),
    (r"llama-?3\.2", 1, 1.24, _kv(16, 8, 64)),
    (r"llama-?3\.2", 3, 3.21, _kv(28, 8, 128)),
    (r"llama-?3\.2", None, 3.21, _kv(28, 8, 128)),
    (r"llama-?3\.1", None, 8.03, _kv(32, 8, 128)),
    (r"qwen-?2\.5", 0.5, 0.494, _kv(24, 2, 64)),
    (r"qwen-?2\.5", 1.5, 1.54, _kv(28, 2, 128)),
    (r"qwen-?2\.5", 3, 3.09, _kv(36, 2, 128)),
    (r"qwen-?2\.5|deepseek-r1", 7, 7.62, _kv(28, 4, 128)),
    (r"qwen-?2\.5|deepseek-r1", 14, 14.8, _kv(48, 8, 128)),
    (r"qwen-?2\.5|deepseek-r1", 32, 32.8, _kv(64, 8, 128)),
    (r"qwen-?2\.5", 72, 72.7, _kv(80, 8, 128)),
    (r"qwen-?2\.5", None, 7.62, _kv(28, 4, 128)),
    (r"deepseek-r1", 8, 8.03, _kv(32, 8, 128)),
    (r"deepseek-r1", 70, 70.6, _kv(80, 8, 128)),
    (r"qwen-?3(?!.*(?:30b|235b|next|coder))", 0.6, 0.6, _kv(28, 8, 128)),
    (r"qwen-?3(?!.*(?:30b|235b|next|coder))", 1.7, 1.7, _kv(28, 8, 128)),
    (r"qwen-?3(?!.*(?:30b|235b|next|coder))", 4, 4.02, _kv(36, 8, 128)),
    (r"qwen-?3(?!.*(?:30b|235b|next|coder))", 8, 8.19, _kv(36, 8, 128)),
    (r"qwen-?3(?!.*(?:30b|235b|next|coder))", 14, 14.8, _kv(40, 8, 128)),
    (r"qwen-?3(?!.*(?:30b|235b|next|coder))", 32, 32.8, _kv(64, 8, 128)),
    (r"qwen-?3(?!.*(?:30b|235b|next|coder))", None, 8.19, _kv(36, 8, 128)),
    (r"gemma-?2", 2, 2.61, _kv(26, 4, 256)),
    (r"gemma-?2", 9, 9.24, _kv(42, 8, 256)),
    (r"gemma-?2", 27, 27.2, _kv(46, 16, 128)),
    (r"gemma-?3", 1, 1.0, _kv(26, 1, 256)),
    (r"gemma-?3", 4, 3.88, _kv(34, 4, 256)),
    (r"gemma-?3", 12, 11.8, _kv(48, 8, 256)),
    (r"gemma-?3", 27, 27.0, _kv(62, 16, 128)),
    (r"gemma-?3", None, 3.88, _kv(34, 4, 256)),
    (r"phi-?3\.5(?!.*moe)", 3.8, 3.82, _kv(32, 32, 96)),
    (r"phi-?4(?!.*mini)", 14, 14.7, _kv(40, 10, 128)),
    (r"phi-?4(?!.*mini)", None, 14.7, _kv(40, 10, 128)),
    (r"mistral-?small", 24, 23.6, _kv(40, 8, 128)),
    (r"mistral-?nemo", 12, 12.2, _kv(40, 8, 128)),
    (r"mistral(?!-?(?:small|nemo|large))", 7, 7.25, _kv(32, 8, 128)),
    (r"mistral(?!-?(?:small|nemo|large))", None, 7.25, _kv(32, 8, 128)),
    (r"smollm2", 1.7, 1.71, _kv(24, 32, 64)),
]
SOURCE = "model registry (runs/model_sizes.py)"


def known_model(model_id: str) -> KnownModel | None:
    """The registry's entry for a model id, matched on its family and the size its name
    states (a tag without a size, "mistral:latest", matches the family's default)."""
    name = normalize.normalise_model_id(model_id).lower()
    stated = normalize.parse_model(model_id)["params_b"]
    for pattern, size, params, kv in _DENSE:
        if not re.search(pattern, name):
            continue
        if size is None and stated is None or size is not None and stated == size:
            return KnownModel(params, kv, SOURCE)
    return None


def parse_count(text: object) -> float | None:
    """A parameter count in billions from what a server reports ("8.0B", "751.63M", 8030261248);
    None when it says nothing usable."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int | float):
        return float(text) / 1e9 if text > 1e5 else (float(text) if text > 0 else None)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMBT])?\s*", str(text or ""), re.IGNORECASE)
    if not match:
        return None
    scale = {"K": 1e-6, "M": 1e-3, "B": 1.0, "T": 1e3, None: 1e-9}
    value = float(match.group(1)) * scale[(match.group(2) or "").upper() or None]
    return value if value > 0 else None
