"""Suite registry: every ``*.suite.json`` in the data folder, validated against its schema on load.

Extra folders can be added with ``$BENCHLOOP_SUITES_PATH`` (os.pathsep-separated).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import jsonschema
from referencing import Registry, Resource

from ...rules.profiles import PROFILES_FILE
from ..errors import EngineError
from .base import RunCancelled, RunContext, Suite, Verdict, load_object

__all__ = [
    "RunCancelled",
    "RunContext",
    "Suite",
    "SuiteDataError",
    "Verdict",
    "available_suites",
    "load_profiles",
    "load_suite_file",
]

DATA_DIR = Path(__file__).with_name("data")
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


class SuiteDataError(EngineError):
    """A suite or profile data file is malformed."""

    kind = "suite_data"
    default_hint = "Fix the data file; the message names the file and the failing field."


@cache
def _registry() -> Registry:
    # Schemas refer to each other by $id (the coding suites share sandbox-checks-1).
    resources = [
        Resource.from_contents(json.loads(path.read_text()))
        for path in sorted(SCHEMA_DIR.glob("*.schema.json"))
    ]
    return Registry().with_resources((r.contents["$id"], r) for r in resources)


@cache
def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / schema_name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def _validate(document: object, schema_name: str, source: Path, prefix: str = "") -> None:
    errors = sorted(_validator(schema_name).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join([prefix, *map(str, first.path)] if prefix else map(str, first.path))
        where = where or "(top level)"
        raise SuiteDataError(f"{source.name}: {where}: {first.message}")


def load_suite_file(path: Path) -> Suite:
    """Read, validate and instantiate one suite data file."""
    try:
        spec = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SuiteDataError(f"{path.name}: cannot read JSON: {exc}") from exc
    _validate(spec, "suite-1.schema.json", path)
    ids = [task["id"] for task in spec["tasks"]]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise SuiteDataError(f"{path.name}: duplicate task ids {duplicates}")
    if spec.get("validation_schema"):
        # Each suite's expectations have their own schema, so a typo in a task's answer key
        # fails on load instead of scoring every model 0.
        for index, task in enumerate(spec["tasks"]):
            _validate(
                task.get("validation", {}),
                spec["validation_schema"],
                path,
                prefix=f"tasks/{index} ({task['id']})/validation",
            )
    runner = load_object(spec["runner"]) if spec.get("runner") else Suite
    if not (isinstance(runner, type) and issubclass(runner, Suite)):
        raise SuiteDataError(f"{path.name}: runner {spec['runner']} is not a Suite subclass")
    return runner(spec)


def _data_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("BENCHLOOP_SUITES_PATH", "").split(os.pathsep) if p]
    return [DATA_DIR, *extra]


@cache
def _load_all(dirs: tuple[Path, ...]) -> dict[str, Suite]:
    suites: dict[str, Suite] = {}
    for directory in dirs:
        for path in sorted(directory.glob("*.suite.json")):
            suite = load_suite_file(path)
            if suite.name in suites:
                raise SuiteDataError(f"{path.name}: suite {suite.name!r} is defined twice")
            suites[suite.name] = suite
    return suites


def available_suites() -> dict[str, Suite]:
    """Every installed suite by name."""
    return _load_all(tuple(_data_dirs()))


def load_profiles(path: Path | None = None) -> dict:
    """The profiles data file (the rules' own, worker.rules.profiles), validated:
    ``{"default": name, "profiles": {name: {...}}}``."""
    path = path or PROFILES_FILE
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SuiteDataError(f"{path.name}: cannot read JSON: {exc}") from exc
    _validate(document, "profiles-1.schema.json", path)
    if document["default"] not in document["profiles"]:
        raise SuiteDataError(f"{path.name}: default profile {document['default']!r} is not defined")
    return document
