"""A real speed-deep bundle on the site: the sweep is measured, never scored, on every page that
shows its suite, whether the CLI wrote no score (this one) or a 100 (CLIs before it)."""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
from django.test import Client

from runs.importers import parse_run_payload
from runs.limits import upload_schema
from runs.models import SuiteResult, TaskResult
from submissions.intake import import_records

pytestmark = pytest.mark.llm


@pytest.fixture
def bundle(sweep_bundle) -> dict:
    """speed-deep with one depth the server holds, one it cannot, and one stream (conftest)."""
    return sweep_bundle


def _receipts(client: Client, run_id: int) -> str:
    html = client.get(f"/runs/{run_id}/").content.decode()
    start = html.index('<section class="receipts">')
    return re.sub(r"\s+", " ", html[start : html.index("</section>", start)])


@pytest.mark.django_db
@pytest.mark.parametrize("written", [None, 100.0], ids=["this CLI", "an older CLI's 100"])
def test_the_sweep_is_stored_and_shown_as_measured_not_scored(bundle, written, client) -> None:
    sent = copy.deepcopy(bundle)
    suite = sent["suites"]["speed_sweep"]
    assert suite["score"] is None and {t["score"] for t in suite["tasks"]} == {None}
    suite["score"] = written
    for task in suite["tasks"]:
        task["score"] = written
    jsonschema.validate(sent, upload_schema())
    (run,) = import_records([parse_run_payload(sent)]).created
    stored = SuiteResult.objects.get(run=run, suite="speed_sweep")
    assert stored.score is None
    assert set(TaskResult.objects.filter(suite_result=stored).values_list("score", flat=True)) == {
        None
    }
    receipts = _receipts(client, run.id)
    assert 'speed_sweep</span> <span class="muted">measured, not scored' in receipts
    rows = dict(re.findall(r'<th scope="row" class="mono">([\w-]+)</th> <td>(.*?)</td>', receipts))
    # The cell's status, not "passed" (then the finish reason, as on every task row).
    assert rows["sweep-depth-0"].startswith('<span class="muted">measured</span>')
    assert rows["sweep-depth-65536"].startswith('<span class="muted">skipped</span>')
    assert rows["sweep-concurrency-1"].startswith('<span class="muted">measured</span>')
    assert "passed" not in "".join(v for k, v in rows.items() if k.startswith("sweep-"))
