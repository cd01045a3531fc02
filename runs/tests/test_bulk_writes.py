"""The COPY write path on Postgres stores exactly what the ORM path stores, and the parallel
import (parser processes, two writer threads) matches a plain one row for row."""

from __future__ import annotations

import importlib
import io
import json
import random
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from runs import bulk
from runs.importers import parse_path, read_file
from runs.importers.records import JsonText
from runs.models import Run, SpeedSample, Stack, SuiteResult, TaskResult
from runs.services import fingerprint
from submissions.intake import import_records
from submissions.management.commands import import_results
from submissions.models import Submission

SMOKE = "generated/v3-smoke-local-run.json"
# Ids and write times (approved_at is the moment of storing, or of the decision) differ.
WRITE_TIMES = ("id", "created_at", "approved_at")
RUN_FIELDS = [f.attname for f in Run._meta.concrete_fields if f.attname not in WRITE_TIMES]


def _snapshot(run: Run) -> dict:
    """Everything stored for a run, without ids that differ between two copies."""
    run = Run.objects.get(pk=run.pk)
    suites = run.suite_results.order_by("id")
    return {
        "run": {name: getattr(run, name) for name in RUN_FIELDS if name != "fingerprint"},
        "submission": Submission.objects.filter(run=run).values("channel", "status").get(),
        "suites": [
            {
                "suite": s.suite,
                "score": s.score,
                "counts": (s.task_count, s.pass_count, s.fail_count),
                "median": s.median_latency_ms,
                "tasks": [
                    {
                        **{
                            f: getattr(t, f)
                            for f in bulk.TASK_COLUMNS
                            if f not in ("suite_result_id",)
                        },
                        "samples": list(t.samples.order_by("id").values(*bulk.SAMPLE_COLUMNS[1:])),
                    }
                    for t in s.tasks.order_by("id")
                ],
            }
            for s in suites
        ],
    }


def _second_copy(record):
    record.client_run_id += "-copy"
    return record


@pytest.mark.django_db
def test_copy_and_orm_paths_store_the_same_rows(fixtures_dir, monkeypatch) -> None:
    assert connection.vendor == "postgresql"
    via_copy = import_records(parse_path(fixtures_dir / SMOKE)).created[0]
    # The ORM path is what SQLite (the embedded default) takes.
    monkeypatch.setattr(bulk, "_copy_runs", bulk._orm_runs)
    monkeypatch.setattr(connection, "vendor", "sqlite")
    via_orm = import_records([_second_copy(parse_path(fixtures_dir / SMOKE)[0])]).created[0]
    monkeypatch.undo()
    copied, orm = _snapshot(via_copy), _snapshot(via_orm)
    assert copied["run"].pop("client_run_id") + "-copy" == orm["run"].pop("client_run_id")
    assert copied == orm
    assert sum(len(s["tasks"]) for s in copied["suites"]) == 39
    assert sum(len(t["samples"]) for s in copied["suites"] for t in s["tasks"]) == 27
    # Task order on the page is id order, and it follows the file.
    raw = json.loads((fixtures_dir / SMOKE).read_text())
    first_suite = copied["suites"][0]
    assert [t["task_id"] for t in first_suite["tasks"]] == [
        t["task_id"] for t in raw["suites"][first_suite["suite"]]["tasks"]
    ]


@pytest.mark.django_db
def test_a_failed_copy_leaves_nothing_behind(fixtures_dir) -> None:
    record = parse_path(fixtures_dir / SMOKE)[0]
    record.suites[0].tasks[1].task_id = record.suites[0].tasks[0].task_id  # duplicate task
    before = {m: m.objects.count() for m in (Run, SuiteResult, TaskResult, SpeedSample)}
    with pytest.raises(IntegrityError), transaction.atomic():
        # Django's IntegrityError, so callers' handlers and the 503 middleware see it.
        bulk.save_runs(
            [
                (
                    Run(
                        stack=Stack.objects.create(comparability_key="k"),
                        fingerprint="f",
                        started_at=record.started_at,
                    ),
                    record.suites,
                )
            ]
        )
    assert {m: m.objects.count() for m in before} == before


def test_read_file_sends_payloads_as_json_text(fixtures_dir) -> None:
    (record,), problem = read_file(fixtures_dir / SMOKE)
    assert problem == ""
    assert isinstance(record.raw_payload, JsonText)
    assert record.raw_payload.load() == json.loads((fixtures_dir / SMOKE).read_text())
    task = record.suites[0].tasks[0]
    assert isinstance(task.metadata, JsonText)
    assert task.metadata.load() == parse_path(fixtures_dir / SMOKE)[0].suites[0].tasks[0].metadata
    assert read_file(fixtures_dir / "does-not-exist.json")[1].startswith("cannot read")


@pytest.mark.django_db
def test_an_imported_file_keeps_its_payload_as_a_json_object(fixtures_dir) -> None:
    call_command("import_results", str(fixtures_dir / SMOKE), stdout=io.StringIO())
    run = Run.objects.get()
    assert run.raw_payload == json.loads((fixtures_dir / SMOKE).read_text())
    with connection.cursor() as cursor:
        cursor.execute("SELECT jsonb_typeof(raw_payload) FROM runs_run WHERE id = %s", [run.pk])
        assert cursor.fetchone() == ("object",)


@pytest.mark.django_db
def test_the_migration_unwraps_payloads_stored_as_strings(fixtures_dir) -> None:
    from django.apps import apps

    migration = importlib.import_module("runs.migrations.0003_run_raw_payload_objects")
    call_command("import_results", str(fixtures_dir / SMOKE), stdout=io.StringIO())
    document = json.loads((fixtures_dir / SMOKE).read_text())
    with connection.cursor() as cursor:  # what the COPY path wrote before the fix
        cursor.execute("UPDATE runs_run SET raw_payload = to_jsonb(raw_payload::text)")
    assert isinstance(Run.objects.get().raw_payload, str)
    with connection.schema_editor() as editor:
        migration.unwrap_string_payloads(apps, editor)
    assert Run.objects.get().raw_payload == document


def _bundles(folder: Path, fixtures_dir: Path, count: int) -> None:
    base = json.loads((fixtures_dir / SMOKE).read_text())
    rng = random.Random(5)
    for number in range(count):
        base["run_id"] = f"bulk-{number:04d}"
        base["model"]["model_id"] = rng.choice(["qwen3:8b", "gemma3:4b", "phi4:14b"])
        base["model"]["quantization"] = rng.choice(["Q4_K_M", "Q8_0"])
        (folder / f"run-{number:04d}.json").write_text(json.dumps(base))


def _stored() -> dict:
    return {
        "runs": sorted(
            Run.objects.values_list("client_run_id", "stack__model_id", "stack__quantization")
        ),
        "tasks": TaskResult.objects.count(),
        "samples": SpeedSample.objects.count(),
        "submissions": Submission.objects.count(),
        "published": Run.objects.filter(published=True).count(),
        "stacks": sorted(Stack.objects.values_list("model_id", "quantization")),
        "best_runs": Stack.objects.filter(best_run__isnull=False).count(),
    }


def _parallel_folder(tmp_path, fixtures_dir) -> tuple[Path, int]:
    """Enough generated bundles for the parallel path, the smoke fixture and a broken file."""
    files = tmp_path / "files"
    files.mkdir()
    count = import_results.PARALLEL_FROM + 20
    _bundles(files, fixtures_dir, count)
    shutil.copy(fixtures_dir / SMOKE, files / "zz-smoke.json")
    (files / "zz-broken.json").write_text('{"run_id": ')
    return files, count


@pytest.mark.django_db(transaction=True)
def test_the_parallel_import_matches_a_plain_one(tmp_path, fixtures_dir) -> None:
    files, count = _parallel_folder(tmp_path, fixtures_dir)

    def run(jobs: int) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        with pytest.raises(Exception, match="1 file"):
            call_command("import_results", str(files), jobs=jobs, stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    def clear() -> None:
        for model in (Submission, Run, Stack):
            model.objects.all().delete()

    clear()
    plain = run(1)
    expected = _stored()
    clear()
    parallel = run(2)
    assert _stored() == expected
    # Three models in two quantizations, and the fixture's own stack: each ranked once.
    assert expected["tasks"] == 39 * (count + 1) and expected["best_runs"] == 7
    # Same report, file by file, in the same order.
    assert parallel == plain
    assert f"total: {count + 1} created, 0 skipped, 1 file(s) rejected" in parallel[0]
    assert "zz-broken.json: line 1 column 12: invalid JSON" in parallel[1]
    # Importing again adds nothing.
    assert f"total: 0 created, {count + 1} skipped" in run(2)[0]
    assert _stored() == expected


@pytest.mark.django_db(transaction=True)
def test_the_parallel_import_reports_files_in_order_across_both_streams(
    tmp_path, fixtures_dir
) -> None:
    files, _count = _parallel_folder(tmp_path, fixtures_dir)
    both = io.StringIO()  # a terminal shows both streams in one
    with pytest.raises(Exception, match="1 file"):
        call_command("import_results", str(files), jobs=2, stdout=both, stderr=both)
    named = [line for line in both.getvalue().splitlines() if ".json" in line]
    assert [line.split(".json")[0].split("/")[-1] for line in named] == sorted(
        path.stem for path in files.iterdir()
    )
    assert named[-2].startswith("rejected ") and named[-1].startswith(str(files / "zz-smoke"))


def test_fingerprints_do_not_depend_on_the_transfer(fixtures_dir) -> None:
    (sent,), _ = read_file(fixtures_dir / SMOKE)
    assert fingerprint(sent) == fingerprint(parse_path(fixtures_dir / SMOKE)[0])
