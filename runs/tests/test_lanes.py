"""Lanes: a stack's figures per hardware class, never pooled across machines for speed."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db.models import F

from runs import demo, normalize
from runs.importers.records import HardwareRecord, ImportedSuite, RunRecord
from runs.models import Lane, Run, Stack
from runs.services import refresh_stack_stats
from submissions.intake import import_records
from submissions.models import Status, Submission
from worker.rules.stats import median_interval

pytestmark = pytest.mark.django_db

RTX_4090 = HardwareRecord(cpu="AMD Ryzen 9 7950X", gpu="NVIDIA GeForce RTX 4090", vram_gb=24)
EPYC = HardwareRecord(cpu="AMD EPYC 7763 64-Core Processor", gpu="", gpu_count=0, ram_gb=512)
_numbers = iter(range(10_000))


def _run(hardware: HardwareRecord | None, decode: float, quality: float, **overrides) -> RunRecord:
    number = next(_numbers)
    fields = dict(
        source_format="run-v3",
        started_at=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=number),
        model_id="qwen3:8b",
        quantization="Q4_K_M",
        score_scale="v3",
        client_run_id=f"run-{number}",
        engine="llama.cpp",
        benchmark_version="3.1.0",
        profile="core",
        score_schema_version="3.1.0",
        coverage_score=100.0,
        comparable=True,
        overall_score=round(0.7 * quality + decode / 100, 2),
        quality_score=quality,
        speed_score=50.0,
        reliability_score=100.0,
        speed={
            "decode_tps_median": decode,
            "prefill_tps_median": decode * 20,
            "ttft_ms_median": 5000 / decode,
        },
        hardware=hardware,
        suites=[ImportedSuite(suite="toolcall", score=quality, task_count=15, pass_count=8)],
        submitter_name=f"person-{number % 3}",
    )
    fields.update(overrides)
    return RunRecord(**fields)


def _lanes() -> dict[str, Lane]:
    return {
        (lane.hardware_class.slug if lane.hardware_class else "pooled"): lane
        for lane in Lane.objects.select_related("hardware_class", "best_run")
    }


def test_speed_stays_in_its_class_and_quality_is_pooled() -> None:
    gpu = [_run(RTX_4090, decode, quality) for decode, quality in [(120, 60), (130, 62), (125, 58)]]
    cpu = [
        _run(EPYC, decode, quality) for decode, quality in [(9, 61), (11, 59), (10, 63), (8, 57)]
    ]
    import_records(gpu + cpu)

    lanes = _lanes()
    assert set(lanes) == {"rtx-4090-24gb", "cpu-amd-epyc-7763-512gb", "pooled"}
    on_gpu, on_cpu, pooled = (
        lanes["rtx-4090-24gb"],
        lanes["cpu-amd-epyc-7763-512gb"],
        lanes["pooled"],
    )
    assert (on_gpu.run_count, on_cpu.run_count, pooled.run_count) == (3, 4, 7)
    assert on_gpu.decode_median == 125 and (on_gpu.decode_low, on_gpu.decode_high) == (120, 130)
    expected = median_interval([9, 11, 10, 8])
    assert (on_cpu.decode_median, on_cpu.decode_low, on_cpu.decode_high) == (
        expected["median"],
        expected["low"],
        expected["high"],
    )
    assert on_cpu.prefill_median == 190 and on_cpu.ttft_median == pytest.approx(5000 / 9.5, 0.03)
    # Quality does not depend on the machine: the pooled lane has it from all seven runs, and
    # no speed at all.
    assert pooled.quality_median == 60
    assert (pooled.decode_median, pooled.prefill_median, pooled.ttft_median) == (None, None, None)
    # Each lane's best run is its own: the fastest machine never represents the CPU lane.
    assert on_cpu.best_run.hardware.accelerator == "cpu"
    assert on_gpu.best_score == max(r.overall_score for r in gpu)
    assert pooled.best_run.quality_score == 63 and pooled.best_score == 63
    assert (on_gpu.submitter_count, pooled.submitter_count) == (3, 3)


def test_below_three_runs_a_lane_has_a_median_and_no_interval() -> None:
    import_records([_run(RTX_4090, 100, 60), _run(RTX_4090, 140, 70)])
    lane = _lanes()["rtx-4090-24gb"]
    assert lane.run_count == 2 and lane.best_run.decode_tps_median == 140
    # The median of the two, not the best run's figure; an interval needs three runs.
    assert (lane.decode_median, lane.quality_median) == (120.0, 65.0)
    assert (lane.decode_low, lane.decode_high, lane.quality_low) == (None, None, None)


def test_only_like_is_counted_with_like() -> None:
    import_records(
        [
            _run(RTX_4090, 100, 60),
            _run(RTX_4090, 900, 99, comparable=False),  # skipped tasks: not ranked
            _run(RTX_4090, 110, 61, benchmark_version="3.2.0"),
            _run(RTX_4090, 50, 0, score_scale="speed", overall_score=None, quality_score=None),
        ]
    )
    lanes = {
        (lane.hardware_class_id is None, lane.score_scale, lane.benchmark_version): lane
        for lane in Lane.objects.all()
    }
    assert set(lanes) == {
        (False, "v3", "3.1.0"),
        (True, "v3", "3.1.0"),
        (False, "v3", "3.2.0"),
        (True, "v3", "3.2.0"),
        # Speed-only runs have their own list, and no pooled lane; they are versioned by their
        # speed method (the earlier CLI's here), not by the benchmark's tasks.
        (False, "speed", "cli-0.3"),
    }
    v3 = lanes[(False, "v3", "3.1.0")]
    assert v3.run_count == 1 and v3.best_run.decode_tps_median == 100
    assert v3.attempt_count == 2  # the non-comparable upload is an attempt all the same
    speed = lanes[(False, "speed", "cli-0.3")]
    assert speed.best_score == 50 and speed.quality_median is None


def test_attempts_count_every_upload_whatever_became_of_it() -> None:
    import_records([_run(RTX_4090, 100 + i, 60) for i in range(3)])
    for status in (Status.REJECTED, Status.FLAGGED, Status.WITHDRAWN, Status.PENDING):
        import_records([_run(RTX_4090, 500, 90)], status=status)
    import_records([_run(EPYC, 9, 60)], status=Status.REJECTED)

    lane = _lanes()["rtx-4090-24gb"]
    assert (lane.run_count, lane.attempt_count) == (3, 7)
    assert lane.best_run.decode_tps_median == 102  # no unpublished run ever represents a lane
    assert _lanes()["pooled"].attempt_count == 8
    assert "cpu-amd-epyc-7763-512gb" not in _lanes()  # no published run there: no lane


def test_a_lane_follows_moderation() -> None:
    result = import_records([_run(RTX_4090, 100 + i, 60) for i in range(3)])
    stack_id = result.created[0].stack_id
    first = Lane.objects.get(hardware_class__isnull=False)

    refresh_stack_stats(stack_ids=[stack_id])
    again = Lane.objects.get(hardware_class__isnull=False)
    # Nothing changed: the lane keeps its row and the time its figures were worked out.
    assert (again.pk, again.refreshed_at) == (first.pk, first.refreshed_at)

    Run.objects.filter(pk=result.created[0].pk).update(published=False)
    refresh_stack_stats(stack_ids=[stack_id])
    lane = Lane.objects.get(hardware_class__isnull=False)
    assert (lane.run_count, lane.decode_median, lane.decode_low) == (2, 101.5, None)

    Run.objects.filter(stack_id=stack_id).update(published=False)
    refresh_stack_stats(stack_ids=[stack_id])
    assert not Lane.objects.exists()
    assert Stack.objects.get().best_run is None


def test_the_bulk_seed_builds_lanes_for_every_class() -> None:
    call_command("seed_demo", "--runs", "3000", stdout=io.StringIO())

    assert not Run.objects.filter(hardware_class=None).exists()
    assert (
        not Run.objects.exclude(hardware=None)
        .exclude(hardware_class_id=F("hardware__hardware_class_id"))
        .exists()
    )
    published = Run.objects.filter(published=True)
    keys = published.values("stack", "hardware_class").distinct().count()
    assert Lane.objects.filter(hardware_class__isnull=False).count() == keys
    assert Lane.objects.filter(hardware_class__isnull=True).count() == (
        published.values("stack").distinct().count()
    )
    kinds = set(published.values_list("hardware_class__kind", flat=True).distinct())
    assert kinds == {"gpu", "apple", "cpu", "remote"}
    # Rejected uploads are attempts: some lanes have more attempts than runs.
    assert Submission.objects.filter(status=Status.REJECTED).exists()
    assert Lane.objects.filter(attempt_count__gt=F("run_count")).exists()


def test_demo_speeds_stay_under_each_machines_roofline() -> None:
    call_command("seed_demo", "--runs", "2000", stdout=io.StringIO())
    bandwidth = {}
    for hw in demo.HARDWARE:
        if hw.kind != "remote":
            fields = dict(cpu=hw.cpu, gpu=hw.gpu, gpu_count=hw.gpu_count, vram_gb=hw.vram_gb)
            found = normalize.hardware_class(
                **fields, ram_gb=hw.ram_gb, os_name=hw.os_name, memory_channels=hw.memory_channels
            )
            bandwidth[found["slug"]] = (hw.bandwidth_gbs, hw.gpu_count)
    params = {model: size for model, size, _quality in demo.MODELS} | demo.ACTIVE_PARAMS_B
    bits = {quant: bits for quant, bits, _factor in demo.QUANTS}
    checked = 0
    runs = Run.objects.exclude(hardware_class__kind="remote").select_related(
        "stack", "hardware_class"
    )
    for run in runs[:1500]:
        per_card, cards = bandwidth[run.hardware_class.slug]
        # Tensor parallelism (vLLM) reads every card at once; layer splits read one at a time.
        reach = per_card * cards if run.stack.engine == "vllm" else per_card
        ceiling = reach / (params[run.stack.model_id] * bits[run.stack.quantization] / 8)
        assert run.decode_tps_median <= ceiling, (run.hardware_class.label, run.stack.label)
        checked += 1
    assert checked == 1500


def test_a_run_records_how_its_speed_was_measured_and_speed_lanes_follow_it() -> None:
    """Issue 29: the speed method's version is recorded on every run (the bundle's, else its
    format's) and keys the speed-only lanes; a hostile declared version is not taken."""
    speed = dict(score_scale="speed", overall_score=None, quality_score=None)
    import_records(
        [
            _run(RTX_4090, 50, 0, source_format="bundle-1", benchmark_version="4.0.0", **speed),
            _run(RTX_4090, 52, 0, source_format="bundle-1", benchmark_version="4.1.0", **speed),
            _run(RTX_4090, 54, 0, source_format="bundle-1", speed_version="2", **speed),
            _run(RTX_4090, 56, 0, source_format="bundle-1", speed_version="<b>x</b>", **speed),
            _run(RTX_4090, 58, 0, **speed),  # the earlier CLI's run.json
        ]
    )
    versions = sorted(Run.objects.values_list("speed_version", flat=True))
    assert versions == ["1", "1", "1", "2", "cli-0.3"]
    lanes = {lane.benchmark_version: lane for lane in Lane.objects.filter(score_scale="speed")}
    assert set(lanes) == {"1", "2", "cli-0.3"}
    # Two benchmark versions, one speed method: one lane (and the hostile one fell back to it).
    assert lanes["1"].run_count == 3 and lanes["1"].decode_median == 52.0
