"""Every public surface a stored run reaches, fetched and checked to render (for the stored-input
tests): HTML pages and the leaderboard's HTMX fragment, the feeds, the exports, the share images,
the read API, and the moderation queue for a moderator."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import Run, Stack
from runs.services import refresh_stack_stats
from submissions.models import Status, Submission
from submissions.services import moderate_submission

PNG = b"\x89PNG\r\n\x1a\n"


def public_urls(run: Run) -> list[str]:
    """Every public URL that shows the run or its stack (compared with another stack if one
    is published: the compare image needs two)."""
    stack = run.stack
    others = Stack.objects.filter(best_run__isnull=False).exclude(pk=stack.id)
    pair = ",".join(str(i) for i in [stack.id, *others.values_list("id", flat=True)[:1]])
    urls = [
        f"/runs/{run.id}/",
        f"/stacks/{stack.id}/",
        "/",
        "/leaderboard/",
        "/leaderboard/?scale=all&comparable=all&sort=model",
        f"/compare/?stacks={pair}",
        "/leaderboard/feed.atom?scale=all&comparable=all",
        "/lab/jobs/feed.atom",
        "/leaderboard/export.csv?scale=all&comparable=all",
        "/leaderboard/export.json?scale=all&comparable=all",
        "/leaderboard/export.md?scale=all&comparable=all",
        f"/runs/{run.id}/share.png",
        f"/stacks/{stack.id}/share.png",
        f"/api/v1/runs/{run.id}",
        f"/api/v1/stacks/{stack.id}",
        "/api/v1/leaderboard?scale=all",
        "/api/v1/hardware",
    ]
    if run.hardware_id:
        urls.append(f"/hardware/{run.hardware_id}/")
    if stack.best_run_id:
        # A stack whose published runs are none of them rankable (a v3 run that is not
        # comparable) is on neither its model's page nor the compare image, which answer 404
        # although the stack page links to the model page: reported, not settled here.
        urls.append(reverse("leaderboard:model", args=[stack.model_id]))
    submission = run.submission
    if submission.submitter_url:  # anonymous uploads link to no page
        urls.append(submission.submitter_url)
    if "," in pair and stack.best_run_id:
        urls.append(f"/compare/share.png?stacks={pair}")
    return urls


def assert_renders(client: Client, url: str, headers: dict | None = None) -> None:
    """200, and a body its content type can be parsed as."""
    response = client.get(url, headers=headers or {})
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    kind = response["Content-Type"]
    body = response.content
    if "atom+xml" in kind:
        ET.fromstring(body)  # well-formed: a reader would drop a broken feed
    elif kind.startswith("application/json"):
        json.loads(body)
    elif kind.startswith("text/csv"):
        list(csv.reader(io.StringIO(body.decode())))
    elif kind.startswith("image/png"):
        assert body.startswith(PNG), url
    else:
        assert kind.startswith(("text/html", "text/markdown")), (url, kind)
        body.decode()


def approve_and_check(run_id: int, moderator: User, moderator_client: Client) -> Run:
    """The run in the moderator's queue, approved (its email sent), then on every surface it
    reaches: all public ones if it is published, and the moderation log."""
    assert_renders(moderator_client, "/moderation/")
    submission = Submission.objects.get(run_id=run_id)
    moderate_submission(submission=submission, status=Status.APPROVED, moderator=moderator)
    refresh_stack_stats(stack_ids=[submission.run.stack_id])
    run = Run.objects.select_related("stack", "submission").get(pk=run_id)
    assert_renders(moderator_client, "/moderation/log/")
    assert_renders(moderator_client, f"/runs/{run.id}/")  # with what only a moderator sees
    if run.published:
        anonymous = Client()
        for url in public_urls(run):
            assert_renders(anonymous, url)
        fragment = {"HX-Request": "true"}
        assert_renders(anonymous, "/leaderboard/?scale=all&comparable=all", fragment)
    return run
