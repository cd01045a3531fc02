"""Generated uploads: each is refused with a 4xx, or stored and then rendered on every surface.

Each example starts from a real upload (the smoke fixture as bundle 1, trimmed to a few tasks),
then replaces a handful of its values, at any depth, with values drawn from the published
upload schema (/api/v1/schemas/upload-1.json) or with hostile ones: huge, negative and
non-finite numbers, control characters, lone surrogates, 10,000-character strings, deep
nesting, wrong types, dates out of range, newlines, markup and bidi overrides; and sometimes
adds optional fields the fixture lacks, or wraps it as a v3 publish envelope. It goes through
the real upload API (or the legacy endpoint). A 5xx fails the test; a stored run is approved by
a moderator and must then render on every surface it reaches (submissions/tests/surfaces.py).

The run is deterministic (derandomize, no example database), so CI sees the same examples
every time and a failure reproduces; BENCHLOOP_GENERATIVE_EXAMPLES raises the count locally
(with BENCHLOOP_GENERATIVE_RANDOM=1 to explore new examples).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from leaderboard.tests.factories import add_runs, record
from runs.importers.upgrade import upgrade
from runs.limits import upload_schema
from submissions.tests.surfaces import approve_and_check

pytestmark = pytest.mark.django_db
EXAMPLES = int(os.environ.get("BENCHLOOP_GENERATIVE_EXAMPLES", "70"))
RANDOM = os.environ.get("BENCHLOOP_GENERATIVE_RANDOM") == "1"
_uploads = itertools.count(1)


def _deep(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = {"d": [value]}
    return value


_NASTY_CHARS = "\x00\x01\x07\t\n\r\x0b\x1b\x7f\x85\u2028\u202e\u2066\ufdd0\ufffe\uffff\ud800\udfff"
BIG_INTS = st.one_of(
    st.sampled_from([2**15 - 1, 2**15, 40000, 2**31 - 1, 2**31, 2**53 + 1, 2**63, 10**400, -1]),
    st.integers(min_value=2**31 - 2, max_value=2**64),
    st.integers(min_value=-(2**63), max_value=-1),
)
BAD_FLOATS = st.sampled_from(
    [float("nan"), float("inf"), float("-inf"), 1e999, 1e308, -1e308, -0.0, 5e-324, -1.5]
)
BAD_DATES = st.sampled_from(
    [
        "0001-01-01T00:00:00+05:00",
        "0001-01-01T00:00:00",
        "1970-01-01T00:00:00Z",
        "2019-12-31T23:59:59Z",
        "2020-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59Z",
        "2026-02-30T10:00:00Z",
        "2026-11-30T05:05:15.717806-23:59",
    ]
)
MARKUP = st.sampled_from(
    [
        "<script>alert(1)</script>",
        '"><img src=x onerror=alert(1)>',
        '=HYPERLINK("http://evil.example","x")',
        "line one\nline two",
        "\u202eevil-model\u202c",
        "tiny-0b",
        "../../etc/passwd",
        "",
        " ",
    ]
)
WRONG_TYPES = st.sampled_from([[], {}, True, None, "1", 1.5, [1, "a"], {"k": "v"}, _deep(40)])
HOSTILE = st.one_of(
    BIG_INTS,
    BAD_FLOATS,
    MARKUP,
    BAD_DATES,
    WRONG_TYPES,
    st.just(_deep(70)),
    st.text(st.sampled_from(_NASTY_CHARS), min_size=1, max_size=4).map(lambda s: f"qwen{s}:8b"),
)
# Longer than one column or another (20, 40, 60, 80, 100, 120, 150, 200, 255, 300), and huge.
LENGTHS = [21, 41, 61, 81, 101, 121, 151, 201, 256, 301, 10_000]


def hostile_for(value: object, sub: dict | None) -> st.SearchStrategy:
    """Hostile values shaped like `value` (the fixture's at that place), and at the bounds the
    schema states for it, besides the hostile values of every kind."""
    options = []
    if isinstance(value, bool) or value is None:
        options.append(WRONG_TYPES)
    elif isinstance(value, int):
        options.append(BIG_INTS)
    elif isinstance(value, float):
        options += [BAD_FLOATS, BIG_INTS]
    elif isinstance(value, str):
        nasty = st.text(st.sampled_from(_NASTY_CHARS), min_size=1, max_size=3)
        options += [
            st.tuples(st.integers(0, len(value)), nasty).map(
                lambda cut: value[: cut[0]] + cut[1] + value[cut[0] :]
            ),
            st.sampled_from(LENGTHS).map(lambda n: (value or "x") * (n // max(len(value), 1) + 1)),
        ]
        if re.match(r"\d{4}-\d\d-\d\dT", value):
            options += [BAD_DATES, BAD_DATES]
    bounds = []
    for key, past in (("maxLength", 1), ("maximum", 1), ("minimum", -1)):
        if sub and isinstance(sub.get(key), int | float):
            limit = sub[key]
            bounds.append("x" * (limit + past) if key == "maxLength" else limit + past)
    if bounds:
        options.append(st.sampled_from(bounds))
    return st.one_of([*options, HOSTILE])


# Printable text, so that schema-drawn values are often stored (and then rendered).
PLAIN = st.characters(categories=["L", "N", "P", "S", "Zs"])


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def from_schema(schema: dict, node: dict, depth: int = 0) -> st.SearchStrategy:
    """Values valid against `node`, a part of the upload schema, kept small."""
    node = _resolve(schema, node)
    if "enum" in node:
        return st.sampled_from(node["enum"])
    types = node.get("type", ["object"] if "properties" in node else [])
    types = types if isinstance(types, list) else [types]
    options = [_of_type(schema, node, kind, depth) for kind in types]
    return st.one_of(options) if options else st.none()


def _of_type(schema: dict, node: dict, kind: str, depth: int) -> st.SearchStrategy:
    low, high = node.get("minimum"), node.get("maximum")
    if kind == "string":
        longest = min(node.get("maxLength", 40), 40)
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=True).filter(
                lambda s: len(s) <= node.get("maxLength", 10**9)
            )
        return st.text(PLAIN, min_size=node.get("minLength", 0), max_size=longest)
    if kind == "integer":
        return st.integers(min_value=low, max_value=high)
    if kind == "number":
        return st.floats(low, high, allow_nan=False, allow_infinity=False) | st.integers(
            min_value=None if low is None else int(low),
            max_value=None if high is None else int(high),
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(
            from_schema(schema, node.get("items", {}), depth + 1),
            max_size=min(node.get("maxItems", 3), 3 if depth < 3 else 1),
        )
    return _object(schema, node, depth)


def _object(schema: dict, node: dict, depth: int) -> st.SearchStrategy:
    properties = node.get("properties", {})
    required = node.get("required", [])
    fixed = {name: from_schema(schema, properties[name], depth + 1) for name in required}
    optional = {
        name: from_schema(schema, sub, depth + 1)
        for name, sub in properties.items()
        if name not in required and depth < 4
    }
    extra = node.get("additionalProperties", True)
    keys = st.from_regex(
        node.get("propertyNames", {}).get("pattern", r"^[a-z_]{1,12}$"), fullmatch=True
    )
    extras = (
        st.dictionaries(keys, from_schema(schema, extra, depth + 1), max_size=2)
        if isinstance(extra, dict) and depth < 4
        else st.just({})
    )
    return st.builds(
        lambda a, b, c: {**c, **b, **a},
        st.fixed_dictionaries(fixed),
        st.fixed_dictionaries({}, optional=optional),
        extras,
    )


def subschema(schema: dict, path: tuple) -> dict | None:
    """The part of the schema that describes the value at `path`, if the schema says."""
    node = schema
    for key in path:
        node = _resolve(schema, node)
        if isinstance(key, int):
            node = node.get("items")
        elif key in node.get("properties", {}):
            node = node["properties"][key]
        else:
            node = node.get("additionalProperties")
        if not isinstance(node, dict):
            return None
    return _resolve(schema, node)


def _template(smoke_run: dict) -> dict:
    bundle = upgrade(smoke_run).bundle
    bundle = copy.deepcopy(bundle)
    for name, suite in bundle["suites"].items():
        suite["tasks"] = suite["tasks"][: 2 if name == "speed" else 1]
        suite["task_count"] = len(suite["tasks"])
        suite["pass_count"] = sum(1 for task in suite["tasks"] if task.get("passed"))
        suite["fail_count"] = suite["task_count"] - suite["pass_count"]
        for task in suite["tasks"]:
            trials = task.get("metadata", {}).get("trials")
            if trials:
                task["metadata"]["trials"] = trials[:2]
    return bundle


def _paths(value: object, path: tuple = ()) -> list[tuple]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _place(path: tuple) -> tuple:
    """Where a path is in the schema: list positions and suite names do not count."""
    return tuple(
        0 if isinstance(key, int) else "*" if index == 1 and path[0] == "suites" else key
        for index, key in enumerate(path)
    )


_GONE = object()


def _get(document: dict, path: tuple) -> object:
    node: object = document
    for key in path:
        if not isinstance(node, dict | list):
            return _GONE
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return _GONE
    return node


def _set(document: dict, path: tuple, value: object) -> None:
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@st.composite
def uploads(draw, template: dict) -> tuple[str, str]:
    """(endpoint, body) for one generated upload."""
    schema = upload_schema()
    document = copy.deepcopy(template)
    # Each place in the document as likely as the next (the fixture has dozens of tasks and
    # trials alike, but one timestamp and one model id), and those the schema describes (the
    # ones stored in columns) three times as likely as free-form metadata.
    by_place: dict[tuple, list[tuple]] = {}
    for path in _paths(document):
        by_place.setdefault(_place(path), []).append(path)
    described = sorted((p for p in by_place if subschema(schema, p) is not None), key=repr)
    free = sorted((p for p in by_place if subschema(schema, p) is None), key=repr)
    places = st.one_of(*[st.sampled_from(described)] * 3, st.sampled_from(free))
    chosen = st.lists(
        places.flatmap(lambda place: st.sampled_from(by_place[place])), min_size=1, max_size=5
    )
    for path in draw(chosen):
        value = _get(document, path)
        if value is _GONE:  # an earlier change replaced a parent
            continue
        sub = subschema(schema, path)
        hostile = hostile_for(value, sub)
        valid = from_schema(schema, sub) if sub is not None else hostile
        _set(document, path, draw(st.one_of(hostile, valid)))
    absent = sorted(set(schema["properties"]) - set(document))
    for name in draw(st.lists(st.sampled_from(absent), max_size=3, unique=True)):
        document[name] = draw(from_schema(schema, schema["properties"][name]))
    if draw(st.integers(0, 5)) == 0:
        document = {"run": document, "visibility": draw(st.sampled_from(["public", "unlisted"]))}
    endpoint = draw(st.sampled_from(["/api/v1/runs", "/api/v1/runs", "/api/v1/runs", "/submit"]))
    # NaN and Infinity as Python's json writes them; lone surrogates as \u escapes.
    return endpoint, json.dumps(document, allow_nan=True)


def _unique(body: str, number: int) -> str:
    """Each example its own run ids, so that examples do not repeat one another's uploads."""
    return re.sub(r'("(?:client_run_id|run_id)": ")', rf"\g<1>gen{number}-", body)


def test_every_generated_upload_is_refused_cleanly_or_renders_everywhere(
    smoke_run, alice_key, bob, bob_client
) -> None:
    add_runs(record(model_id="baseline:8b"))  # a stack to compare each stored one with
    template = _template(smoke_run)
    outcomes: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(upload=uploads(template))
    def check(upload: tuple[str, str]) -> None:
        endpoint, body = upload
        body = _unique(body, next(_uploads))
        note(f"POST {endpoint} {body[:3000]}")  # printed with a failing example
        headers = {"Authorization": f"Bearer {alice_key}"} if endpoint.startswith("/api") else {}
        with transaction.atomic():  # each example on the same starting data
            response = Client().post(
                endpoint, data=body, content_type="application/json", headers=headers
            )
            assert response.status_code < 500, (response.status_code, response.content[:500])
            assert response["Content-Type"].startswith("application/json")
            outcome = "stored" if response.status_code in (200, 201) else "refused"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome == "stored":
                run_id = response.json()["id"]
                approve_and_check(run_id, bob, bob_client)
            else:
                assert 400 <= response.status_code < 500
                error = response.json()["error"]
                assert error["code"] and error["message"]

            transaction.set_rollback(True)

    check()
    # The generator must reach both sides, or the test checks less than it claims.
    assert outcomes.get("stored", 0) >= EXAMPLES // 10, outcomes
    assert outcomes.get("refused", 0) >= EXAMPLES // 10, outcomes
