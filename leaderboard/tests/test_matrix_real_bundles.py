"""Real engine bundles through the site (issue 19): `benchloop run --profile matrix` against the
scratch llama.cpp server (SmolLM2-135M, --max-tokens 256, tasks mx-fix-01, mx-tools-01,
mx-long-01), once with --harness raw and once with --harness mini-swe-agent, kept as uploaded
(worker.engine.bundle.upload_view) in golden/. They go through the real parser and intake, and
the page's figures are checked against the bundles' own records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from leaderboard import matrix
from leaderboard.templatetags.matrix_tags import times
from leaderboard.tests.factories import ensure_lanes
from runs.importers import parse_run_payload
from runs.models import Run
from submissions.intake import import_records

pytestmark = pytest.mark.django_db
GOLDEN = Path(__file__).parent / "golden"
BUNDLES = {"raw": "matrix-raw.json", "mini-swe-agent": "matrix-mini-swe-agent.json"}


def _bundles() -> dict[str, dict]:
    return {name: json.loads((GOLDEN / file).read_text()) for name, file in BUNDLES.items()}


def _tasks(bundle: dict) -> dict[tuple[str, str], dict]:
    return {
        (suite, task["task_id"]): task
        for suite, record in bundle["suites"].items()
        for task in record["tasks"]
    }


def test_real_matrix_bundles_show_their_own_figures(client: Client) -> None:
    bundles = _bundles()
    import_records([parse_run_payload(json.loads(json.dumps(b))) for b in bundles.values()])
    ensure_lanes()
    run = Run.objects.get(stack__harness="mini-swe-agent")
    assert run.harness_version == bundles["mini-swe-agent"]["harness_version"]
    found = matrix.build(run.stack.model_id, run.hardware_class)
    assert found is not None
    assert [r.harness for r in found.rows] == ["raw", "mini-swe-agent"]
    raw_tasks, mini_tasks = (_tasks(bundles[name]) for name in ("raw", "mini-swe-agent"))
    for row, tasks in zip(found.rows, (raw_tasks, mini_tasks), strict=True):
        overall = row.overall
        assert overall.score.n == len(tasks)
        assert overall.score.passed == sum(t["passed"] for t in tasks.values())
        prompts = [t["metadata"]["overhead"]["prompt_tokens"] for t in tasks.values()]
        assert overall.overhead.prompt_tokens == pytest.approx(sum(prompts) / len(prompts))
        peaks = [t["metadata"]["overhead"]["peak_context"] for t in tasks.values()]
        assert overall.overhead.peak_context == max(peaks)
        kinds = [t["metadata"]["failure"] for t in tasks.values() if not t["passed"]]
        assert overall.format_failures == kinds.count("format")
        assert overall.wrong == kinds.count("wrong")
        assert overall.sandbox == kinds.count("sandbox")
        # The suites' own failure counts agree with their tasks'.
        for suite, record in bundles[row.harness]["suites"].items():
            cell = next(c for c in row.cells if c is not None and c.suite == suite)
            counted = record["metadata"]["failures"]  # the kinds that occurred
            assert cell.format_failures == counted.get("format", 0)
            assert cell.wrong == counted.get("wrong", 0)
    # Tokens sent against raw, over the tasks both ran.
    shared = raw_tasks.keys() & mini_tasks.keys()
    sent = sum(mini_tasks[k]["metadata"]["overhead"]["prompt_tokens"] for k in shared)
    base = sum(raw_tasks[k]["metadata"]["overhead"]["prompt_tokens"] for k in shared)
    assert found.rows[1].overall.overhead.tokens_ratio == pytest.approx(sent / base)
    page = client.get(
        reverse(
            "leaderboard:matrix",
            kwargs={"hw": run.hardware_class.slug, "model_id": run.stack.model_id},
        )
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert times(sent / base) in html  # ×23 here: its system prompt and turns
    # SmolLM2 passes nothing either way: a tie, said as one.
    assert found.verdict.tied and "raw and mini-swe-agent tie at 0%" in html
