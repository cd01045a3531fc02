"""The data migration re-derives stored machines, stacks and runs (runs 0007)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from lab.models import WorkerHost
from runs import normalize
from runs.models import Hardware, HardwareClass, Lane, Run, Stack
from submissions.models import UploadAttempt

BEFORE = [("runs", "0004_redact_public_fields")]


def _migrate(targets):
    """Migrate to `targets`; the models as they are then (every app's applied migrations)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor.migrate(targets).apps


def _latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def _old_machine(apps, *, cpu: str, gpu: str, gpu_count: int, vram: float | None, ram: float):
    """A machine as the importers stored it before hardware classes, through the identity
    code of that time: a CPU-only machine's label came in as its GPU ("gpu or label")."""
    vendor = normalize.gpu_vendor(gpu)
    gpu_model = normalize.canonical_gpu(gpu)
    count = max(gpu_count, 1) if gpu_model else 0
    accelerator = normalize.ACCELERATOR_FOR_VENDOR.get(vendor, "cpu") if gpu_model else "cpu"
    cpu_model = normalize.canonical_cpu(cpu)
    key = "|".join(
        [
            normalize.slug(gpu_model) or "no-gpu",
            str(count),
            f"{vram:g}" if vram else "-",
            normalize.slug(cpu_model),
            f"{ram:g}",
            "linux",
            accelerator,
        ]
    )
    return apps.get_model("runs", "Hardware").objects.create(
        canonical_key=key,
        cpu_model=cpu_model,
        gpu_model=gpu_model,
        gpu_vendor=vendor,
        gpu_count=count,
        vram_gb=vram,
        ram_gb=ram,
        os="linux",
        accelerator=accelerator,
    )


def _old_stack(apps, key: str, **fields):
    base = dict(model_id="qwen3:32b", quantization="Q8_0", engine="ollama", harness="raw")
    return apps.get_model("runs", "Stack").objects.create(
        comparability_key=key, **{**base, **fields}
    )


def _old_run(apps, number: int, stack, hardware, *, decode: float, **fields):
    values = dict(
        stack=stack,
        hardware=hardware,
        fingerprint=f"fp-{number}",
        client_run_id=f"run-{number}",
        benchmark_version="3.0.0",
        score_scale="v3",
        comparable=True,
        overall_score=50.0 + number,
        quality_score=60.0,
        decode_tps_median=decode,
        started_at=datetime(2026, 10, 1, number, tzinfo=UTC),
        source_format="run-v3",
        published=True,
    )
    run = apps.get_model("runs", "Run").objects.create(**{**values, **fields})
    apps.get_model("submissions", "Submission").objects.create(
        run=run, channel="import", status="approved", submitter_name=f"person-{number}"
    )
    return run


def _stored_before(old) -> dict:
    """Machines, stacks and runs as the old code stored them, with its mistakes."""
    # runjson's old `gpu=gpu or label` on a machine without a GPU: a GPU named "EPYC RAM".
    epyc_ram = _old_machine(
        old, cpu="AMD EPYC", gpu="AMD EPYC 512GB RAM", gpu_count=1, vram=None, ram=512
    )
    assert epyc_ram.gpu_model == "EPYC RAM" and epyc_ram.gpu_count == 1
    # The same machine uploaded once with no label: already CPU-only, under the new key.
    cpu_only = _old_machine(old, cpu="AMD EPYC", gpu="", gpu_count=0, vram=None, ram=512)
    pair = _old_machine(
        old,
        cpu="AMD Threadripper",
        gpu="NVIDIA RTX 3090, NVIDIA RTX 3090",
        gpu_count=1,
        vram=48,
        ram=128,
    )
    host = old.get_model("worker", "WorkerHost").objects.create(name="lab-1", hardware=epyc_ram)
    # One model file with the same settings, one of them recorded as unset: one stack once
    # launch settings and digests are normalised.
    digest = "ab" * 32
    first = _old_stack(
        old, "old-key-1", model_sha256=digest.upper(), launch_settings={"rope_scaling": None}
    )
    second = _old_stack(old, "old-key-2", model_sha256=digest)
    other = _old_stack(old, "old-key-3", model_id="qwen3:8b")
    runs = [
        _old_run(old, 1, first, epyc_ram, decode=4.0),
        _old_run(old, 2, second, cpu_only, decode=5.0),
        _old_run(old, 3, second, epyc_ram, decode=4.5),
        _old_run(old, 4, first, pair, decode=30.0),
        _old_run(old, 5, other, None, decode=80.0, scoring_mode="remote", provider="fakecloud"),
        _old_run(old, 6, other, None, decode=9.0, source_format="speed-jsonl"),
    ]
    old.get_model("submissions", "UploadAttempt").objects.create(stack=second, run=runs[1])
    return {
        "epyc_ram": epyc_ram,
        "cpu_only": cpu_only,
        "pair": pair,
        "host": host,
        "digest": digest,
        "first": first,
        "second": second,
        "other": other,
        "runs": runs,
    }


@pytest.mark.django_db(transaction=True)
def test_stored_rows_are_rederived_merged_and_laned() -> None:
    before = _stored_before(_migrate(BEFORE))
    _migrate(_latest())
    machine = _assert_machines_and_classes(before)
    _assert_stacks_merged_and_laned(before, machine)


def _assert_machines_and_classes(before: dict) -> Hardware:
    cpu_only, epyc_ram, pair, runs = (before[k] for k in ("cpu_only", "epyc_ram", "pair", "runs"))
    machine = Hardware.objects.get(pk=cpu_only.pk)  # the row already under the right key stays
    assert not Hardware.objects.filter(pk=epyc_ram.pk).exists()
    assert machine.label == "CPU only: AMD EPYC · 512 GB"
    assert machine.hardware_class.label.startswith("CPU only: AMD EPYC")
    assert (machine.hardware_class.kind, machine.gpu_model, machine.gpu_count) == ("cpu", "", 0)
    assert set(Run.objects.filter(hardware=machine).values_list("pk", flat=True)) == {
        runs[0].pk,
        runs[1].pk,
        runs[2].pk,
    }
    assert WorkerHost.objects.get(pk=before["host"].pk).hardware_id == machine.pk
    two = Hardware.objects.get(pk=pair.pk)
    assert (two.gpu_count, two.hardware_class.label) == (2, "2× RTX 3090 24 GB")

    # Every run is in a class: its machine's, the remote endpoint's, or unknown hardware.
    classes = dict(Run.objects.values_list("client_run_id", "hardware_class__slug"))
    assert classes == {
        "run-1": "cpu-amd-epyc-512gb",
        "run-2": "cpu-amd-epyc-512gb",
        "run-3": "cpu-amd-epyc-512gb",
        "run-4": "2x-rtx-3090-24gb",
        "run-5": "remote-fakecloud",
        "run-6": "unknown-hardware",
    }
    return machine


def _assert_stacks_merged_and_laned(before: dict, machine: Hardware) -> None:
    first, second, other, digest = (before[k] for k in ("first", "second", "other", "digest"))
    # The two are one stack now, keyed as new uploads are.
    assert not Stack.objects.filter(pk=second.pk).exists()
    merged = Stack.objects.get(pk=first.pk)
    assert (merged.model_sha256, merged.launch_settings) == (digest, {})
    assert merged.comparability_key == normalize.stack_identity(
        model_id="qwen3:32b",
        quantization="Q8_0",
        model_sha256=digest,
        engine="ollama",
        harness="raw",
        context_length=None,
        kv_cache_type="",
        draft_model="",
        launch_settings={},
    )
    assert merged.runs.count() == 4
    assert UploadAttempt.objects.get().stack_id == merged.pk

    # And every stack has its lanes.
    lane = Lane.objects.get(stack=merged, hardware_class=machine.hardware_class)
    assert (lane.run_count, lane.decode_median, lane.decode_low, lane.decode_high) == (3, 4.5, 4, 5)
    assert Lane.objects.get(stack=merged, hardware_class=None).run_count == 4
    assert set(
        Lane.objects.filter(stack_id=other.pk).values_list("hardware_class__kind", flat=True)
    ) == {
        "remote",
        "unknown",
        None,
    }
    assert HardwareClass.objects.filter(kind="unknown").get().lanes.get().decode_median is None


@pytest.mark.django_db(transaction=True)
def test_the_migration_goes_back_without_touching_anything() -> None:
    _migrate([("runs", "0006_hardware_class_refinements")])
    _migrate(_latest())
    assert Run.objects.count() == 0
