"""A burst of published uploads to one stack queues one refresh on the real broker, and a
change after that refresh has started queues another."""

from __future__ import annotations

import pytest

from runs.models import Stack
from runs.tasks import refresh_stack_stats_task
from submissions.models import Channel, SubmitterProfile
from submissions.services import submit_run

pytestmark = pytest.mark.django_db


def _upload(user, smoke_run: dict, number: int):
    payload = {**smoke_run, "run_id": f"burst-{number}", "total_runtime_sec": 100 + number}
    return submit_run(payload=payload, channel=Channel.API_KEY, submitter=user).submission


def test_a_burst_queues_one_refresh_per_stack(
    alice, smoke_run, private_queue, django_capture_on_commit_callbacks
) -> None:
    SubmitterProfile.objects.create(user=alice, is_trusted=True)
    with django_capture_on_commit_callbacks(execute=True):
        first = _upload(alice, smoke_run, 1)
    with django_capture_on_commit_callbacks(execute=True):
        _upload(alice, smoke_run, 2)
        _upload(alice, smoke_run, 3)
    assert first.status == "approved"
    assert private_queue() == 1

    # The worker takes it: the refresh sees all three runs.
    stack_id = first.run.stack_id
    refresh_stack_stats_task(stack_id)
    assert Stack.objects.get(pk=stack_id).published_run_count == 3

    # Once a refresh has started, the next change queues its own.
    with django_capture_on_commit_callbacks(execute=True):
        _upload(alice, smoke_run, 4)
    assert private_queue() == 2
