"""The typed bundle (worker/rules/contract.py) and the JSON schemas agree, field by field.

The engine's schema (bundle-1) and the TypedDicts describe the same document: every field of
one is in the other with a compatible type, and what the schema requires the type requires. The
site's upload schema (runs/schemas/upload-1.schema.json, read as a file: worker imports nothing
of the site) accepts more formats than the engine writes, so there the check runs one way: every
field it describes that the bundle has takes the bundle's values, and every field it requires
the bundle always has. A real engine bundle passes both (test_engine_bundle, runs/tests).
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import pytest

from worker.rules import contract
from worker.rules.contract import Bundle

REPO = Path(__file__).resolve().parents[2]
BUNDLE_SCHEMA = REPO / "worker/engine/schemas/bundle-1.schema.json"
UPLOAD_SCHEMA = REPO / "runs/schemas/upload-1.schema.json"
# The JSON types a Python type's values take.
SCALARS = {str: {"string"}, bool: {"boolean"}, int: {"integer"}, float: {"number"}}
SCALARS[type(None)] = {"null"}


def _hints(typed: type) -> dict[str, Any]:
    """The fields of a TypedDict (its bases' too), Required/NotRequired kept."""
    return get_type_hints(typed, vars(contract), include_extras=True)


def _required(typed: Any, name: str) -> bool:
    return name in typed.__required_keys__


def _strip(hint: Any) -> Any:
    while get_origin(hint) in (Required, NotRequired):
        (hint,) = get_args(hint)
    return hint


def _is_typeddict(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "__total__") and issubclass(hint, dict)


def _walk_ref(ref: str) -> list[str]:
    assert ref.startswith("#/"), ref
    return ref[2:].split("/")


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        target = schema
        for part in _walk_ref(node["$ref"]):
            target = target[part]
        node = target
    return node


def _alternatives(schema: dict, node: dict) -> list[dict]:
    node = _resolve(schema, node)
    for key in ("oneOf", "anyOf"):
        if key in node:
            return [alt for sub in node[key] for alt in _alternatives(schema, sub)]
    return [node]


def _json_types(node: dict) -> set[str] | None:
    """The JSON types a schema node allows; None for any (no type, no enum)."""
    if "type" in node:
        kinds = node["type"]
        return set(kinds if isinstance(kinds, list) else [kinds])
    if "enum" in node:
        return {_json_type_of(value) for value in node["enum"]}
    if "const" in node:
        return {_json_type_of(node["const"])}
    return None


def _json_type_of(value: object) -> str:
    for python, (kind,) in ((bool, {"boolean"}), (int, {"integer"}), (float, {"number"})):
        if type(value) is python:
            return kind
    return {str: "string", type(None): "null", list: "array", dict: "object"}[type(value)]


def _accepts(kinds: set[str] | None, kind: str) -> bool:
    return kinds is None or kind in kinds or (kind == "integer" and "number" in kinds)


def _problems(schema: dict, node: dict, hint: Any, where: str, *, both_ways: bool) -> list[str]:
    """Where a value of type ``hint`` may fail ``node`` (and, both ways, where the schema
    describes what the type does not)."""
    hint = _strip(hint)
    if hint is Any:
        return []
    if get_origin(hint) in (Union, types.UnionType):
        return [
            p
            for member in get_args(hint)
            for p in _problems(schema, node, member, where, both_ways=both_ways)
        ]
    alternatives = _alternatives(schema, node)
    found = [_one(schema, alt, hint, where, both_ways=both_ways) for alt in alternatives]
    return [] if any(not f for f in found) else min(found, key=len)


def _one(schema: dict, node: dict, hint: Any, where: str, *, both_ways: bool) -> list[str]:
    kinds = _json_types(node)
    if get_origin(hint) is Literal:
        values = get_args(hint)
        bad = [v for v in values if not _accepts(kinds, _json_type_of(v))]
        if "enum" in node:
            bad += [v for v in values if v not in node["enum"]]
        return [f"{where}: {v!r} is not allowed by the schema" for v in bad]
    if hint in SCALARS:
        (kind,) = SCALARS[hint]
        return [] if _accepts(kinds, kind) else [f"{where}: {kind} where the schema has {kinds}"]
    if get_origin(hint) is list:
        if not _accepts(kinds, "array"):
            return [f"{where}: array where the schema has {kinds}"]
        (item,) = get_args(hint)
        items = node.get("items", {})
        return _problems(schema, items, item, f"{where}[]", both_ways=both_ways)
    if get_origin(hint) is dict:
        if not _accepts(kinds, "object"):
            return [f"{where}: object where the schema has {kinds}"]
        _, value = get_args(hint)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return _problems(schema, extra, value, f"{where}.*", both_ways=both_ways)
        return []
    if _is_typeddict(hint):
        if not _accepts(kinds, "object"):
            return [f"{where}: object where the schema has {kinds}"]
        return _fields(schema, node, hint, where, both_ways=both_ways)
    raise AssertionError(f"{where}: no rule for {hint!r}")


def _fields(schema: dict, node: dict, typed: type, where: str, *, both_ways: bool) -> list[str]:
    hints = _hints(typed)
    properties = node.get("properties", {})
    problems = [
        f"{where}.{name}: required by the schema, optional in {typed.__name__}"
        for name in node.get("required", [])
        if name not in hints or not _required(typed, name)
    ]
    for name, hint in hints.items():
        if name in properties:
            problems += _problems(
                schema, properties[name], hint, f"{where}.{name}", both_ways=both_ways
            )
        elif both_ways or node.get("additionalProperties") is False:
            problems.append(f"{where}.{name}: in {typed.__name__}, not in the schema")
        elif isinstance(node.get("additionalProperties"), dict):
            extra = node["additionalProperties"]
            problems += _problems(schema, extra, hint, f"{where}.{name}", both_ways=both_ways)
    if both_ways:
        problems += [
            f"{where}.{name}: in the schema, not in {typed.__name__}"
            for name in properties
            if name not in hints
        ]
    return problems


def test_the_bundle_type_and_the_engine_s_schema_describe_the_same_document() -> None:
    schema = json.loads(BUNDLE_SCHEMA.read_text())
    assert _fields(schema, schema, Bundle, "bundle", both_ways=True) == []


def test_the_site_s_upload_schema_takes_every_bundle_the_type_allows() -> None:
    schema = json.loads(UPLOAD_SCHEMA.read_text())
    assert _fields(schema, schema, Bundle, "upload", both_ways=False) == []


@pytest.mark.parametrize(
    ("field", "hint", "problem"),
    [
        ("reliability_score", float | None, "null where the schema has"),
        ("status", Literal["complete", "paused"], "'paused' is not allowed"),
        ("suites", dict[str, int], "integer where the schema has"),
    ],
)
def test_a_type_that_drifts_from_the_schema_is_found(field: str, hint: Any, problem: str) -> None:
    """A changed field in the type, as a copy of Bundle with that one annotation replaced."""
    drifted = TypedDict("Drifted", {**_hints(Bundle), field: hint})
    schema = json.loads(BUNDLE_SCHEMA.read_text())
    found = _fields(schema, schema, drifted, "bundle", both_ways=True)
    assert any(problem in p for p in found), found


def test_optional_fields_are_optional_at_run_time_too() -> None:
    """What a reader sees through __required_keys__ (the site may check uploads with it)."""
    # resources and cold_start: every engine since issue 17 writes them, older bundles lack them.
    # sweeps: only runs that included the speed_sweep suite have them. speed_method_version:
    # every engine since issue 29 writes it, older bundles lack it.
    assert {
        "source_format",
        "extras",
        "resources",
        "cold_start",
        "sweeps",
        "speed_method_version",
    } == Bundle.__optional_keys__
    assert "sha256" in contract.ModelInfo.__optional_keys__
    assert "model_id" in contract.ModelInfo.__required_keys__
    assert {"decode_tps", "ttft_ms", "prefill_tps"} == contract.TrialCompleted.__optional_keys__


def test_a_field_only_the_schema_knows_is_found() -> None:
    schema = json.loads(BUNDLE_SCHEMA.read_text())
    schema["properties"]["brand_new"] = {"type": "string"}
    schema["required"].append("brand_new")
    found = _fields(schema, schema, Bundle, "bundle", both_ways=True)
    assert "bundle.brand_new: required by the schema, optional in Bundle" in found
    assert "bundle.brand_new: in the schema, not in Bundle" in found


def test_a_slightly_negative_client_share_of_ttft_is_a_valid_upload() -> None:
    """The TTFT split resolves about a millisecond (docs/metrics.md), so a median client share
    can dip below zero; the site once refused such a run's upload (speed figures are >= 0)."""
    import jsonschema

    bundle = json.loads((REPO / "worker/tests/data/cli/speed-p128.json").read_text())
    validator = jsonschema.Draft202012Validator(json.loads(UPLOAD_SCHEMA.read_text()))
    bundle["speed_summary"]["ttft_client_ms"] = -0.745
    assert list(validator.iter_errors(bundle)) == []
    bundle["speed_summary"]["decode_ratio_vs_server"] = -1.0  # a rate is never negative
    assert [e.json_path for e in validator.iter_errors(bundle)] == [
        "$.speed_summary.decode_ratio_vs_server"
    ]
