"""runs 0009 and lab 0007: the prompt formats hermes, qwen and pi get the names that cannot be
taken for the real programs, stacks re-keyed and merged where keys coincide; and back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from lab.models import BenchmarkJob
from runs import normalize
from runs.models import Lane, Run, Stack

BEFORE = [
    ("runs", "0008_run_comparability_contention"),
    ("worker", "0006_job_choices_on_the_model"),
]
FIELDS = dict(
    model_id="qwen3:8b",
    quantization="Q4_K_M",
    model_sha256="",
    engine="ollama",
    context_length=None,
    kv_cache_type="",
    draft_model="",
    launch_settings={},
)


def _migrate(targets):
    """Migrate to `targets`; the models as they stood there (the executor's own answer, going
    backwards, holds later migrations' fields too)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def _latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _key(harness: str) -> str:
    return normalize.stack_identity(harness=harness, **FIELDS)


def _stack_and_run(apps, harness: str, number: int):
    stack = apps.get_model("runs", "Stack").objects.create(
        comparability_key=_key(harness), harness=harness, **FIELDS
    )
    run = apps.get_model("runs", "Run").objects.create(
        stack=stack,
        fingerprint=f"fp-{number}",
        client_run_id=f"run-{number}",
        score_scale="v3",
        comparable=True,
        overall_score=50.0,
        quality_score=60.0,
        started_at=datetime(2026, 10, 1, number, tzinfo=UTC),
        source_format="run-v3",
        published=True,
    )
    apps.get_model("submissions", "Submission").objects.create(
        run=run, channel="import", status="approved", submitter_name=f"person-{number}"
    )
    return stack


@pytest.mark.django_db(transaction=True)
def test_old_format_names_are_renamed_rekeyed_merged_and_back() -> None:
    old = _migrate(BEFORE)
    hermes = _stack_and_run(old, "hermes", 1)
    # Uploaded under the new name before the migration ran: the same stack as "hermes".
    already = _stack_and_run(old, "xml-tool-call", 2)
    pi = _stack_and_run(old, "pi", 3)
    raw = _stack_and_run(old, "raw", 4)
    user = old.get_model("auth", "User").objects.create(username="op")
    old.get_model("worker", "BenchmarkJob").objects.create(
        requested_by=user, model="m", harness="qwen", endpoint_url="http://127.0.0.1:1/v1"
    )

    _migrate(_latest())
    names = dict(Stack.objects.values_list("id", "harness"))
    # hermes merged into the stack already holding its new key (that id is in links).
    assert names == {already.id: "xml-tool-call", pi.id: "think-xml-tool-call", raw.id: "raw"}
    assert not Stack.objects.filter(id=hermes.id).exists()
    merged = Stack.objects.get(id=already.id)
    assert merged.comparability_key == _key("xml-tool-call")
    assert merged.runs.count() == 2
    assert Stack.objects.get(id=pi.id).comparability_key == _key("think-xml-tool-call")
    assert Stack.objects.get(id=raw.id).comparability_key == _key("raw")
    assert Lane.objects.get(stack=merged, hardware_class=None).run_count == 2
    assert BenchmarkJob.objects.get().harness == "xml-function-call"

    _migrate(BEFORE)
    back = dict(Stack.objects.values_list("harness", "comparability_key"))
    assert back == {"hermes": _key("hermes"), "pi": _key("pi"), "raw": _key("raw")}
    assert old.get_model("worker", "BenchmarkJob").objects.get().harness == "qwen"
    _migrate(_latest())
    assert Run.objects.count() == 4
