"""The limits of issue 30: ceilings from what the run is (its metadata, its file, the registry),
the TTFT floor, the CPU compute ceiling, depth cells, multi-GPU split modes, declared and
bounded speculation, MoE without an active count, peers that flag fast runs only, and the
same check on lab results."""

from __future__ import annotations

import copy

import pytest

from runs import normalize, roofline
from runs.accelerators import DataFileError, catalog, parse_entry
from runs.importers.records import ImportedSuite, ImportedTask, RunRecord
from runs.models import Hardware, Stack
from submissions import integrity, run_facts
from submissions.models import Channel, Status
from submissions.services import submit_run

RTX_4090 = ("NVIDIA GeForce RTX 4090", 1, 24, "AMD Ryzen 9 7950X 16-Core Processor")


def _machine(gpu: str = RTX_4090[0], count: int = 1, vram=24, cpu: str = RTX_4090[3]):
    identity = normalize.hardware_identity(
        cpu=cpu, gpu=gpu, gpu_count=count, vram_gb=vram, ram_gb=64, os_name="Linux"
    )
    return Hardware(**identity)


def _stack(
    model: str = "llama3.1:8b", quant: str = "Q4_K_M", engine="llama.cpp", draft="", **settings
):
    parsed = normalize.parse_model(model)
    return Stack(
        model_id=parsed["model_id"],
        params_b=parsed["params_b"],
        quantization=quant,
        engine=engine,
        draft_model=draft,
        launch_settings=settings,
    )


def _checks(claim, stack=None, hardware=None, payload=None) -> list[integrity.Check]:
    return integrity.physics_checks(
        claim,
        stack=stack or _stack(),
        hardware=hardware or _machine(),
        catalog=catalog(),
        payload=payload,
    )


def _flags(claim, **kwargs) -> list[str]:
    return [check.text for check in _checks(claim, **kwargs) if check.flagged]


def _ceiling(stack=None, hardware=None, payload=None) -> roofline.Ceilings:
    found = integrity.ceilings_for(stack or _stack(), hardware or _machine(), catalog(), payload)
    assert isinstance(found, roofline.Ceilings), found
    return found


# -- ceilings from what the run is ------------------------------------------------------------


def test_the_size_comes_from_the_registry_and_q4_k_m_from_real_files() -> None:
    # llama3.2:1b holds 1.24B parameters; Q4_K_M files hold about 4.85 bits per weight. Read
    # from the name at the format's floor, the ceiling was 1,008 ÷ (1 × 4.5 ÷ 8) = 1,792 tok/s.
    found = _ceiling(_stack("llama3.2:1b"))
    assert (found.weights.total_b, found.bits.bits) == (1.24, 4.85)
    assert found.decode_tps == pytest.approx(1008 / (1.24 * 4.85 / 8))
    # A 1.3× fake of the real limit is flagged; against the old ceiling it passed.
    assert _flags(integrity.Claim(1.3 * found.decode_tps, None, None), stack=_stack("llama3.2:1b"))


def test_a_tag_without_a_size_gets_its_registry_size() -> None:
    for model, size in (("mistral:latest", 7.25), ("phi4:latest", 14.7)):
        found = _ceiling(_stack(model))
        assert found.weights.total_b == size


def test_the_bundle_s_parameter_count_and_file_size_are_used() -> None:
    payload = {"model": {"parameter_count": "3.2B", "file_size_bytes": 2_019_000_000}}
    stack = _stack("my-finetune")  # no size in its name, not in the registry
    assert isinstance(integrity.ceilings_for(stack, _machine(), catalog()), roofline.Unknown)
    found = _ceiling(stack, payload=payload)
    assert found.weights.total_b == 3.2
    assert found.active_gb == pytest.approx(2.019)
    assert found.decode_tps == pytest.approx(1008 / 2.019)


def test_an_moe_reads_its_active_share_of_the_file() -> None:
    payload = {"model": {"file_size_bytes": 18_600_000_000}}
    found = _ceiling(_stack("qwen3:30b-a3b"), payload=payload)
    assert found.active_gb == pytest.approx(18.6 * 3.3 / 30.5)


def test_a_name_suffix_alone_does_not_make_an_moe() -> None:
    plain = _ceiling(_stack("llama3.1:8b"))
    renamed = _ceiling(_stack("llama3.1:8b-a1b"))
    assert renamed.weights.active_b == renamed.weights.total_b
    assert renamed.decode_tps == pytest.approx(plain.decode_tps, rel=0.01)


def test_an_moe_without_an_active_count_is_bounded_at_the_sparsest_share() -> None:
    stack = _stack("some-org/unnamed-experts", params_b=100.0, moe=True)
    found = _ceiling(stack)
    assert not found.weights.active_known and found.weights.active_b == pytest.approx(3.0)
    assert "active parameters unknown" in found.weights.note
    honest = integrity.Claim(0.5 * found.decode_tps, None, None)
    assert not _flags(honest, stack=stack)
    # Far beyond even 3% active: flagged, not waved through.
    assert _flags(integrity.Claim(2 * found.decode_tps, None, None), stack=stack)


def test_a_depth_cell_pays_for_its_kv_cache() -> None:
    found = _ceiling()
    # Llama 3.1 8B: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes = 128 KiB per token.
    assert found.kv_bytes_per_token == 131072
    at_32k = found.decode_at_depth(32768)
    assert at_32k == pytest.approx(1008 / (found.active_gb + 32768 * 131072 / 1e9))
    cell = run_facts.DepthCell(32768, 128, 1.0 * found.decode_tps, None, None)
    claim = integrity.Claim(0.6 * found.decode_tps, None, None, run_facts.Workload(None, [cell]))
    [flag] = _flags(claim)
    assert flag.startswith("depth 32,768: decode") and "KV cache at depth 32,768" in flag


def test_depth_cells_come_from_the_record() -> None:
    cell = {
        "depth": 16384,
        "status": "measured",
        "prompt_tokens": 128,
        "decode_tps": {"median": 180.0},
        "prefill_tps": {"median": 5000.0},
        "ttft_ms": {"median": 30.0},
    }
    record = RunRecord(source_format="bundle-1", started_at=None, model_id="x", score_scale="v3")
    record.suites = [
        ImportedSuite("speed", tasks=[ImportedTask("s1", tokens_prompt=512)]),
        ImportedSuite("speed_sweep", tasks=[ImportedTask("d", metadata={"cell": cell})]),
    ]
    claim = integrity.Claim.of_record(record)
    assert claim.workload.prompt_tokens == 512
    assert claim.workload.cells == [run_facts.DepthCell(16384, 128, 180.0, 5000.0, 30.0)]
    assert any(t.startswith("depth 16,384: decode 180") for t in _flags(claim))


# -- new limits --------------------------------------------------------------------------------


def test_a_first_token_faster_than_the_prompt_can_be_read_is_flagged() -> None:
    found = _ceiling()
    floor = 8192 / found.prefill_tps * 1000
    claim = integrity.Claim(100.0, 8000.0, 0.3 * floor, run_facts.Workload(8192))
    [flag] = _flags(claim)
    assert (
        flag.startswith("time to first token") and "8,192 prompt tokens ÷ prefill ceiling" in flag
    )
    honest = integrity.Claim(100.0, 8000.0, 8192 / 8000 * 1000, run_facts.Workload(8192))
    assert not _flags(honest)


def test_a_cpu_has_a_prefill_ceiling_from_its_cores_clock_and_vector_width() -> None:
    cpu_only = _machine(gpu="", count=0, vram=None)
    found = _ceiling(hardware=cpu_only)
    # Ryzen 9 7950X: 16 cores × 5.7 GHz × 256 INT8 ops per cycle (AVX-512 VNNI) = 23.3 TOPS.
    assert found.peak == (pytest.approx(23.347), "INT8 TOPS")
    assert found.prefill_tps == pytest.approx(23.347e12 / (2 * 8.03e9))
    [flag] = _flags(integrity.Claim(10.0, 3 * found.prefill_tps, None), hardware=cpu_only)
    assert "16 cores × 5.7 GHz × avx512" in flag
    assert not _flags(integrity.Claim(10.0, 0.2 * found.prefill_tps, None), hardware=cpu_only)


def test_a_cpu_entry_needs_cores_clock_and_instruction_set_together() -> None:
    base = {"name": "Test CPU 1", "kind": "cpu", "channels": 2, "mts": 4800, "source": "test"}
    entry = parse_entry({**base, "cores": 8, "boost_ghz": 5.0, "simd": "avx2"})
    assert (entry.int8_tops, entry.fp16_tflops) == (5.12, 1.28)  # 8 × 5 GHz × 128 / 32
    for broken in ({"cores": 8}, {"cores": 8, "boost_ghz": 5.0, "simd": "sse9"}):
        with pytest.raises(DataFileError):
            parse_entry({**base, **broken})


# -- multi-GPU -----------------------------------------------------------------------------


def test_a_layer_split_reads_one_card_and_tensor_parallel_sums() -> None:
    two = _machine("NVIDIA GeForce RTX 3090", 2)
    layer = _ceiling(_stack(), two)
    assert layer.source.bandwidth_gbps == 936 and layer.source.split == roofline.LAYER
    claim = integrity.Claim(1.5 * layer.decode_tps, None, None)
    [flag] = _flags(claim, hardware=two)
    assert "one card's: llama.cpp's default layer split" in flag
    tensor = _stack(engine="vllm", quant="AWQ", tensor_parallel=2)
    summed = _ceiling(tensor, two)
    assert summed.source.bandwidth_gbps == 1872
    assert not _flags(
        integrity.Claim(0.8 * summed.decode_tps, None, None), stack=tensor, hardware=two
    )


def test_an_unknown_split_mode_is_not_trusted_to_sum() -> None:
    two = _machine("NVIDIA GeForce RTX 3090", 2)
    stack = _stack(engine="exllamav2")
    found = _ceiling(stack, two)
    assert found.source.bandwidth_gbps == 936
    [flag] = _flags(integrity.Claim(1.6 * found.decode_tps, None, None), stack=stack, hardware=two)
    assert flag.startswith(integrity.SPLIT_UNKNOWN)


# -- speculation ---------------------------------------------------------------------------


def test_undeclared_decode_above_the_ceiling_asks_for_a_declaration() -> None:
    found = _ceiling()
    [flag] = _flags(integrity.Claim(1.3 * found.decode_tps, None, None))
    assert flag.endswith(": declare speculation if you used it")


def test_speculation_is_bounded_by_draft_length_and_acceptance() -> None:
    found = _ceiling()
    stack = _stack(speculative="draft", spec_draft_n=3, spec_acceptance=0.5)
    # 1 + 3 × 50% = 2.5 tokens per weight read.
    assert integrity.speculation_allowance(run_facts.speculation_of(stack))[0] == 2.5
    assert not _flags(integrity.Claim(2.6 * found.decode_tps, None, None), stack=stack)
    [flag] = _flags(integrity.Claim(3.1 * found.decode_tps, None, None), stack=stack)
    assert "1 + draft length 3 × 50% accepted = 2.5 tokens per read" in flag
    # Without an acceptance, the draft length + 1 at most.
    bare = _stack(speculative="mtp", spec_draft_n=1)
    assert integrity.speculation_allowance(run_facts.speculation_of(bare))[0] == 2.0
    assert _flags(integrity.Claim(2.5 * found.decode_tps, None, None), stack=bare)


def test_the_acceptance_llama_cpp_reported_in_the_trials_is_used() -> None:
    trials = [{"server": {"draft_n": 400, "draft_n_accepted": 100}} for _ in range(3)]
    payload = {"suites": {"speed": {"tasks": [{"metadata": {"trials": trials}}]}}}
    stack = _stack(draft="llama3.2:1b", spec_draft_n=8)
    spec = run_facts.speculation_of(stack, payload)
    assert spec.acceptance == 0.25
    assert integrity.speculation_allowance(spec)[0] == 3.0  # 1 + 8 × 25%


# -- peers ---------------------------------------------------------------------------------


def test_peers_flag_fast_runs_and_only_annotate_slow_ones() -> None:
    peers = [(60.0 + i, None, None) for i in range(9)]
    slow = integrity.Claim(20.0, None, None)
    assert integrity.against_peers(slow, peers, hardware_label="RTX 4090") == []
    [note] = integrity.slower_than_peers(slow, peers, hardware_label="RTX 4090")
    assert note.startswith("slower than 9 of 9 peers: throttling or offload?")
    fast = integrity.Claim(140.0, None, None)
    assert integrity.against_peers(fast, peers, hardware_label="RTX 4090")


# -- one check on every path -----------------------------------------------------------------


@pytest.mark.django_db
def test_a_lab_result_meets_the_same_check(alice, smoke_run) -> None:
    data = copy.deepcopy(smoke_run)
    data["run_id"] = "lab-fake"
    data["model"] = {**data["model"], "model_id": "llama3.1:8b", "quantization": "Q4_K_M"}
    for task in data["suites"]["speed"]["tasks"]:
        for trial in task["metadata"]["trials"]:
            trial["speed_metrics"]["generation_tok_per_sec"] = 1000.0
    outcome = submit_run(payload=data, channel=Channel.LAB_JOB, submitter=alice)
    assert outcome.submission.status == Status.FLAGGED
    assert not outcome.submission.run.published
    assert any("> ceiling" in reason for reason in outcome.submission.flag_reasons)
