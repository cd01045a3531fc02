"""One write path for runs (submissions.intake): one builder, two transports.

A record stored alone through the ORM's INSERTs and the same record stored inside a batch
through COPY leave the same rows, column by column, in every table a run touches. Runs once
written by COPY kept their payload as a JSON string (migration runs/0003); this is the test
that would have caught it.
"""

from __future__ import annotations

import copy as copying

import pytest
from django.db import connection, models, transaction

from runs.importers import parse_path
from runs.models import Hardware, HardwareClass, SpeedSample, Stack, SuiteResult, TaskResult
from submissions.intake import NewRun, store_runs
from submissions.models import Channel, Status, Submission

SMOKE = "generated/v3-smoke-local-run.json"
# Columns that name a row rather than describe it, or the moment it was written.
_NAMING = {"id", "created_at", "decided_at", "approved_at"}


def _columns(obj: models.Model) -> dict:
    """Every stored column but ids and write times, read back from the database."""
    fresh = type(obj).objects.get(pk=obj.pk)
    return {
        f.attname: getattr(fresh, f.attname)
        for f in type(obj)._meta.concrete_fields
        if f.attname not in _NAMING and not f.is_relation
    }


def _stored(submission: Submission) -> dict:
    """All rows stored for the submission's run, parents before children, in id order."""
    run = submission.run
    suites = list(SuiteResult.objects.filter(run=run).order_by("id"))
    tasks = list(TaskResult.objects.filter(suite_result__run=run).order_by("id"))
    samples = SpeedSample.objects.filter(task_result__suite_result__run=run).order_by("id")
    with connection.cursor() as cursor:
        # The column's own JSON type: a payload kept as a string is 'string' here.
        cursor.execute("SELECT jsonb_typeof(raw_payload) FROM runs_run WHERE id = %s", [run.pk])
        (payload_type,) = cursor.fetchone()
    return {
        "submission": _columns(submission),
        "decided": Submission.objects.get(pk=submission.pk).decided_at is not None,
        "run": _columns(run),
        "payload_type": payload_type,
        "stack": _columns(Stack.objects.get(pk=run.stack_id)),
        "hardware": _columns(Hardware.objects.get(pk=run.hardware_id)),
        "class": _columns(HardwareClass.objects.get(pk=run.hardware_class_id)),
        "suites": [_columns(s) for s in suites],
        "tasks": [_columns(t) for t in tasks],
        "samples": [_columns(s) for s in samples],
    }


def _entry(record) -> NewRun:
    return NewRun(
        record=copying.deepcopy(record),
        channel=Channel.IMPORT,
        status=Status.APPROVED,
        submitter_name="someone",
        source_name="run.json",
        is_verified=True,
    )


def _other(record, suffix: str) -> NewRun:
    entry = _entry(record)
    entry.record.client_run_id += suffix
    entry.record.started_at = entry.record.started_at.replace(year=2025)
    return entry


def _written_then_undone(entries: list[NewRun], position: int, *, copy: bool) -> dict:
    """The rows that store_runs leaves for entries[position], then none of them (so the same
    run can be stored again, identity rows included)."""
    with transaction.atomic():
        submissions = store_runs(entries, copy=copy)
        rows = _stored(submissions[position])
        transaction.set_rollback(True)
    return rows


@pytest.mark.django_db
def test_a_run_stored_alone_and_in_a_copied_batch_leaves_the_same_rows(fixtures_dir) -> None:
    assert connection.vendor == "postgresql"
    (record,) = parse_path(fixtures_dir / SMOKE)
    alone = _written_then_undone([_entry(record)], 0, copy=False)
    batched = _written_then_undone(
        [_other(record, "-a"), _entry(record), _other(record, "-b")], 1, copy=True
    )
    assert batched == alone
    # What the comparison covers: a payload kept as an object, tasks with their JSON
    # metadata, their speed samples, and the submission's own columns.
    assert alone["payload_type"] == "object"
    assert isinstance(alone["run"]["raw_payload"], dict) and alone["run"]["raw_payload"]
    assert len(alone["tasks"]) == 39 and len(alone["samples"]) == 27
    assert all(isinstance(t["metadata"], dict) for t in alone["tasks"])
    assert alone["submission"]["submitter_name"] == "someone"
    assert alone["run"]["published"] and alone["decided"]


@pytest.mark.django_db
def test_the_upload_route_and_the_import_route_build_the_run_alike(fixtures_dir) -> None:
    """Whatever stores it (one upload, or an imported file's batch), a run's row is the
    builder's: only what the route itself decides (status, submitter) differs."""
    (record,) = parse_path(fixtures_dir / SMOKE)
    upload = _entry(record)
    upload.channel, upload.submitter_name, upload.source_name = Channel.API_KEY, "", ""
    uploaded = _written_then_undone([upload], 0, copy=True)
    imported = _written_then_undone([_other(record, "-x"), _entry(record)], 1, copy=True)
    assert uploaded["run"] == imported["run"]
    assert uploaded["suites"] == imported["suites"] and uploaded["tasks"] == imported["tasks"]
    assert uploaded["submission"]["channel"] == Channel.API_KEY
    assert imported["submission"]["source_name"] == "run.json"
