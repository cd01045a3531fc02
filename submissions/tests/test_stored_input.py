"""Input that no page could show, or no column could hold, is refused at the door with a 400
that names the field, through the upload API and the importers alike (runs.bounds, runs.limits);
what is accepted renders on every surface."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core import mail
from django.core.management import CommandError, call_command
from django.db import IntegrityError
from django.test import Client

from leaderboard.tests.factories import add_runs, record
from runs import limits
from runs.importers import FormatError, parse_run_payload
from runs.models import Hardware, Run, SpeedSample, Stack, SuiteResult, TaskResult
from submissions import intake
from submissions.models import Channel, Submission
from submissions.services import SubmissionConflict, submit_run
from submissions.tests.conftest import post_json
from submissions.tests.surfaces import approve_and_check
from submissions.tests.test_bad_payloads import _set

pytestmark = pytest.mark.django_db
TABLES = [Run, Stack, Hardware, SuiteResult, TaskResult, SpeedSample, Submission]
TASK = "suites.speed.tasks.0"
TRIAL = f"{TASK}.metadata.trials.1"


def _put(base: dict, dotted: str, value) -> dict:
    return _set(dotted, value)(base)


def _json_path(dotted: str) -> str:
    return ".".join(f"[{p}]" if p.isdigit() else p for p in dotted.split(".")).replace(".[", "[")


def _refused(response, path: str) -> str:
    assert response.status_code == 400, response.content[:400]
    error = response.json()["error"]
    paths = [item["path"] for item in error.get("fields", [])]
    assert path in paths, paths
    assert {model.__name__: model.objects.count() for model in TABLES} == dict.fromkeys(
        (model.__name__ for model in TABLES), 0
    )
    return error["fields"][paths.index(path)]["message"]


@pytest.mark.parametrize(
    "moment",
    [
        "0001-01-01T00:00:00+05:00",
        "0001-01-01T00:00:00",
        "1999-12-31T23:59:59Z",
        "2019-12-31T23:59:59+00:00",
    ],
)
def test_a_timestamp_before_2020_is_refused_not_stored_unreadable(
    moment, alice_key, smoke_run
) -> None:
    # Postgres stores year 1 at +05:00 as 1 BC, which no page could read back.
    response = post_json(Client(), "/api/v1/runs", _put(smoke_run, "timestamp", moment), alice_key)
    assert "before 2020-01-01" in _refused(response, "timestamp")


def test_the_first_moment_of_2020_is_accepted(alice_key, smoke_run) -> None:
    payload = _put(smoke_run, "timestamp", "2020-01-01T00:00:00+00:00")
    assert post_json(Client(), "/api/v1/runs", payload, alice_key).status_code == 201


NAME_FIELDS = ["model.model_id", "model.quantization", "machine.gpu", "machine.cpu", "harness"]
BAD_CHARACTERS = ["\x07", "\n", "\t", "\r", "\x1b", "\x7f", "\x85", "\ufffe", "\uffff", "\u202e"]


@pytest.mark.parametrize("char", BAD_CHARACTERS, ids=[f"U+{ord(c):04X}" for c in BAD_CHARACTERS])
@pytest.mark.parametrize("field", NAME_FIELDS)
@pytest.mark.parametrize("endpoint", ["/api/v1/runs", "/submit"])
def test_a_control_character_in_a_name_is_refused_naming_the_field(
    endpoint, field, char, alice_key, smoke_run
) -> None:
    payload = _put(smoke_run, field, f"qwen3{char}evil:8b")
    key = alice_key if endpoint == "/api/v1/runs" else None
    message = _refused(post_json(Client(), endpoint, payload, key), field)
    assert f"U+{ord(char):04X}" in message


def test_a_lone_surrogate_is_refused_naming_the_field(alice_key, smoke_run) -> None:
    body = json.dumps(_put(smoke_run, "model.model_id", "qwen3\ud800:8b"))  # sent as \ud800
    assert "\\ud800" in body
    _refused(post_json(Client(), "/api/v1/runs", body, alice_key), "model.model_id")


def test_free_text_keeps_its_line_breaks_and_a_models_raw_output(alice_key, smoke_run) -> None:
    payload = _put(smoke_run, "command_used", "llama-server \\\n  -m model.gguf\t-ngl 99")
    payload = _put(payload, f"{TASK}.output", "\x1b[31mred\x1b[0m \x07 ANSWER: 42")
    response = post_json(Client(), "/api/v1/runs", payload, alice_key)
    assert response.status_code == 201, response.content
    assert "\n" in Run.objects.get().command_used


# (mutated path, value, the field the 400 names)
TOO_LARGE = [
    (f"{TASK}.tokens_generated", 2**31, f"{TASK}.tokens_generated"),
    (f"{TASK}.tokens_prompt", 2**31, f"{TASK}.tokens_prompt"),
    (f"{TRIAL}.trial_index", 40000, f"{TRIAL}.trial_index"),
    (f"{TRIAL}.tokens_generated", 2**31, f"{TRIAL}.tokens_generated"),
    (f"{TASK}.task_id", "t" * 121, f"{TASK}.task_id"),
    (f"{TASK}.latency_ms", 10**400, f"{TASK}.latency_ms"),
    ("model.model_id", "m" * 301, "model.model_id"),
    ("model.quantization", "Q" * 41, "model.quantization"),
    ("benchmark_id", "b" * 41, "benchmark_id"),
    ("benchmark_version", "3." * 11, "benchmark_version"),
    ("benchmark_profile", "p" * 21, "benchmark_profile"),
    ("score_schema_version", "3.0." + "1" * 20, "score_schema_version"),
    ("harness_version", "h" * 21, "harness_version"),
    ("provider", "p" * 41, "provider"),
    ("machine.os", "o" * 41, "machine.os"),
    ("machine.gpu", "G" * 201, "machine.gpu"),
    ("engine", {"name": "llama.cpp", "version": "v" * 81}, "engine.version"),
    ("command_used", "llama-server -c 99999999999999", "command_used"),
    ("command_used", "llama-server -ctk " + "k" * 41, "command_used"),
    ("command_used", "llama-server -md " + "d" * 301, "command_used"),
]


@pytest.mark.parametrize(("path", "value", "field"), TOO_LARGE, ids=[c[0] for c in TOO_LARGE])
def test_a_value_larger_than_its_column_is_a_400_naming_the_field(
    path, value, field, alice_key, smoke_run
) -> None:
    payload = _put(smoke_run, path, value)
    for endpoint, key in (("/api/v1/runs", alice_key), ("/submit", None)):
        _refused(post_json(Client(), endpoint, payload, key), _json_path(field))
    # Without the schema (the importers' path) the record check names the same field.
    with pytest.raises(FormatError) as refused:
        intake.check_record(parse_run_payload(payload))
    assert refused.value.position == _json_path(field)


def test_a_150_letter_model_id_is_stored_and_renders_everywhere(
    alice_key, smoke_run, bob, bob_client
) -> None:
    add_runs(record(model_id="baseline:8b"))  # something to compare it with
    payload = _put(smoke_run, "model.model_id", "a" * 150)
    response = post_json(Client(), "/api/v1/runs", payload, alice_key)
    assert response.status_code == 201, response.content
    run = approve_and_check(response.json()["id"], bob, bob_client)
    assert run.stack.model_id == "a" * 150 and len(run.stack.model_family) == 100


def test_a_model_id_whose_parameter_count_is_zero_is_a_400_not_a_conflict(
    alice_key, smoke_run
) -> None:
    response = post_json(
        Client(), "/api/v1/runs", _put(smoke_run, "model.model_id", "tiny-0b"), alice_key
    )
    assert "parameter count of 0" in _refused(response, "model.model_id")


def test_an_integrity_error_that_is_no_race_is_never_called_a_conflict(
    monkeypatch, alice, smoke_run
) -> None:
    """Were the validation to miss a constraint, the upload must fail as the bug it is, not
    tell the submitter that another account owns their run."""
    monkeypatch.setattr(intake, "check_record", lambda record: None)
    payload = _put(smoke_run, "model.model_id", "tiny-0b")
    with pytest.raises(IntegrityError):
        submit_run(payload=payload, channel=Channel.API_KEY, submitter=alice)
    assert not Run.objects.exists()


def test_a_real_conflict_is_still_a_409(alice_key, mallory_key, smoke_run) -> None:
    assert post_json(Client(), "/api/v1/runs", smoke_run, alice_key).status_code == 201
    response = post_json(Client(), "/api/v1/runs", smoke_run, mallory_key)
    assert response.status_code == 409
    with pytest.raises(SubmissionConflict):
        submit_run(payload=smoke_run, channel=Channel.API_KEY, submitter=None)


@pytest.mark.parametrize(
    ("path", "field"),
    [(f"{TASK}", "suites.speed.tasks"), (f"{TRIAL}.trial_index", f"{TASK}.metadata.trials")],
)
def test_repeated_task_ids_or_trial_indexes_are_a_400_not_a_conflict(
    path, field, alice_key, smoke_run
) -> None:
    if path == TASK:  # the second task takes the first one's id
        payload = _put(smoke_run, "suites.speed.tasks.1.task_id", "speed-short-001")
    else:  # the second trial takes the first one's index
        payload = _put(smoke_run, path, 1)
    assert "more than once" in _refused(
        post_json(Client(), "/api/v1/runs", payload, alice_key), _json_path(field)
    )


def test_a_schema_error_names_each_missing_field_once(alice_key, smoke_run) -> None:
    broken = {k: v for k, v in smoke_run.items() if k not in ("timestamp", "model", "suites")}
    broken["bundle_schema_version"] = "1.0"
    response = post_json(Client(), "/api/v1/runs", broken, alice_key)
    fields = response.json()["error"]["fields"]
    paths = [item["path"] for item in fields]
    assert sorted(paths) == ["model", "suites", "timestamp"], paths


def test_the_published_schema_states_the_column_limits(client) -> None:
    schema = json.loads(client.get("/api/v1/schemas/upload-1.json").content)
    assert "x-column" not in json.dumps(schema)
    properties, defs = schema["properties"], schema["$defs"]
    assert properties["benchmark_id"]["maxLength"] == Run._meta.get_field("benchmark_id").max_length
    assert properties["score_schema_version"]["maxLength"] == 20
    assert properties["model"]["properties"]["model_id"]["maxLength"] == 300
    assert defs["task"]["properties"]["tokens_generated"]["maximum"] == 2**31 - 1
    assert defs["trial"]["properties"]["trial_index"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 2**15 - 1,
    }
    # A tighter product limit stated in the file is kept, never loosened to the column's.
    assert properties["machine"]["properties"]["gpu_count"]["maximum"] == 64
    assert schema["properties"]["suites"]["propertyNames"]["maxLength"] == 40


def test_every_column_the_schema_file_names_exists_and_has_a_limit() -> None:
    text = limits.SCHEMA_PATH.read_text()
    labels = {part.split('"')[0] for part in text.split('"x-column": "')[1:]}
    assert len(labels) >= 25
    for label in labels:
        field = limits.column(label)
        assert field.max_length or limits.integer_range(field)[1], label


# --- the importers share the same rules ----------------------------------------------------


def _import(path: Path) -> str:
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 file"):
        call_command("import_results", str(path), stdout=out, stderr=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda e: e.update(submitted_at="0001-01-01T00:00:00+05:00"), "submitted_at"),
        (lambda e: e.update(context_length=2**40), "launch.context_length"),
        (lambda e: e["model"].update(name="qwen3\nevil"), "model.name"),
        (lambda e: e.update(kv_cache_type_k="k" * 60, kv_cache_type_v=""), "kv_cache_type"),
        (lambda e: e["submitter"].update(name="s" * 151), "submitter.name"),
        (lambda e: e["model"].update(name="tiny-0b"), "model.model_id"),
    ],
)
def test_an_imported_file_a_column_cannot_hold_is_rejected_whole(
    change, named, tmp_path, fixtures_dir
) -> None:
    data = json.loads((fixtures_dir / "leaderboard-v1.json").read_text())
    change(data["entries"][3])
    path = tmp_path / "leaderboard-v1.json"
    path.write_text(json.dumps(data))
    output = _import(path)
    assert "rejected" in output and named in output, output
    assert not Run.objects.exists() and not Stack.objects.exists()


def test_an_imported_file_with_a_nul_anywhere_is_rejected_not_a_crash(tmp_path, v2_run) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**v2_run, "notes": "a\u0000b"}))
    assert "NUL" in _import(path)
    assert not Run.objects.exists()


def test_more_passes_than_tasks_in_an_export_is_rejected_not_a_crash(
    tmp_path, fixtures_dir
) -> None:
    data = json.loads((fixtures_dir / "leaderboard.json").read_text())
    row = next(r for r in data["runs"] if "agent_task_count" in r)
    row["agent_pass"] = row["agent_task_count"] + 1
    path = tmp_path / "leaderboard.json"
    path.write_text(json.dumps(data))
    assert "pass_count" in _import(path)
    assert not Run.objects.exists()


def test_the_moderators_email_is_one_line_whatever_the_model_id_holds(
    alice, alice_key, smoke_run, bob, bob_client, django_capture_on_commit_callbacks
) -> None:
    """A newline stored before these rules existed must not stop the decision's email, nor
    make the stack page's link to its model unreversible."""
    add_runs(record(model_id="baseline:8b"))
    run_id = post_json(Client(), "/api/v1/runs", smoke_run, alice_key).json()["id"]
    Stack.objects.filter(runs__id=run_id).update(model_id="evil\nBcc: victim@example.org")
    with django_capture_on_commit_callbacks(execute=True):
        approve_and_check(run_id, bob, bob_client)
    (message,) = mail.outbox
    assert "\n" not in message.subject and "Bcc: victim" in message.subject
    assert message.to == [alice.email] and not message.bcc
