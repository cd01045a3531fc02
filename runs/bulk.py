"""Suite, task and sample rows for saved runs, written as few statements as the database allows.

A 39-task upload has about 70 result rows. Through the ORM each row is a model instance, and
each value is escaped by psycopg's client-side binding: about half of an upload's CPU time. On
PostgreSQL the rows go as plain tuples through COPY instead, with the suite and task ids drawn
from their sequences first (one query) so that tasks and samples can name their parents. Other
databases (the embedded SQLite default) take the same tuples through bulk_create.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connection, models
from django.db.backends.utils import CursorWrapper

from runs.importers.records import ImportedSuite, ImportedTask, JsonText, as_json_value
from runs.models import Run, SpeedSample, SuiteResult, TaskResult
from runs.public import PUBLIC_TASK_COLUMNS

if TYPE_CHECKING:
    from psycopg import Cursor

# One row's values in its table's column order, as COPY and the ORM take them.
Row = tuple[object, ...]

SUITE_COLUMNS = (
    "run_id",
    "suite",
    "score",
    "task_count",
    "pass_count",
    "fail_count",
    "median_latency_ms",
)
# The order of task_row's tuple.
TASK_COLUMNS = ("suite_result_id", *PUBLIC_TASK_COLUMNS, "error", "output", "metadata")
SAMPLE_COLUMNS = (
    "task_result_id",
    "trial_index",
    "is_warmup",
    "ttft_ms",
    "prefill_tps",
    "decode_tps",
    "total_latency_ms",
    "tokens_generated",
    "tokens_prompt",
)


def suite_row(run_id: int, s: ImportedSuite) -> Row:
    return (run_id, s.suite, s.score, s.task_count, s.pass_count, s.fail_count, s.median_latency_ms)


def task_row(suite_id: int, t: ImportedTask) -> Row:
    return (
        suite_id,
        t.task_id,
        t.passed,
        t.score,
        t.latency_ms,
        t.tokens_generated,
        t.tokens_prompt,
        t.execution_ok,
        t.finish_reason,
        t.error,
        t.output,
        t.metadata,
    )


def sample_rows(task_id: int, t: ImportedTask) -> Iterator[Row]:
    for s in t.samples:
        yield (
            task_id,
            s.trial_index,
            s.is_warmup,
            s.ttft_ms,
            s.prefill_tps,
            s.decode_tps,
            s.total_latency_ms,
            s.tokens_generated,
            s.tokens_prompt,
        )


def uses_copy(copy: bool | None = None) -> bool:
    """Whether rows go through COPY: on PostgreSQL unless `copy` says otherwise (False: the
    ORM's INSERTs, which every database takes)."""
    if copy is None:
        return connection.vendor == "postgresql"
    if copy and connection.vendor != "postgresql":
        raise ValueError("COPY needs PostgreSQL")
    return copy


def save_runs(
    runs: Sequence[tuple[Run, Sequence[ImportedSuite]]], *, copy: bool | None = None
) -> None:
    """INSERT unsaved runs, each with its suites, tasks and samples, and set the runs' ids.

    Inside the caller's transaction, so a failure leaves none of them.
    """
    if not runs:
        return
    if uses_copy(copy):
        _copy_runs(runs)
    else:
        _orm_runs(runs)


def insert_instances(objs: Sequence[models.Model], *, copy: bool | None = None) -> None:
    """INSERT unsaved instances of one model and set their ids, as bulk_create does."""
    if not objs:
        return
    if not uses_copy(copy):
        type(objs[0])._default_manager.bulk_create(objs)
        return
    with connection.cursor() as cursor:
        (ids,) = _allocate_ids(cursor, [(type(objs[0]), len(objs))])
        with connection.wrap_database_errors:
            _copy_instances(cursor.cursor, objs, ids)


def _allocate_ids(
    cursor: CursorWrapper, wanted: Sequence[tuple[type[models.Model], int]]
) -> list[list[int]]:
    """`count` fresh ids from each model's sequence in one round trip, ascending as
    bulk_create would give them (pages list tasks in id order)."""
    arrays = ", ".join(
        "ARRAY(SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s))"
        for _model in wanted
    )
    params = [value for model, count in wanted for value in (model._meta.db_table, count)]
    cursor.execute(f"SELECT {arrays}", params)
    return [sorted(ids) for ids in cursor.fetchone()]


def _copy_instances(raw: Cursor[Any], objs: Sequence[models.Model], ids: Sequence[int]) -> None:
    """COPY model instances with the given ids, each value prepared as Django's INSERT would."""
    fields = type(objs[0])._meta.concrete_fields
    rows: list[Row] = []
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        rows.append(tuple(_db_value(f, obj) for f in fields))
        obj._state.adding = False
        obj._state.db = connection.alias
    _copy(raw, type(objs[0]), [f.column for f in fields], rows)


def _db_value(field: models.Field[Any, Any], obj: models.Model) -> Any:
    value = field.pre_save(obj, True)
    if isinstance(value, JsonText):
        return str(value)  # COPY's text form of a jsonb value is its JSON
    return field.get_db_prep_save(value, connection)


def _copy_runs(runs: Sequence[tuple[Run, Sequence[ImportedSuite]]]) -> None:
    suite_count = sum(len(suites) for _run, suites in runs)
    task_count = sum(len(s.tasks) for _run, suites in runs for s in suites)
    with connection.cursor() as cursor:
        run_ids, suite_ids, task_ids = _allocate_ids(
            cursor, [(Run, len(runs)), (SuiteResult, suite_count), (TaskResult, task_count)]
        )
        suites: list[Row] = []
        tasks: list[Row] = []
        samples: list[Row] = []
        next_suite, next_task = iter(suite_ids), iter(task_ids)
        for (_run, run_suites), run_id in zip(runs, run_ids, strict=True):
            for s in run_suites:
                suite_id = next(next_suite)
                suites.append((suite_id, *suite_row(run_id, s)))
                for t in s.tasks:
                    task_id = next(next_task)
                    row = task_row(suite_id, t)
                    tasks.append((task_id, *row[:-1], JsonText.of(row[-1])))
                    samples.extend(sample_rows(task_id, t))
        raw = cursor.cursor  # psycopg's own cursor: Django's wrapper has no COPY
        # Django's error classes, so callers' `except IntegrityError` and the 503 middleware
        # see a failed COPY as they would a failed INSERT.
        with connection.wrap_database_errors:
            _copy_instances(raw, [run for run, _suites in runs], run_ids)
            _copy(raw, SuiteResult, ("id", *SUITE_COLUMNS), suites)
            _copy(raw, TaskResult, ("id", *TASK_COLUMNS), tasks)
            _copy(raw, SpeedSample, SAMPLE_COLUMNS, samples)


def _copy(
    raw: Cursor[Any], model: type[models.Model], columns: Sequence[str], rows: list[Row]
) -> None:
    if not rows:
        return
    names = ", ".join(f'"{name}"' for name in columns)
    with raw.copy(f'COPY "{model._meta.db_table}" ({names}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(row)


def _orm_runs(runs: Sequence[tuple[Run, Sequence[ImportedSuite]]]) -> None:
    for run, _suites in runs:
        run.raw_payload = as_json_value(run.raw_payload)
    saved_runs = Run.objects.bulk_create([run for run, _suites in runs])
    pairs = [
        (run.id, s) for run, (_run, suites) in zip(saved_runs, runs, strict=True) for s in suites
    ]
    saved = SuiteResult.objects.bulk_create(
        SuiteResult(**_orm_values(SUITE_COLUMNS, suite_row(run_id, s))) for run_id, s in pairs
    )
    task_pairs = [
        (suite.id, t) for suite, (_run, s) in zip(saved, pairs, strict=True) for t in s.tasks
    ]
    tasks = TaskResult.objects.bulk_create(
        TaskResult(**_orm_values(TASK_COLUMNS, task_row(suite_id, t))) for suite_id, t in task_pairs
    )
    SpeedSample.objects.bulk_create(
        SpeedSample(**_orm_values(SAMPLE_COLUMNS, row))
        for task, (_suite, t) in zip(tasks, task_pairs, strict=True)
        for row in sample_rows(task.id, t)
    )


def _orm_values(columns: Sequence[str], row: Row) -> dict[str, Any]:
    return {name: as_json_value(value) for name, value in zip(columns, row, strict=True)}
