"""Hostile and broken uploads: each gets its documented 4xx and leaves no row behind."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable

import pytest
from django.test import Client

from runs.models import Hardware, Run, SpeedSample, Stack, SuiteResult, TaskResult
from submissions.models import ModerationDecision, Submission, UploadAttempt

pytestmark = pytest.mark.django_db
TABLES = [
    Run,
    Stack,
    Hardware,
    SuiteResult,
    TaskResult,
    SpeedSample,
    Submission,
    UploadAttempt,
    ModerationDecision,
]


def _set(path: str, value) -> Callable[[dict], dict]:
    """A mutation that sets a dotted path (list indexes as digits) on a copy of the base."""

    def mutate(base: dict) -> dict:
        data = copy.deepcopy(base)
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value
        return data

    return mutate


def _drop(path: str) -> Callable[[dict], dict]:
    def mutate(base: dict) -> dict:
        data = copy.deepcopy(base)
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        del node[last]
        return data

    return mutate


def _raw(text: str | bytes) -> Callable[[dict], str | bytes]:
    return lambda base: text


def _replace(old: str, new: str) -> Callable[[dict], str]:
    def mutate(base: dict) -> str:
        text = json.dumps(base)
        assert old in text, old
        return text.replace(old, new, 1)

    return mutate


def _wrap(visibility) -> Callable[[dict], dict]:
    return lambda base: {"run": copy.deepcopy(base), "visibility": visibility}


TASK = "suites.toolcall.tasks.0"
TRIAL = "suites.speed.tasks.0.metadata.trials.1.speed_metrics"

# (id, mutation, status, error code, a field path the error must name or None)
CASES = [
    ("empty-body", _raw(""), 400, "malformed_json", None),
    ("not-json", _raw("hello"), 400, "malformed_json", None),
    ("truncated", lambda b: json.dumps(b)[:500], 400, "malformed_json", None),
    ("array", _raw("[1, 2]"), 400, "invalid", "(body)"),
    ("string", _raw('"run"'), 400, "invalid", "(body)"),
    ("null", _raw("null"), 400, "invalid", "(body)"),
    ("number", _raw("42"), 400, "invalid", "(body)"),
    (
        "nan",
        _replace('"overall_score": 23.62', '"overall_score": NaN'),
        400,
        "malformed_json",
        None,
    ),
    (
        "infinity",
        _replace('"overall_score": 23.62', '"overall_score": Infinity'),
        400,
        "malformed_json",
        None,
    ),
    (
        "minus-infinity",
        _replace('"speed_score": 74.48', '"speed_score": -Infinity'),
        400,
        "malformed_json",
        None,
    ),
    (
        "overflow-1e999",
        _replace('"total_runtime_sec": ', '"total_runtime_sec": 1e999, "x": '),
        400,
        "invalid",
        None,
    ),
    ("bad-utf8", _raw(b'{"model": "\xff\xfe"}'), 400, "malformed_json", None),
    ("too-deep", _raw("[" * 200 + "]" * 200), 400, "invalid", None),
    (
        "nested-metadata-too-deep",
        _set(f"{TASK}.metadata", json.loads('{"a":' * 80 + "1" + "}" * 80)),
        400,
        "invalid",
        None,
    ),
    (
        "unknown-bundle-major",
        _set("bundle_schema_version", "2.0"),
        422,
        "unsupported_version",
        "bundle_schema_version",
    ),
    (
        "unknown-score-major",
        _set("score_schema_version", "9.0.0"),
        422,
        "unsupported_version",
        "score_schema_version",
    ),
    (
        "future-score-major",
        _set("score_schema_version", "4.1.0"),
        422,
        "unsupported_version",
        "score_schema_version",
    ),
    (
        "malformed-score-version",
        _set("score_schema_version", "three"),
        400,
        "invalid",
        "score_schema_version",
    ),
    (
        "bundle-version-number",
        _set("bundle_schema_version", 1),
        400,
        "invalid",
        "bundle_schema_version",
    ),
    ("not-a-run", _raw('{"hello": "world"}'), 400, "invalid", None),
    (
        "draft-contract",
        _raw('{"schemaVersion": "benchloop.submission.v1", "run": {}}'),
        400,
        "invalid",
        None,
    ),
    ("missing-model", _drop("model"), 400, "invalid", "model"),
    ("missing-model-id", _drop("model.model_id"), 400, "invalid", "model.model_id"),
    ("empty-model-id", _set("model.model_id", ""), 400, "invalid", "model.model_id"),
    ("model-id-number", _set("model.model_id", 8), 400, "invalid", "model.model_id"),
    ("model-id-huge", _set("model.model_id", "m" * 10_000), 400, "invalid", "model.model_id"),
    ("model-id-nul", _set("model.model_id", "evil\u0000model"), 400, "invalid", "model.model_id"),
    ("model-not-object", _set("model", "qwen3:8b"), 400, "invalid", "model"),
    ("missing-timestamp", _drop("timestamp"), 400, "invalid", "timestamp"),
    ("timestamp-words", _set("timestamp", "yesterday"), 400, "invalid", "timestamp"),
    (
        "timestamp-impossible",
        _set("timestamp", "2026-13-45T99:99:00+00:00"),
        400,
        "invalid",
        "timestamp",
    ),
    (
        "timestamp-future",
        _set("timestamp", "2099-01-01T00:00:00+00:00"),
        400,
        "invalid",
        "timestamp",
    ),
    ("overall-string", _set("overall_score", "great"), 400, "invalid", "overall_score"),
    ("overall-negative", _set("overall_score", -1), 400, "invalid", "overall_score"),
    ("overall-over-100", _set("overall_score", 100.5), 400, "invalid", "overall_score"),
    ("overall-boolean", _set("overall_score", True), 400, "invalid", "overall_score"),
    ("quality-list", _set("quality_score", [1]), 400, "invalid", "quality_score"),
    (
        "negative-decode",
        _set("speed_metrics.generation_tok_per_sec", -58.0),
        400,
        "invalid",
        "speed_metrics.generation_tok_per_sec",
    ),
    ("negative-ttft", _set("speed_metrics.ttft_ms", -1), 400, "invalid", "speed_metrics.ttft_ms"),
    (
        "absurd-decode",
        _set("speed_metrics.generation_tok_per_sec", 1e12),
        400,
        "invalid",
        "speed_metrics.generation_tok_per_sec",
    ),
    (
        "negative-trial-decode",
        _set(f"{TRIAL}.generation_tok_per_sec", -5),
        400,
        "invalid",
        f"{TRIAL}.generation_tok_per_sec",
    ),
    (
        "negative-summary-median",
        _set("speed_summary", {"decode_tps": {"median": -3}}),
        400,
        "invalid",
        "speed_summary.decode_tps.median",
    ),
    (
        "too-many-speed-keys",
        _set("speed_metrics", {f"k{i}": 1 for i in range(60)}),
        400,
        "invalid",
        "speed_metrics",
    ),
    ("suites-list", _set("suites", []), 400, "invalid", "suites"),
    ("suites-missing", _drop("suites"), 400, "invalid", "suites"),
    ("suites-empty", _set("suites", {}), 400, "invalid", "suites"),
    (
        "suite-score-missing",
        _drop("suites.toolcall.score"),
        400,
        "invalid",
        "suites.toolcall.score",
    ),
    (
        "suite-score-150",
        _set("suites.toolcall.score", 150),
        400,
        "invalid",
        "suites.toolcall.score",
    ),
    ("suite-name-markup", _set("suites.<script>", {"score": 1}), 400, "invalid", "suites"),
    (
        "too-many-suites",
        _set("suites", {f"s{i}": {"score": 1} for i in range(60)}),
        400,
        "invalid",
        "suites",
    ),
    (
        "pass-exceeds-tasks",
        _set("suites.toolcall.pass_count", 99),
        400,
        "invalid",
        "suites.toolcall.pass_count",
    ),
    (
        "task-count-negative",
        _set("suites.toolcall.task_count", -1),
        400,
        "invalid",
        "suites.toolcall.task_count",
    ),
    (
        "tasks-not-list",
        _set("suites.toolcall.tasks", {"a": 1}),
        400,
        "invalid",
        "suites.toolcall.tasks",
    ),
    ("task-id-missing", _drop(f"{TASK}.task_id"), 400, "invalid", f"{TASK}.task_id"),
    ("task-score-150", _set(f"{TASK}.score", 150), 400, "invalid", f"{TASK}.score"),
    (
        "task-tokens-negative",
        _set(f"{TASK}.tokens_generated", -4),
        400,
        "invalid",
        f"{TASK}.tokens_generated",
    ),
    (
        "task-tokens-fraction",
        _set(f"{TASK}.tokens_generated", 4.5),
        400,
        "invalid",
        f"{TASK}.tokens_generated",
    ),
    (
        "task-latency-negative",
        _set(f"{TASK}.latency_ms", -10),
        400,
        "invalid",
        f"{TASK}.latency_ms",
    ),
    ("task-output-huge", _set(f"{TASK}.output", "x" * 1_100_000), 400, "invalid", f"{TASK}.output"),
    (
        "trials-not-list",
        _set("suites.speed.tasks.0.metadata.trials", "many"),
        400,
        "invalid",
        "suites.speed.tasks.0.metadata.trials",
    ),
    ("vram-negative", _set("machine.gpu_memory_gb", -24), 400, "invalid", "machine.gpu_memory_gb"),
    ("gpu-name-huge", _set("machine.gpu", "G" * 1000), 400, "invalid", "machine.gpu"),
    ("manifest-not-sha256", _set("manifest_hash", "md5:abc"), 400, "invalid", "manifest_hash"),
    ("comparable-string", _set("comparable", "yes"), 400, "invalid", "comparable"),
    ("coverage-over-100", _set("coverage_score", 250), 400, "invalid", "coverage_score"),
    ("harness-huge", _set("harness", "h" * 5000), 400, "invalid", "harness"),
    ("command-huge", _set("command_used", "c" * 100_000), 400, "invalid", "command_used"),
    ("run-id-huge", _set("run_id", "r" * 500), 400, "invalid", "run_id"),
    ("runtime-negative", _set("total_runtime_sec", -5), 400, "invalid", "total_runtime_sec"),
    ("status-unknown", _set("status", "exploded"), 400, "invalid", None),
    ("envelope-visibility", _wrap("everyone"), 400, "invalid", "visibility"),
    (
        "envelope-bad-run",
        lambda b: {"run": _drop("model")(b), "visibility": "public"},
        400,
        "invalid",
        "run.model",
    ),
    ("envelope-run-string", _raw('{"run": "x", "visibility": "public"}'), 400, "invalid", None),
]


def _post(client: Client, url: str, body, key: str | None, content_type="application/json"):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.post(url, data=data, content_type=content_type, headers=headers)


def _assert_nothing_stored() -> None:
    assert {model.__name__: model.objects.count() for model in TABLES} == {
        model.__name__: 0 for model in TABLES
    }


@pytest.mark.parametrize("endpoint", ["/api/v1/runs", "/submit"])
@pytest.mark.parametrize(
    ("case", "mutate", "status", "code", "field"), CASES, ids=[case[0] for case in CASES]
)
def test_a_bad_upload_is_refused_cleanly(
    endpoint, case, mutate, status, code, field, alice_key, smoke_run
) -> None:
    key = alice_key if endpoint == "/api/v1/runs" else None
    response = _post(Client(), endpoint, mutate(smoke_run), key)

    assert response.status_code == status, response.content[:400]
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    if field is not None:
        paths = [item["path"] for item in body["error"].get("fields", [])]
        assert re.sub(r"\.(\d+)", r"[\1]", field) in paths, paths
    _assert_nothing_stored()


def test_there_are_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("endpoint", ["/api/v1/runs", "/submit"])
def test_a_body_over_the_limit_gets_413(endpoint, settings, alice_key, smoke_run) -> None:
    settings.BENCHLOOP_MAX_UPLOAD_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 20_000
    key = alice_key if endpoint == "/api/v1/runs" else None
    response = _post(Client(), endpoint, smoke_run, key)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    _assert_nothing_stored()


@pytest.mark.parametrize("endpoint", ["/api/v1/runs", "/submit"])
def test_a_non_json_content_type_gets_415(endpoint, alice_key, smoke_run) -> None:
    key = alice_key if endpoint == "/api/v1/runs" else None
    response = _post(Client(), endpoint, json.dumps(smoke_run), key, content_type="text/plain")
    assert response.status_code == 415
    _assert_nothing_stored()


def test_a_schema_error_lists_every_failing_path(alice_key, smoke_run) -> None:
    broken = _set("overall_score", -1)(
        _set("model.model_id", "")(_set("speed_metrics.ttft_ms", -2)(smoke_run))
    )
    response = _post(Client(), "/api/v1/runs", broken, alice_key)
    paths = {item["path"] for item in response.json()["error"]["fields"]}
    assert {"overall_score", "model.model_id", "speed_metrics.ttft_ms"} <= paths


def test_no_key_gets_401(smoke_run) -> None:
    response = _post(Client(), "/api/v1/runs", smoke_run, None)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    _assert_nothing_stored()


def test_other_methods_get_405(alice_key) -> None:
    response = Client().get("/api/v1/runs", headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
