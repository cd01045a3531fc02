"""Roofline ceilings: bits per weight, active parameters, and the ceilings they give."""

from __future__ import annotations

import pytest

from runs import model_sizes, normalize, roofline
from runs.accelerators import catalog


@pytest.mark.parametrize(
    ("quant", "bits"),
    [
        # Named presets as real files hold them (output and embedding tensors included).
        ("Q4_K_M", 4.85), ("Q4_K_S", 4.6), ("Q4_0", 4.55), ("Q5_K_M", 5.65), ("Q6_K", 6.56),
        ("Q8_0", 8.5), ("Q3_K_L", 4.2), ("Q2_K", 2.95), ("IQ2_XXS", 2.0625),
        ("IQ3_XXS", 3.0625), ("IQ4_XS", 4.25), ("IQ1_S", 1.5625), ("F16", 16), ("BF16", 16),
        ("mlx-4bit", 4.25), ("mlx-8bit", 8.25), ("AWQ", 4), ("GPTQ", 4), ("FP8", 8),
        ("UD-Q4_K_XL", 4.5), ("MXFP4", 4.25),
    ],
)  # fmt: skip
def test_bits_per_weight_of_each_format(quant, bits) -> None:
    found = roofline.bits_per_weight(normalize.normalise_quant(quant))
    assert (found.bits, found.assumed) == (bits, False)


def test_an_unstated_quantization_assumes_the_smallest_format_and_says_so() -> None:
    found = roofline.bits_per_weight("", "example-model:8b")
    assert found.assumed and found.bits == min(roofline.QUANT_BITS.values()) == 1.5625
    # The model file's name counts when the field is blank.
    assert roofline.bits_per_weight("", "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf").bits == 8.5


@pytest.mark.parametrize(
    ("model_id", "total", "active"),
    [
        ("qwen3:30b-a3b", 30.5, 3.3),
        ("qwen3:30b", 30.5, 3.3),  # Ollama's tag for the same MoE
        ("Qwen3-Next-80B-A3B-Instruct", 79.7, 3),
        ("mixtral:8x7b", 46.7, 12.9),
        ("llama3.1:8b-a1b", 8, 8),  # a name alone never makes an MoE
        ("gpt-oss:20b", 20.9, 3.6),
        ("deepseek-r1:671b", 671, 37),
        ("deepseek-r1:8b", 8, 8),  # the distill is dense
        ("DeepSeek-R1-Distill-Qwen-32B", 32, 32),
        ("Llama-4-Scout-17B-16E-Instruct", 109, 17),
        ("qwen3:32b", 32, 32),
    ],
)
def test_active_parameters_of_dense_and_moe_models(model_id, total, active) -> None:
    weights = roofline.model_weights(model_id, normalize.parse_model(model_id)["params_b"])
    assert (weights.total_b, weights.active_b) == (total, active)


def test_no_size_means_no_weights() -> None:
    assert roofline.model_weights("my-finetune", None) is None


def _ceilings(**fields) -> roofline.Ceilings | roofline.Unknown:
    base = {
        "gpu_model": "RTX 4090", "gpu_count": 1, "vram_gb": 24.0, "cpu_model": "AMD Ryzen 9 7950X",
        "model_id": "llama3.1:8b", "params_b": 8.0, "quantization": "Q4_K_M",
    }  # fmt: skip
    return roofline.ceilings(catalog(), **{**base, **fields})


def test_the_issue_s_example_an_8b_q4_on_an_rtx_4090() -> None:
    found = _ceilings()
    # 8.03B (the registry's count, not the name's 8) × 4.85 bits (Q4_K_M as files hold it) ÷ 8.
    assert found.active_gb == pytest.approx(8.03 * 4.85 / 8)
    assert found.decode_tps == pytest.approx(1008 / (8.03 * 4.85 / 8))  # 207 tok/s
    # Prefill: 660.6 INT8 TOPS (quantized weights) ÷ (2 × 8.03B).
    assert found.peak == (660.6, "INT8 TOPS")
    assert found.prefill_tps == pytest.approx(660.6e12 / 16.06e9)


def test_fp16_weights_use_the_fp16_peak() -> None:
    found = _ceilings(quantization="F16")
    assert found.peak == (330.3, "FP16 TFLOPS") and found.decode_tps == pytest.approx(1008 / 16.06)


def test_moe_counts_only_active_weights() -> None:
    dense = _ceilings(model_id="qwen3:32b", params_b=32.0)
    moe = _ceilings(model_id="qwen3:30b-a3b", params_b=30.0)
    assert moe.decode_tps == pytest.approx(1008 / (3.3 * 4.85 / 8))
    assert moe.decode_tps > 9 * dense.decode_tps


def test_a_declared_active_size_counts_only_where_the_name_says_nothing_of_experts() -> None:
    # An imported row that states its MoE sizes (LocalMaxxing's params and activeParams).
    declared = _ceilings(model_id="some-org/Nemotron-Nano", params_b=32.0, declared_active_b=3.0)
    assert declared.weights.active_b == 3.0 and "as declared" in declared.weights.note
    # A name that knows its experts is not outvoted by a smaller claim.
    named = _ceilings(model_id="qwen3:30b-a3b", params_b=30.0, declared_active_b=0.5)
    assert named.weights.active_b == pytest.approx(3.3)
    # A claim that is not smaller than the whole is not an MoE.
    dense = _ceilings(model_id="org/dense-model", params_b=8.0, declared_active_b=8.0)
    assert dense.weights.active_b == 8.0


def test_multi_gpu_sums_bandwidth_as_if_tensor_parallel() -> None:
    one = _ceilings(gpu_model="RTX 3090")
    two = _ceilings(gpu_model="RTX 3090", gpu_count=2)
    assert two.decode_tps == pytest.approx(2 * one.decode_tps)
    assert two.source.bandwidth_text() == (
        "2 × 936 GB/s = 1,872 GB/s, summed (as if tensor-parallel)"
    )


def test_cpu_only_and_apple_machines() -> None:
    cpu = _ceilings(gpu_model="", gpu_count=0, vram_gb=None, cpu_model="AMD EPYC 9654")
    assert cpu.source.label == "EPYC 9654, one socket"
    assert cpu.decode_tps == pytest.approx(460.8 / (8.03 * 4.85 / 8))
    # 96 cores × 3.7 GHz × 256 INT8 ops per cycle (AVX-512) = 90.9 TOPS.
    assert cpu.prefill_tps == pytest.approx(90.931e12 / (2 * 8.03e9))
    apple = _ceilings(
        gpu_model="Apple M2 Ultra", cpu_model="Apple M2 Ultra", quantization="mlx-4bit"
    )
    assert apple.decode_tps == pytest.approx(800 / (8.03 * 4.25 / 8))


def test_a_big_server_cpu_bounds_a_small_gpu_machine() -> None:
    found = _ceilings(gpu_model="RTX 3060", vram_gb=12.0, cpu_model="AMD EPYC 9654")
    assert found.source.accelerator.name == "EPYC 9654"  # 460.8 GB/s beats the card's 360


@pytest.mark.parametrize(
    ("fields", "reason", "hardware"),
    [
        (
            {"gpu_model": "RTX 9090"},
            "GPU 'RTX 9090' is not in the accelerator data file",
            "RTX 9090",
        ),
        (
            {"gpu_model": "", "cpu_model": "Loongson 3A6000"},
            "CPU 'Loongson 3A6000'",
            "Loongson 3A6000",
        ),
        ({"model_id": "my-finetune", "params_b": None}, "parameter count of 'my-finetune'", ""),
    ],
)
def test_unknown_hardware_or_model_gives_no_ceiling(fields, reason, hardware) -> None:
    found = _ceilings(**fields)
    assert isinstance(found, roofline.Unknown)
    assert reason in found.reason and found.hardware_name == hardware


@pytest.mark.parametrize(
    ("model_id", "total", "active", "source"),
    [
        # Names that state no size: the registry's published count, with where it is from.
        ("Phi-3.5-mini-instruct-Q4_K_M", 3.82, 3.82, "microsoft/Phi-3.5-mini-instruct"),
        ("microsoft_Phi-4-mini-instruct-Q4_K_M", 3.8, 3.8, "microsoft/Phi-4-mini-instruct"),
        ("Mistral-Nemo-Instruct-2407-Q4_K_M", 12.2, 12.2, "Mistral-Nemo-Instruct-2407"),
        ("devstral-small-2", 24.0, 24.0, "Devstral-Small-2-24B"),
        # Gemma 4 E-models read their effective size per token, the card's, not the name's.
        ("gemma4:e4b-mlx", 8.0, 4.5, "Gemma 4 model card"),
        ("gemma-4-E2B-it-QAT-Q4_0", 5.1, 2.3, "Gemma 4 model card"),
        # Mixtures of experts: total and active from the publisher.
        ("glm-4.7-flash:q8_0", 30.0, 3.0, "zai-org/GLM-4.7-Flash"),
        ("qwen3-coder-next:Q4_K_M", 80.0, 3.0, "Qwen/Qwen3-Coder-Next"),
        ("Mistral-Small-4-119B-2603-Q4_K_M", 119.0, 6.0, "mistral-small-4"),
        ("deepseek-ai/DeepSeek-V4-Flash-0731", 284.0, 13.0, "DeepSeek-V4-Flash"),
        # Declared dense by the row that measured it; the registry knows its base's experts.
        ("deepreinforce-ai/Ornith-1.0-35B-GGUF", 35.0, 3.0, "Qwen3.5-35B-A3B"),
        ("FINAL-Bench_Darwin-36B-Opus-Q4_K_M", 36.0, 3.0, "FINAL-Bench/Darwin-36B-Opus"),
        # The real community data's models whose names state no size (or only claim an MoE),
        # as the data writes them: GGUF files with org_ prefixes, Ollama tags.
        ("Laguna-XS-2.1-Q4_K_M.gguf", 33.0, 3.0, "Laguna-XS-2.1"),
        ("laguna-xs-2.1:mxfp8", 33.0, 3.0, "Laguna-XS-2.1"),
        ("laguna-xs-2.1:nvfp4", 33.0, 3.0, "Laguna-XS-2.1"),
        ("Laguna-S-2.1-Q4_K_M.gguf", 118.0, 8.0, "Laguna-S-2.1"),
        ("North-Mini-Code-1.0-Q4_K_M.gguf", 30.0, 3.0, "north-mini-code-1.0"),
        ("north-mini-code-1.0:mlx-mxfp8", 30.0, 3.0, "north-mini-code-1.0"),
        ("north-mini-code-1.0:mlx-nvfp4", 30.0, 3.0, "north-mini-code-1.0"),
        ("OrionLLM_GRM-2.6-Plus-0628-Q4_K_M.gguf", 27.0, 27.0, "OrionLLM/GRM-2.6-Plus-0628"),
        ("OrionLLM_GRM-3.2-Cliff-Q4_K_M.gguf", 9.0, 9.0, "GRM-3.2"),
        ("MiniCPM-V-4.6-Q4_K_M.gguf", 0.8, 0.8, "Qwen3.5-0.8B"),
        ("lfm2:latest", 23.8, 2.0, "ollama.com/library/lfm2"),
        ("lfm2:24b", 23.8, 2.0, "ollama.com/library/lfm2"),
        ("Kwaipilot_KAT-Coder-V2.5-Dev-Q4_K_M.gguf", 35.0, 3.0, "KAT-Coder-V2.5-Dev"),
        ("t-tech_T-Search-Q4_K_M.gguf", 35.0, 3.0, "t-tech/T-Search"),
        ("lordx64_Qwable-v1-Q4_K_M.gguf", 35.0, 3.0, "lordx64/Qwable-v1"),
        ("nex-agi_Nex-N2-mini-Q4_K_M.gguf", 35.0, 3.0, "Nex-N2-mini"),
        ("muse-glimmer", 29.6, 29.6, "muse-glimmer-30b"),
        ("Muse-Glimmer-30B-Q4_K_M.gguf", 29.6, 29.6, "muse-glimmer-30b"),
        # Fine-tunes whose names only claim an MoE: their cards name the base.
        ("FINAL-Bench_Darwin-35B-A3B-Opus-Q4_K_M.gguf", 35.0, 3.0, "Darwin-35B-A3B-Opus"),
        ("iselabvn_Tini-Cybersec-8B-A1B-Q4_K_M.gguf", 8.3, 1.5, "LFM2.5-8B-A1B"),
    ],
)
def test_the_registry_sizes_models_their_names_do_not(model_id, total, active, source) -> None:
    # With the size the name states, as an imported row carries it: the registry still wins.
    found = _ceilings(model_id=model_id, params_b=normalize.parse_model(model_id)["params_b"])
    assert isinstance(found, roofline.Ceilings)
    assert (found.weights.total_b, found.weights.active_b) == (total, active)
    assert source in found.weights.note and "model registry" in found.weights.note


@pytest.mark.parametrize(
    "model_id",
    [
        # Near names the new entries must leave alone.
        "nex-agi/Nex-N2.5-mini",
        "Mia-AiLab/Qwable-3.6-27b",
        "lfm2:8b",
        "LFM2.5-1.2B-Thinking-Q4_K_M.gguf",
        "laguna-m.1",
        "openbmb/minicpm-v4.7:35b-a3b",
    ],
)
def test_the_new_registry_entries_leave_near_names_alone(model_id) -> None:
    assert model_sizes.known_model(model_id) is None


def test_an_unknown_name_s_active_suffix_still_raises_no_ceiling() -> None:
    # A fine-tune whose name carries "35B-A3B" but not its base's name is only a name: held to
    # a dense 35B until the registry has it with a source.
    found = _ceilings(model_id="Gryphe_WorldSim-Opus-3.6-35B-A3B-Q4_K_M", params_b=35.0)
    assert isinstance(found, roofline.Ceilings)
    assert (found.weights.total_b, found.weights.active_b) == (35.0, 35.0)
    # The base's own name is in the registry's MoE table.
    found = _ceilings(model_id="unsloth/Qwen3.6-35B-A3B-GGUF", params_b=35.0)
    assert isinstance(found, roofline.Ceilings) and found.weights.active_b == 3.0


def test_a_float_type_beside_a_quantized_model_id_is_the_compute_type() -> None:
    # vLLM's "--dtype float16" serving an int4 checkpoint: the weights are 4-bit.
    assert roofline.bits_per_weight("fp16", "Lorbus/Qwen3.6-27B-int4-AutoRound").bits == 4.0
    assert roofline.bits_per_weight("FP16", "Qwen/Qwen3-8B").bits == 16.0


def test_an_underscore_decimal_size_sets_the_ceiling() -> None:
    model_id = "internlm2_5-1_8b-chat-Q4_K_M"
    found = _ceilings(model_id=model_id, params_b=normalize.parse_model(model_id)["params_b"])
    assert isinstance(found, roofline.Ceilings) and found.weights.total_b == 1.8
