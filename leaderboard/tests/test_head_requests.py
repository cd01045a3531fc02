"""HEAD answers like GET, without a body, on every URL of the site (uptime monitors and feed
readers send HEAD; Django's require_GET answers them 405)."""

from __future__ import annotations

import httpx
import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from lab import services as lab
from lab.models import BenchmarkJob
from leaderboard.tests.factories import add_runs, record
from leaderboard.tests.matrix_bundles import matrix_record

# Query strings some pages need to show more than their empty state.
EXTRA_QUERY = {
    "leaderboard:compare": "?stacks={stack},{other}",
    "leaderboard:compare_image": "",
    "leaderboard:matrix_csv": "?model={model}&hw={hw}",
    "api-matrix": "?model={model}&hw={hw}",
    "api-estimates": "?hw={hw}",
}


def _named_patterns(patterns, namespace: str = "") -> list[str]:
    names = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if str(pattern.pattern).startswith("admin/"):
                continue  # Django's own admin
            inner = namespace + (f"{pattern.namespace}:" if pattern.namespace else "")
            names += _named_patterns(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern):
            assert pattern.name, f"unnamed URL pattern {pattern.pattern}"
            names.append(namespace + pattern.name)
    return names


@pytest.fixture
def site_objects(operator) -> dict:
    stack_run, other_run, _matrix_run = add_runs(
        record(model_id="qwen3:8b", submitter="ada"),
        record(model_id="llama3.1:8b"),
        matrix_record("raw", {"matrix_bugfix": [None, "wrong"]}, model_id="qwen3:8b"),
    )
    job = lab.queue_job(
        requested_by=operator, model="qwen3:8b", endpoint_url="http://10.1.2.3/v1", pool="gpu"
    )
    BenchmarkJob.objects.filter(pk=job.pk).update(status="succeeded", finished_at=timezone.now())
    return {
        "run": stack_run.pk,
        "stack": stack_run.stack_id,
        "other": other_run.stack_id,
        "hardware": stack_run.hardware_id,
        "model": stack_run.stack.model_id,
        "hw": stack_run.hardware_class.slug,
        "job": job.pk,
        "user": operator.pk,
    }


def _kwargs(name: str, ids: dict) -> dict:
    """Arguments for each pattern with parameters; a new one must be added here."""
    by_name = {
        "api-stack": {"pk": ids["stack"]},
        "api-run": {"pk": ids["run"]},
        "api-run-state": {"pk": ids["run"]},
        "api-run-standing": {"pk": ids["run"]},
        "api-job": {"pk": ids["job"]},
        "accounts:withdraw": {"run_id": ids["run"]},
        "accounts:delete": {"run_id": ids["run"]},
        "accounts:revoke_key": {"pk": 1},
        "lab:job": {"pk": ids["job"]},
        "lab:cancel": {"pk": ids["job"]},
        "lab:host": {"pk": 1},
        "lab:approve_host": {"pk": 1},
        "lab:prompt": {"pk": 1},
        "lab:revoke_host_key": {"pk": 1},
        **{
            f"api-agent-{action}": {"job_id": ids["job"]}
            for action in ("claim", "job-heartbeat", "running", "events", "fail", "requeue")
        },
        "api-agent-upload-run": {"job_id": ids["job"]},
        **{
            f"api-agent-prompt-{action}": {"prompt_id": 1}
            for action in ("progress", "answer", "failed")
        },
        "submissions:trust": {"user_id": ids["user"]},
        "submissions:report": {"run_id": ids["run"]},
        "leaderboard:stack": {"pk": ids["stack"]},
        "leaderboard:stack_image": {"pk": ids["stack"]},
        "leaderboard:run": {"pk": ids["run"]},
        "leaderboard:run_image": {"pk": ids["run"]},
        "leaderboard:model": {"model_id": ids["model"]},
        "leaderboard:matrix": {"hw": ids["hw"], "model_id": ids["model"]},
        "leaderboard:estimate": {"pk": ids["stack"], "hw": ids["hw"]},
        "leaderboard:hardware": {"pk": ids["hardware"]},
        "leaderboard:submitter": {"username": "alice"},
        "leaderboard:imported_submitter": {"name": "ada"},
        "accounts:activate": {"uidb64": "MQ", "token": "not-a-token"},
        "accounts:password_reset_confirm": {"uidb64": "MQ", "token": "not-a-token"},
    }
    return by_name.get(name, {})


def _urls(ids: dict) -> list[str]:
    urls = []
    for name in _named_patterns(get_resolver().url_patterns):
        if name == "leaderboard:export":
            urls += [reverse(name, kwargs={"fmt": fmt}) for fmt in ("csv", "json", "md")]
            continue
        try:
            url = reverse(name, kwargs=_kwargs(name, ids))
        except Exception as exc:
            raise AssertionError(f"add arguments for the URL pattern {name!r}: {exc}") from exc
        urls.append(url + EXTRA_QUERY.get(name, "").format(**ids))
    return urls


@pytest.mark.django_db(transaction=True)
def test_every_url_answers_head_like_get_without_a_body(live_server, site_objects) -> None:
    urls = _urls(site_objects)
    assert "/leaderboard/feed.atom" in urls and "/lab/jobs/feed.atom" in urls
    answered_200 = []
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        for url in urls:
            get = client.get(url)
            head = client.head(url)
            assert head.status_code == get.status_code, (url, head.status_code, get.status_code)
            assert head.content == b"", url
            for header in ("Content-Type", "Location", "Content-Disposition"):
                assert head.headers.get(header) == get.headers.get(header), (url, header)
            if get.status_code == 200:
                answered_200.append(url)
    # The public pages, feeds and exports are among them, each answering 200 to both.
    for public in (
        "/",
        "/leaderboard/",
        "/leaderboard/export.csv",
        "/leaderboard/feed.atom",
        "/lab/",
        "/lab/jobs/feed.atom",
        f"/lab/jobs/{site_objects['job']}/",
        f"/stacks/{site_objects['stack']}/",
        f"/runs/{site_objects['run']}/share.png",
        "/methodology/",
        "/healthz",
        "/api/v1/leaderboard",
    ):
        assert public in answered_200, public
