"""Hardware classes: what speeds are compared within, derived wherever a run is written."""

from __future__ import annotations

import copy
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import F

from runs import normalize
from runs.importers import parse_run_payload
from runs.importers.records import RunRecord
from runs.models import Hardware, HardwareClass, Run
from submissions.intake import import_batch, import_records
from submissions.seeding import FIXTURE_FILES

SMOKE = "generated/v3-smoke-local-run.json"

COMMON = {"cpu": "AMD Ryzen 9 7950X", "ram_gb": 63.7, "os_name": "Linux"}


@pytest.mark.parametrize(
    ("machine", "label", "slug", "kind"),
    [
        (
            {"gpu": "NVIDIA GeForce RTX 4090", "vram_gb": 23.99},
            "RTX 4090 24 GB",
            "rtx-4090-24gb",
            "gpu",
        ),
        # The v3 CLI lists every card and sums their memory.
        (
            {"gpu": "NVIDIA GeForce RTX 3090, NVIDIA GeForce RTX 3090", "vram_gb": 48},
            "2× RTX 3090 24 GB",
            "2x-rtx-3090-24gb",
            "gpu",
        ),
        (
            {"gpu": "RTX 3090", "gpu_count": 2, "vram_gb": 48},
            "2× RTX 3090 24 GB",
            "2x-rtx-3090-24gb",
            "gpu",
        ),
        ({"gpu": "NVIDIA H100 80GB HBM3", "vram_gb": 79.6}, "H100 80 GB", "h100-80gb", "gpu"),
        (
            {"gpu": "AMD Radeon RX 7900 XTX", "vram_gb": 24},
            "RX 7900 XTX 24 GB",
            "rx-7900-xtx-24gb",
            "gpu",
        ),
        # No memory recorded: the class says so (issue 32), never a bare peer of the sized one.
        ({"gpu": "NVIDIA GeForce RTX 4090"}, "RTX 4090 · memory not reported", "rtx-4090", "gpu"),
        (
            {"gpu": "Apple M2 Max GPU", "cpu": "Apple M2 Max", "vram_gb": 64, "ram_gb": 64},
            "Apple M2 Max 64 GB",
            "apple-m2-max-64gb",
            "apple",
        ),
        (
            {"gpu": "", "cpu": "Apple M1 Pro", "ram_gb": 32},
            "Apple M1 Pro 32 GB",
            "apple-m1-pro-32gb",
            "apple",
        ),
        (
            {"gpu": "", "cpu": "AMD EPYC 7763 64-Core Processor", "ram_gb": 503.7},
            "CPU only: AMD EPYC 7763 · 512 GB",
            "cpu-amd-epyc-7763-512gb",
            "cpu",
        ),
        (
            {"gpu": "", "cpu": "AMD EPYC 7763", "ram_gb": 512, "memory_channels": 8},
            "CPU only: AMD EPYC 7763 · 512 GB · 8 memory channels",
            "cpu-amd-epyc-7763-512gb-8ch",
            "cpu",
        ),
        # An old CLI's machine label in the GPU field is a CPU, not a GPU named "EPYC RAM".
        (
            {"gpu": "AMD EPYC 512GB RAM", "cpu": "AMD EPYC", "ram_gb": 512},
            "CPU only: AMD EPYC · 512 GB",
            "cpu-amd-epyc-512gb",
            "cpu",
        ),
    ],
)
def test_each_machine_has_its_class(machine: dict, label: str, slug: str, kind: str) -> None:
    fields = {**COMMON, "gpu_count": 1, "vram_gb": None, **machine}
    found = normalize.hardware_class(**fields)
    assert (found["label"], found["slug"], found["kind"]) == (label, slug, kind)


def test_one_card_is_not_two_and_memory_sizes_are_apart() -> None:
    one = normalize.hardware_class(gpu="RTX 3090", gpu_count=1, vram_gb=24, **COMMON)
    two = normalize.hardware_class(gpu="RTX 3090", gpu_count=2, vram_gb=48, **COMMON)
    small = normalize.hardware_class(gpu="RTX 3060", gpu_count=1, vram_gb=8, **COMMON)
    large = normalize.hardware_class(gpu="RTX 3060", gpu_count=1, vram_gb=12, **COMMON)
    assert len({one["key"], two["key"]}) == 2 and (one["count"], two["count"]) == (1, 2)
    assert (two["memory_gb"], one["memory_gb"]) == (48, 24)
    assert small["key"] != large["key"]
    # The host's CPU and RAM do not split a GPU's class; they stay on the machine row.
    other_host = normalize.hardware_class(
        gpu="RTX 3090",
        gpu_count=1,
        vram_gb=23.99,
        cpu="Intel Core i9",
        ram_gb=128,
        os_name="Windows",
    )
    assert other_host["key"] == one["key"]


def test_remote_endpoints_are_marked_and_never_name_their_host() -> None:
    remote = normalize.remote_class("fakecloud")
    assert (remote["kind"], remote["label"], remote["slug"]) == (
        "remote",
        "Remote endpoint · fakecloud",
        "remote-fakecloud",
    )


def _smoke(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / SMOKE).read_text())


@pytest.mark.django_db
def test_a_cpu_only_machine_label_is_a_cpu_on_import(fixtures_dir: Path) -> None:
    document = _smoke(fixtures_dir)
    # What the CLI writes on a machine without a GPU: its label is the CPU and RAM.
    document["machine"].update(
        gpu="",
        gpu_memory_gb=0.0,
        cpu="AMD EPYC 7763 64-Core Processor",
        system_memory_gb=503.7,
        hardware_label="AMD EPYC 7763 64-Core Processor 504GB RAM",
    )
    import_records([parse_run_payload(document)])

    run = Run.objects.select_related("hardware", "hardware_class").get()
    assert run.hardware.gpu_model == "" and run.hardware.accelerator == "cpu"
    assert run.hardware_class.label == "CPU only: AMD EPYC 7763 · 512 GB"
    assert run.hardware.label == run.hardware_class.label
    assert run.hardware.hardware_class_id == run.hardware_class_id


@pytest.mark.django_db
def test_a_label_that_names_a_gpu_still_counts_as_one(fixtures_dir: Path) -> None:
    document = _smoke(fixtures_dir)
    document["machine"].update(gpu="", hardware_label="NVIDIA RTX 4090 24GB", gpu_memory_gb=24.0)
    import_records([parse_run_payload(document)])
    assert Run.objects.get().hardware_class.slug == "rtx-4090-24gb"


@pytest.mark.django_db
def test_every_fixture_run_gets_a_class(fixtures_dir: Path) -> None:
    names = [*FIXTURE_FILES, "leaderboard.json", "generated/v3-failed/run.json"]
    out = io.StringIO()
    call_command("import_results", *[str(fixtures_dir / n) for n in names], stdout=out, stderr=out)

    assert Run.objects.count() > 20
    assert not Run.objects.filter(hardware_class=None).exists()
    assert not Hardware.objects.filter(hardware_class=None).exists()
    # A run's class is its machine's, kept on the run so speed queries need no join.
    assert (
        not Run.objects.exclude(hardware=None)
        .exclude(hardware_class_id=F("hardware__hardware_class_id"))
        .exists()
    )
    remote = Run.objects.get(profile="custom")
    assert remote.hardware is None
    assert remote.hardware_class.label == "Remote endpoint · fakecloud"
    probe = Run.objects.get(source_format="speed-jsonl")  # the speed probe recorded no machine
    assert probe.hardware_class.kind == "unknown"
    kinds = set(HardwareClass.objects.values_list("kind", flat=True))
    assert {"gpu", "apple", "cpu", "remote", "unknown"} <= kinds


@pytest.mark.django_db
def test_the_batched_copy_path_sets_classes_as_the_single_path_does(fixtures_dir: Path) -> None:
    document = _smoke(fixtures_dir)
    remote = copy.deepcopy(document)
    remote["run_id"] = "remote-1"
    remote["is_remote"] = True
    remote["provider"] = "fakecloud"
    remote["machine"] = {"is_remote": True}
    results = import_batch(
        [("a.json", [parse_run_payload(document)]), ("b.json", [parse_run_payload(remote)])]
    )

    assert [len(result.created) for result in results] == [1, 1]
    local, far = results[0].created[0], results[1].created[0]
    stored = {run.id: run for run in Run.objects.select_related("hardware_class")}
    assert stored[local.id].hardware_class.slug == "rtx-4090-24gb"
    assert stored[far.id].hardware_class.slug == "remote-fakecloud"


@pytest.mark.parametrize(
    ("machine", "kind"),
    [
        ("Apple M1 Pro", "apple"),
        ("NVIDIA GeForce RTX 4090", "gpu"),
        ("AMD Ryzen 7 7840U w/ Radeon 780M Graphics", "cpu"),
        ("AMD EPYC 7763 64-Core Processor", "cpu"),
    ],
)
def test_an_exports_machine_label_is_read_as_what_it_names(machine: str, kind: str) -> None:
    from runs.importers.exports import _hardware_from_label
    from runs.services import _hardware_fields

    record = RunRecord(
        source_format="leaderboard-v2",
        started_at=datetime(2026, 5, 1, tzinfo=UTC),
        model_id="m",
        score_scale="v2",
        hardware=_hardware_from_label(machine),
    )
    assert normalize.hardware_class(**_hardware_fields(record.hardware))["kind"] == kind
