"""The compiled upload-schema check agrees with jsonschema on valid and broken bundles."""

from __future__ import annotations

import copy
import json

import pytest
from jsonschema import Draft202012Validator

from runs.importers.schemacheck import Unsupported, compile_schema
from runs.importers.upgrade import upgrade
from runs.limits import upload_schema

PROBES = [None, True, False, 0, -1, 2.0, 1.5, 1e12, "", "x", "1.0", "x" * 5000, "a\n", [], {}]


@pytest.fixture(scope="module")
def checks():
    return compile_schema(upload_schema()), Draft202012Validator(upload_schema())


def _small(bundle: dict) -> dict:
    """One task per suite and two trials each, so thousands of mutations validate quickly."""
    small = copy.deepcopy(bundle)
    for suite in small["suites"].values():
        suite["tasks"] = suite.get("tasks", [])[:1]
        for task in suite["tasks"]:
            trials = task.get("metadata", {}).get("trials")
            if trials:
                task["metadata"]["trials"] = trials[:2]
    return small


def _paths(value, path=()):
    """Every position in the document: each key of each object, the first item of each list."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _paths(item, (*path, key))
    elif isinstance(value, list) and value:
        yield (*path, 0)
        yield from _paths(value[0], (*path, 0))


def _mutated(bundle: dict, path: tuple, value, delete: bool = False) -> dict:
    changed = copy.deepcopy(bundle)
    node = changed
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return changed


def test_agrees_with_jsonschema_on_every_fixture(checks, fixtures_dir) -> None:
    fast, slow = checks
    files = [
        "generated/v3-smoke-local-run.json",
        "generated/v3-full-local/run.json",
        "generated/v3-full-local/publish-payload.json",
        "generated/v3-custom-remote/run.json",
        "generated/v3-failed/run.json",
        "generated/v2-0.2.3-local/run.json",
    ]
    for name in files:
        bundle = upgrade(json.loads((fixtures_dir / name).read_text()))[0]
        assert fast(bundle) is slow.is_valid(bundle) is True, name


def test_agrees_with_jsonschema_on_every_single_change(checks, fixtures_dir) -> None:
    fast, slow = checks
    run = json.loads((fixtures_dir / "generated/v3-smoke-local-run.json").read_text())
    base = _small(upgrade(run)[0])
    base["speed_summary"] = {"decode_tps": {"median": 50.0, "n": 3}}
    base["launch"] = {"context_length": 8192}
    base["engine"] = {"name": "llama.cpp"}
    variants = [_mutated(base, ("suites", "bad suite!"), {"score": 1})]
    for path in _paths(base):
        variants.append(_mutated(base, path, None, delete=True))
        variants.extend(_mutated(base, path, probe) for probe in PROBES)
    invalid = 0
    for variant in variants:
        expected = slow.is_valid(variant)
        invalid += not expected
        assert fast(variant) is expected, json.dumps(variant)[:300]
    assert invalid > 300  # the probes really do break the schema in many places


def test_unknown_keywords_are_refused_not_ignored() -> None:
    for schema in (
        {"type": "object", "oneOf": [{"type": "object"}]},
        {"properties": {"a": {"format": "date-time"}}},
        {"$ref": "#/$defs/missing"},
        {"enum": [1, 2]},
    ):
        with pytest.raises(Unsupported):
            compile_schema(schema)
