"""Column limits read from the models: the check every run record passes before it is stored,
and the bounds that the published upload schema states.

A string longer than its column or an integer outside its column's range used to reach the
database and end the request in a 500. The models are the one source of these numbers: the
record check reads them from the fields, and the schema file names columns (`x-column`) where
it would otherwise have to copy a number, so the schema, the parser and the column agree.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import fields as dataclass_fields
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
from django.apps import apps
from django.db import connection, models

from runs import bounds, normalize
from runs.importers.records import FormatError, HardwareRecord, RunRecord

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "upload-1.schema.json"

# Where a record's value came from in a bundle, where that is not its own name; a parser
# that reads a value from elsewhere (a context length from command_used) says so in
# RunRecord.sources.
BUNDLE_PATHS = {
    "model_id": "model.model_id",
    "quantization": "model.quantization",
    "model_sha256": "model.sha256",
    "engine": "engine.name",
    "engine_version": "engine.version",
    "profile": "benchmark_profile",
    "context_length": "launch.context_length",
    "kv_cache_type": "launch.kv_cache_type",
    "draft_model": "launch.draft_model",
    "speed_sample_count": "speed_summary.decode_tps.n",
    "submitter_name": "submitter.name",
    "cpu_model": "machine.cpu",
    "gpu_model": "machine.gpu",
    "gpu_count": "machine.gpu_count",
    "os": "machine.os",
}
# Stack columns hold the display form of these ids (a .gguf path is stored as its file stem).
_STORED_AS: dict[str, Callable[[str], str]] = {
    "model_id": normalize.normalise_model_id,
    "draft_model": normalize.normalise_model_id,
}


def column(label: str) -> models.Field[Any, Any]:
    """The model field that "app.Model.field" names."""
    app_label, model_name, field_name = label.split(".")
    field = apps.get_model(app_label, model_name)._meta.get_field(field_name)
    if not isinstance(field, models.Field):  # a reverse relation or a generic key
        raise ValueError(f"{label} is not a column")
    return field


def max_length(model: type[models.Model], name: str) -> int:
    field = model._meta.get_field(name)
    length = field.max_length if isinstance(field, models.Field) else None
    if length is None:
        raise ValueError(f"{model.__name__}.{name} has no max_length")
    return length


def integer_range(field: models.Field[Any, Any]) -> tuple[int | None, int | None]:
    """The smallest and largest value the database column holds (None: unbounded)."""
    return connection.ops.integer_field_range(field.get_internal_type())


_LENGTH, _INTEGER, _MOMENT = "length", "integer", "moment"
# (record attribute, column name, kind, low, high): what one column holds.
_Rule = tuple[str, str, str, int | None, int | None]
# A machine's record names its values otherwise than the hardware columns they end up in
# (after normalisation, which never makes a name longer).
_HARDWARE_COLUMNS = {
    "cpu": "cpu_model",
    "gpu": "gpu_model",
    "os_name": "os",
    "gpu_count": "gpu_count",
}


@cache
def _rules(model: type[models.Model], record_type: type) -> tuple[_Rule, ...]:
    """(record attribute, column name, kind, low, high) for the model's columns that the
    record type carries: worked out once, since every stored task and trial is checked."""
    renamed = _HARDWARE_COLUMNS if record_type is HardwareRecord else {}
    names = {renamed.get(f.name, f.name): f.name for f in dataclass_fields(record_type)}
    rules: list[_Rule] = []
    for field in model._meta.concrete_fields:
        attribute = names.get(field.name)
        if attribute is None:
            continue
        if isinstance(field, models.CharField) and field.max_length:
            rules.append((attribute, field.name, _LENGTH, 0, field.max_length))
        elif isinstance(field, models.IntegerField):
            rules.append((attribute, field.name, _INTEGER, *integer_range(field)))
        elif isinstance(field, models.DateTimeField):
            rules.append((attribute, field.name, _MOMENT, None, None))
    return tuple(rules)


def _problem(kind: str, low: int | None, high: int | None, value: object) -> str:
    # The record types hold a str for a character column, a number for an integer one and
    # a datetime for a moment (their dataclass fields say so).
    if kind == _LENGTH and isinstance(value, str):
        return f"is longer than {high} characters" if high is not None and len(value) > high else ""
    if kind == _INTEGER and isinstance(value, int | float):
        if low is not None and value < low:
            return f"must be at least {low}, got {value}"
        if high is not None and value > high:
            return f"must be at most {high}, got {value}"
        return ""
    if kind == _MOMENT and isinstance(value, datetime):
        return bounds.moment_problem(value)
    return ""


def _first_problem(model: type[models.Model], obj: object) -> tuple[str, str] | None:
    """(column, problem) for the first of obj's values that its column cannot hold."""
    # (Named `type`: mypy reads type(obj) of an `object` as unhashable for the cache.)
    record_type: type = type(obj)
    for attribute, column_name, kind, low, high in _rules(model, record_type):
        value = getattr(obj, attribute)
        if value is None or value == "":
            continue
        if column_name in _STORED_AS:
            value = _STORED_AS[column_name](value)
        problem = _problem(kind, low, high, value)
        if problem:
            return column_name, problem
    return None


def _path(prefix: str, found: tuple[str, str], sources: dict[str, str]) -> tuple[str, str]:
    column_name, problem = found
    if column_name in sources:
        # The path names where it was read from: say which value it was.
        return sources[column_name], f"the {column_name.replace('_', ' ')} it gives {problem}"
    return prefix + BUNDLE_PATHS.get(column_name, column_name), problem


def check_record(record: RunRecord, *, owners: Sequence[type[models.Model]] = ()) -> None:
    """Raise FormatError naming the first value of the record that its column cannot hold or
    that a constraint of the models would refuse; nothing is written before this passes.

    `owners` are the models of the apps above that store record values too (the submission:
    submissions.intake.check_record passes it)."""
    for path, problem in record_problems(record, owners=owners):
        raise FormatError(path, problem)


def record_problems(
    record: RunRecord, *, owners: Sequence[type[models.Model]] = ()
) -> Iterator[tuple[str, str]]:
    """(path, problem) for every value of the record that cannot be stored as it is."""
    from runs.models import Hardware, Run, SpeedSample, Stack, SuiteResult, TaskResult

    sources = record.sources
    checked: tuple[type[models.Model], ...] = (Run, Stack, *owners)
    for model in checked:
        if found := _first_problem(model, record):
            yield _path("", found, sources)
    params = normalize.parse_model(record.model_id)["params_b"]
    if params is not None and not params > 0:
        # The stack_params_positive constraint: a model has more than no parameters.
        yield (
            sources.get("model_id") or BUNDLE_PATHS["model_id"],
            f"names a parameter count of {params:g} (as in '-0b'); a model has more than none",
        )
    if record.hardware is not None and (found := _first_problem(Hardware, record.hardware)):
        yield _path("", found, {})
    yield from _duplicates([s.suite for s in record.suites], "suites", "suite")
    for suite in record.suites:
        where = f"suites.{suite.suite}"
        if suite.pass_count > suite.task_count:  # suiteresult_pass_le_tasks
            yield f"{where}.pass_count", f"{suite.pass_count} passes out of {suite.task_count}"
        if found := _first_problem(SuiteResult, suite):
            yield _path(f"{where}.", found, {})
        yield from _duplicates([t.task_id for t in suite.tasks], f"{where}.tasks", "task id")
        for t_index, task in enumerate(suite.tasks):
            if found := _first_problem(TaskResult, task):
                yield _path(f"{where}.tasks[{t_index}].", found, {})
            if not task.samples:
                continue
            trials = f"{where}.tasks[{t_index}].metadata.trials"
            yield from _duplicates([s.trial_index for s in task.samples], trials, "trial index")
            for s_index, sample in enumerate(task.samples):
                if found := _first_problem(SpeedSample, sample):
                    yield _path(f"{trials}[{s_index}].", found, {})


def _duplicates(values: Iterable[Hashable], path: str, what: str) -> Iterator[tuple[str, str]]:
    seen: set[Hashable] = set()
    for value in values:
        if value in seen:
            yield path, f"{what} {str(value)[:60]!r} appears more than once"
            return
        seen.add(value)


def records_problem(
    records: Iterable[RunRecord], *, owners: Sequence[type[models.Model]] = ()
) -> str:
    """The first problem of any record, as one line for an importer's report ("" if none)."""
    for number, record in enumerate(records, 1):
        for path, problem in record_problems(record, owners=owners):
            return f"run {number}: {path}: {problem}"
    return ""


# --- the upload schema ------------------------------------------------------------------


@cache
def upload_schema() -> dict[str, Any]:
    """The published upload schema: the file, with every `x-column` turned into the bounds of
    that column (intersected with any tighter bound the file states)."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    _resolve_columns(schema)
    return schema


def _resolve_columns(node: object) -> None:
    if isinstance(node, list):
        for item in node:
            _resolve_columns(item)
        return
    if not isinstance(node, dict):
        return
    label = node.pop("x-column", None)
    if label is not None:
        field = column(label)
        if isinstance(field, models.IntegerField):
            low, high = integer_range(field)
            if low is not None:
                node["minimum"] = max(node.get("minimum", low), low)
            if high is not None:
                node["maximum"] = min(node.get("maximum", high), high)
        elif field.max_length is not None:
            node["maxLength"] = min(node.get("maxLength", field.max_length), field.max_length)
        else:
            raise ValueError(f"x-column {label} names a column without a limit")
    for value in node.values():
        _resolve_columns(value)


@cache
def upload_schema_bytes() -> bytes:
    return json.dumps(upload_schema(), indent=1).encode()


@cache
def _validator() -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(upload_schema())


def schema_errors(bundle: dict[str, Any], limit: int = 50) -> list[dict[str, str]]:
    """Every violation of the upload schema, as {path, message}, once each, in document order.

    jsonschema-rs answers a valid 30 KB bundle in well under a millisecond; only an invalid
    one is walked again for its errors, each with its path."""
    validator = _validator()
    if validator.is_valid(bundle):
        return []
    errors = sorted(validator.iter_errors(bundle), key=lambda e: [str(p) for p in e.instance_path])
    found: dict[tuple[str, str], None] = {}
    for error in errors:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.instance_path)
        if isinstance(error.kind, jsonschema_rs.ValidationErrorKind.Required):
            # Name the missing field itself, not the object that lacks it.
            found[(f"{path}.{error.kind.property}".lstrip("."), "is missing")] = None
        else:
            found[(path.lstrip(".") or "(body)", _short(error.message))] = None
        if len(found) >= limit:
            break
    return [{"path": path, "message": message} for path, message in list(found)[:limit]]


def _short(message: str) -> str:
    # The message quotes the offending value; a 1 MB string would make a 1 MB error.
    return message if len(message) <= 200 else message[:200] + "…"
