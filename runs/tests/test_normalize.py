from __future__ import annotations

import pytest

from runs import normalize


@pytest.mark.parametrize(
    ("raw", "canonical", "vendor"),
    [
        ("NVIDIA GeForce RTX 4090", "RTX 4090", "nvidia"),
        ("RTX 4090", "RTX 4090", "nvidia"),
        ("NVIDIA RTX 4090 24GB", "RTX 4090", "nvidia"),
        ("NVIDIA H100 80GB HBM3", "H100", "nvidia"),
        ("NVIDIA H100 PCIe", "H100 PCIe", "nvidia"),
        ("AMD Radeon RX 7900 XTX", "RX 7900 XTX", "amd"),
        ("Radeon RX 7900 XTX", "RX 7900 XTX", "amd"),
        ("Apple M1 Pro integrated GPU", "Apple M1 Pro", "apple"),
        ("Intel(R) Arc(TM) A770 Graphics", "Intel Arc A770", "intel"),
        ("", "", ""),
    ],
)
def test_gpu_names_are_canonical(raw: str, canonical: str, vendor: str) -> None:
    assert normalize.canonical_gpu(raw) == canonical
    assert normalize.gpu_vendor(raw) == vendor


def test_cpu_names_are_not_mistaken_for_gpus() -> None:
    assert normalize.gpu_vendor("AMD Ryzen 9 7950X 16-Core Processor") == ""
    assert normalize.gpu_vendor("Intel(R) Xeon(R) Processor") == ""
    assert normalize.canonical_cpu("AMD Ryzen 9 7950X 16-Core Processor") == "AMD Ryzen 9 7950X"


def test_the_same_machine_described_two_ways_has_one_key() -> None:
    common = {"cpu": "AMD Ryzen 9 7950X", "gpu_count": 1, "vram_gb": 24, "os_name": "Linux"}
    a = normalize.hardware_identity(gpu="NVIDIA GeForce RTX 4090", ram_gb=63.7, **common)
    b = normalize.hardware_identity(gpu="RTX 4090", ram_gb=64, **common)
    assert (
        a["canonical_key"] == b["canonical_key"] == "rtx-4090|1|24|amd-ryzen-9-7950x|64|linux|cuda"
    )
    c = normalize.hardware_identity(gpu="RTX 4090", ram_gb=64, **{**common, "gpu_count": 2})
    assert c["canonical_key"] != a["canonical_key"]


@pytest.mark.parametrize(
    ("vram", "bucket"),
    [
        (None, ""),
        (0, ""),
        (6, "8"),
        (8, "8"),
        (11.9, "12"),
        (16, "16"),
        (24, "24"),
        (32, "32"),
        (48, "48"),
        (80, "80+"),
        (141, "80+"),
    ],
)
def test_vram_buckets(vram: float | None, bucket: str) -> None:
    assert normalize.vram_bucket(vram) == bucket


@pytest.mark.parametrize(
    ("model_id", "display", "family", "params", "quant"),
    [
        ("qwen3:8b", "qwen3:8b", "qwen3", 8.0, ""),
        ("Qwen3.6-27B", "Qwen3.6-27B", "qwen3.6", 27.0, ""),
        ("pc1-coder:latest", "pc1-coder", "pc1", None, ""),
        ("llama3.1:8b-instruct-q4_K_M", "llama3.1:8b-instruct-q4_K_M", "llama3.1", 8.0, "Q4_K_M"),
        (
            "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
            "SmolLM2-135M-Instruct.Q4_1",
            "smollm2",
            0.135,
            "Q4_1",
        ),
        ("org/Model-IQ4_XS", "org/Model-IQ4_XS", "model", None, "IQ4_XS"),
        # InternLM writes the decimal point as an underscore: 1.8B, not 8B.
        (
            "internlm2_5-1_8b-chat-Q4_K_M",
            "internlm2_5-1_8b-chat-Q4_K_M",
            "internlm2",
            1.8,
            "Q4_K_M",
        ),
        # Underscores that separate words are not decimal points.
        ("llama_3_8b_instruct", "llama_3_8b_instruct", "llama", 8.0, ""),
    ],
)
def test_model_ids_are_parsed(model_id, display, family, params, quant) -> None:
    parsed = normalize.parse_model(model_id)
    assert (parsed["model_id"], parsed["family"], parsed["params_b"], parsed["quantization"]) == (
        display,
        family,
        params,
        quant,
    )


def test_stack_key_ignores_case_but_not_settings() -> None:
    base = dict(
        model_id="Qwen3:8B",
        quantization="q4_k_m",
        model_sha256="",
        engine="llama.cpp",
        harness="raw",
        context_length=8192,
        kv_cache_type="",
        draft_model="",
        launch_settings={},
    )
    same = normalize.stack_identity(**{**base, "model_id": "qwen3:8b", "quantization": "Q4_K_M"})
    assert normalize.stack_identity(**base) == same
    assert normalize.stack_identity(**{**base, "context_length": 16384}) != same
    assert normalize.stack_identity(**{**base, "kv_cache_type": "q8_0"}) != same
    assert normalize.stack_identity(**{**base, "draft_model": "qwen3:0.6b"}) != same
