"""Import and stack-statistics services, including concurrent writers."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime

import pytest
from django.db import connection

from runs.importers.records import HardwareRecord, ImportedSuite, RunRecord
from runs.models import Hardware, Run, Stack
from runs.services import refresh_stack_stats
from submissions.intake import import_records
from submissions.models import Status


def _record(**overrides) -> RunRecord:
    fields = dict(
        source_format="run-v3",
        started_at=datetime(2026, 11, 1, 12, tzinfo=UTC),
        model_id="qwen3:8b",
        quantization="Q4_K_M",
        score_scale="v3",
        client_run_id="r-1",
        engine="llama.cpp",
        profile="core",
        requested_profile="core",
        score_schema_version="3.0.0",
        manifest_hash="sha256:" + "ab" * 32,
        coverage_score=100.0,
        comparable=True,
        overall_score=60.0,
        quality_score=55.0,
        speed_score=70.0,
        reliability_score=100.0,
        value_score=30.0,
        speed={"decode_tps_median": 50.0},
        hardware=HardwareRecord(
            cpu="AMD Ryzen 9 7950X",
            gpu="NVIDIA GeForce RTX 4090",
            vram_gb=24,
            ram_gb=64,
            os_name="Linux",
        ),
        suites=[ImportedSuite(suite="toolcall", score=55.0, task_count=15, pass_count=8)],
        submitter_name="ada",
    )
    fields.update(overrides)
    return RunRecord(**fields)


@pytest.mark.django_db
def test_two_spellings_of_one_gpu_share_a_hardware_row() -> None:
    import_records(
        [
            _record(),
            _record(
                client_run_id="r-2",
                hardware=HardwareRecord(
                    cpu="AMD Ryzen 9 7950X",
                    gpu="RTX 4090",
                    vram_gb=24,
                    ram_gb=63.8,
                    os_name="Linux",
                ),
            ),
        ]
    )
    assert Run.objects.count() == 2
    assert Hardware.objects.get().label == "RTX 4090 24 GB"


@pytest.mark.django_db
def test_the_best_comparable_run_represents_a_stack() -> None:
    import_records(
        [
            _record(client_run_id="good", overall_score=70.0),
            _record(client_run_id="custom", overall_score=95.0, comparable=False, profile="custom"),
            _record(client_run_id="worse", overall_score=40.0, submitter_name="grace"),
        ]
    )
    stack = Stack.objects.get()
    assert stack.best_run.client_run_id == "good"
    assert stack.published_run_count == 3
    assert stack.submitter_count == 2


@pytest.mark.django_db
def test_pending_runs_are_not_published_or_counted() -> None:
    import_records([_record()], status=Status.PENDING)
    stack = Stack.objects.get()
    assert stack.best_run is None
    assert stack.published_run_count == 0
    assert not Run.objects.get().published


@pytest.mark.django_db
def test_refresh_forgets_a_run_that_is_no_longer_published() -> None:
    result = import_records([_record()])
    Run.objects.filter(id=result.created[0].id).update(published=False)
    refresh_stack_stats(stack_ids=result.stack_ids)
    assert Stack.objects.get().best_run is None


@pytest.mark.django_db(transaction=True)
def test_concurrent_imports_of_one_file_store_each_run_once() -> None:
    records = [_record(client_run_id=f"r-{i}", overall_score=50.0 + i) for i in range(10)]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            import_records(copy.deepcopy(records))
        except BaseException as exc:  # surfaced below; a thread must not swallow it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert Run.objects.count() == 10
    assert Stack.objects.get().published_run_count == 10
