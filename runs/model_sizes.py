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
from functools import lru_cache

from runs import normalize


@dataclass(frozen=True)
class KnownModel:
    params_b: float
    # KV cache bytes per token of context at F16 (None: not recorded).
    kv_bytes_per_token: int | None
    source: str
    # The parameters one token reads, where fewer than all: a mixture of experts' active
    # count, or a Gemma 4 E-model's effective size (its per-layer embeddings are lookups).
    active_b: float | None = None


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

# Models whose names state no size (or state one the name parser cannot read), each with its
# published count and where it was published: (family pattern, stated size or None, params B,
# active params B or None for a dense model, source). The active count is the publisher's; a
# name's "-a3b" is never read for these (roofline.MOE_NAMING lists the lines where it is).
_SOURCED: list[tuple[str, float | None, float, float | None, str]] = [
    # Dense.
    (r"phi-?3\.5-mini", None, 3.82, None, "huggingface.co/microsoft/Phi-3.5-mini-instruct (3.8B)"),
    (r"phi-?3-medium", None, 14.0, None, "huggingface.co/microsoft/Phi-3-medium-4k-instruct (14B)"),
    (
        r"phi-?4-mini",
        None,
        3.8,
        None,
        "huggingface.co/microsoft/Phi-4-mini-instruct, -reasoning (3.8B)",
    ),
    (r"mistral-?nemo", None, 12.2, None, "huggingface.co/mistralai/Mistral-Nemo-Instruct-2407"),
    (r"command-?r7b", None, 7.0, None, "huggingface.co/CohereForAI/c4ai-command-r7b-12-2024 (7B)"),
    (
        r"devstral-?small-?2(?![.\d])",
        None,
        24.0,
        None,
        "huggingface.co/mistralai/Devstral-Small-2-24B-Instruct-2512 (24B dense)",
    ),
    (r"granite-?4\.0-micro", None, 3.0, None, "huggingface.co/ibm-granite/granite-4.0-micro (3B)"),
    (
        r"grm-2\.6-plus(?:-0628)?(?=$|[-_.: ])",
        None,
        27.0,
        None,
        "huggingface.co/OrionLLM/GRM-2.6-Plus-0628 (a 27B-parameter update of GRM-2.6-Plus, whose "
        "card names its base Qwen/Qwen3.6-27B)",
    ),
    (
        r"grm-3\.2-cliff",
        None,
        9.0,
        None,
        "OrionLLM's GRM-3.2 release, huggingface.co/posts/DedeProGames/188359202128762 (Cliff: a "
        "9B-parameter model)",
    ),
    (
        r"minicpm-v-?4\.6(?![\d])",
        None,
        0.8,
        None,
        "MiniCPM-V 4.6 is 1.3B with its SigLIP2-400M vision tower on the Qwen3.5-0.8B LLM "
        "(inference.readthedocs.io/en/latest/models/builtin/llm/minicpm-v-4.6.html); its GGUF is "
        "that LLM, the vision tower a separate mmproj file (OpenSQZ/MiniCPM-V-CookBook, llama.cpp)",
    ),
    (
        r"muse-glimmer",
        None,
        29.6,
        None,
        "vercel.com/ai-gateway/models/muse-glimmer-30b (Meta's Muse Glimmer 30B: dense, about "
        "29.6B parameters with its vision encoder)",
    ),
    (
        r"muse-glimmer",
        30,
        29.6,
        None,
        "vercel.com/ai-gateway/models/muse-glimmer-30b (Meta's Muse Glimmer 30B: dense, about "
        "29.6B parameters with its vision encoder)",
    ),
    # Gemma 4 E-models: the card's effective size is what a token reads.
    (
        r"gemma-?4.*[-_:]e2b(?=$|[-_.: ])",
        None,
        5.1,
        2.3,
        "Gemma 4 model card, ai.google.dev/gemma/docs/core (E2B: 2.3B effective, 5.1B with "
        "per-layer embeddings)",
    ),
    (
        r"gemma-?4.*[-_:]e4b(?=$|[-_.: ])",
        None,
        8.0,
        4.5,
        "Gemma 4 model card, ai.google.dev/gemma/docs/core (E4B: 4.5B effective, 8B with "
        "per-layer embeddings)",
    ),
    # Mixtures of experts.
    (r"glm-?4\.7-flash", None, 30.0, 3.0, "huggingface.co/zai-org/GLM-4.7-Flash (30B-A3B MoE)"),
    (
        r"granite-?4\.0-h-small",
        None,
        32.0,
        9.0,
        "huggingface.co/ibm-granite/granite-4.0-h-small (32B total, 9B active)",
    ),
    (
        r"qwen-?3-coder-next",
        None,
        80.0,
        3.0,
        "huggingface.co/Qwen/Qwen3-Coder-Next (80B total, 3B activated)",
    ),
    (r"mellum-?2", 12, 12.0, 2.5, "arXiv:2605.31268, the Mellum2 technical report (2.5B active)"),
    (
        r"mistral-?small-?4",
        119,
        119.0,
        6.0,
        "mistral.ai/news/mistral-small-4 (119B total, 6B active per token, 8B with the "
        "embedding and output layers)",
    ),
    (
        r"deepseek-v4-flash",
        None,
        284.0,
        13.0,
        "huggingface.co/deepseek-ai/DeepSeek-V4-Flash (284B total, 13B activated)",
    ),
    (
        r"ornith-1\.0-35b",
        35,
        35.0,
        3.0,
        "DeepReinforce's 35B MoE post-trained from Qwen 3.5 (ai-infrastructure.net/cookbook-vllm-"
        "ornith-1-0; huggingface.co/maxlaurence/Ornith-1.0-35B-oQ5: a Qwen3.5 MoE): "
        "Qwen3.5-35B-A3B's 3B active",
    ),
    (
        r"darwin-36b-opus",
        36,
        36.0,
        3.0,
        "huggingface.co/FINAL-Bench/Darwin-36B-Opus (a merge on Qwen3.6-35B-A3B: 36B total, 3B "
        "active)",
    ),
    (
        r"smallthinker-4ba0\.6b",
        None,
        4.0,
        0.6,
        "huggingface.co/PowerInfer/SmallThinker-4BA0.6B-Instruct, arXiv:2507.20984 (4B, 0.6B "
        "active)",
    ),
    (
        r"step-?3\.7-flash",
        None,
        196.0,
        11.0,
        "huggingface.co/stepfun-ai/Step-3.7-Flash (196B language backbone, 11B active)",
    ),
    (
        r"laguna-xs(?:-2\.1|\.2)(?![\d])",
        None,
        33.0,
        3.0,
        "docs.sglang.io/cookbook/autoregressive/Poolside/Laguna-XS-2.1 (a 33B MoE, 3B active); "
        "huggingface.co/poolside/Laguna-XS.2 (33B total, 3B activated)",
    ),
    (
        r"laguna-s-2\.1(?![\d])",
        None,
        118.0,
        8.0,
        "docs.sglang.io/cookbook/autoregressive/Poolside/Laguna-S-2.1 (a 118B MoE, 8B active); "
        "NVIDIA NeMo AutoModel's Laguna page (118B total, ~8B activated)",
    ),
    (
        r"north-mini-code-1\.0(?![\d])",
        None,
        30.0,
        3.0,
        "docs.cohere.com/v2/docs/north-mini-code-1.0 (30B total / 3B active MoE)",
    ),
    (
        r"(?:^|/)lfm2$",
        None,
        23.8,
        2.0,
        "ollama.com/library/lfm2:latest (LFM2-24B-A2B, lfm2moe 23.8B; 2B active per token)",
    ),
    (
        r"(?:^|/)lfm2:24b(?:-a2b)?(?=$|-)",
        24,
        23.8,
        2.0,
        "ollama.com/library/lfm2:24b (LFM2-24B-A2B, lfm2moe 23.8B; 2B active per token)",
    ),
    (
        r"kat-coder-v2\.5-dev",
        None,
        35.0,
        3.0,
        "Kwaipilot's open KAT-Coder-V2.5-Dev, post-trained from Qwen3.6-35B-A3B (35B total / 3B "
        "active: huggingface.co/remixie/KAT-Coder-V2.5-Dev-FTW, "
        "huggingface.co/sahilchachra/KAT-Coder-V2.5-Dev-W4A16)",
    ),
    (
        r"(?:^|[_/])t-search(?=$|[-_.: ])",
        None,
        35.0,
        3.0,
        "t-tech/T-Search, built on Qwen3.6-35B-A3B (featherless.ai/models/t-tech/T-Search: 35.1B): "
        "Qwen3.6-35B-A3B's 3B active",
    ),
    (
        r"qwable-v1(?![\d.])",
        None,
        35.0,
        3.0,
        "huggingface.co/lordx64/Qwable-v1 (a distill of Qwen3.6-35B-A3B: 35B total / 3B active)",
    ),
    (
        r"nex-n2-mini",
        None,
        35.0,
        3.0,
        "nex-agi/Nex-N2-mini, a Qwen3.5-35B-A3B MoE fine-tune (huggingface.co/r0b0tlab/"
        "nex-n2-mini-nvfp4, LibertAIDAI/Nex-N2-mini-NVFP4-GGUF: 35B total, ~3B active)",
    ),
    (
        r"darwin-35b-a3b-opus",
        35,
        35.0,
        3.0,
        "huggingface.co/FINAL-Bench/Darwin-35B-A3B-Opus (a merge on Qwen3.5-35B-A3B: 35B MoE, 3B "
        "active)",
    ),
    (
        r"tini-cybersec-8b-a1b",
        8,
        8.3,
        1.5,
        "Tini-Cybersec-8B-A1B's card (huggingface.co/spinochenza/Tini-Cybersec-8B-A1B; iselabvn's "
        "repo is lfm2_moe): a fine-tune of LiquidAI/LFM2.5-8B-A1B, whose release gives 8.3B total, "
        "1.5B active (as reported by zubnet.ai, techsparking.com)",
    ),
    (
        r"jamba-?2-mini",
        None,
        52.0,
        12.0,
        "AI21's Jamba2 release, huggingface.co/ai21labs/AI21-Jamba2-Mini (52B total, 12B active)",
    ),
]


# The registry is fixed at import and an entry is frozen: one lookup per model id a process
# meets (an estimate section tries every entry's pattern on each of its 120 candidates).
@lru_cache(maxsize=8192)
def known_model(model_id: str) -> KnownModel | None:
    """The registry's entry for a model id, matched on its family and the size its name
    states (a tag without a size, "mistral:latest", matches the family's default)."""
    name = normalize.normalise_model_id(model_id).lower()
    stated = normalize.parse_model(model_id)["params_b"]
    for pattern, size, params, kv in _DENSE:
        if re.search(pattern, name) and _states(size, stated):
            return KnownModel(params, kv, SOURCE)
    for pattern, size, params, active, source in _SOURCED:
        if re.search(pattern, name) and _states(size, stated):
            return KnownModel(params, None, f"model registry: {source}", active)
    return None


def _states(size: float | None, stated: float | None) -> bool:
    """An entry's size is the one the id states (None: the id states none)."""
    return stated == size if size is not None else stated is None


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
