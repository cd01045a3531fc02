"""A test run keeps to the queues it creates: messages that others left on the same Redis
database survive it, and it leaves nothing of its own behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import redis
from django.conf import settings

from benchloop_site.celery import app
from runs.tasks import refresh_stack_stats_task

REPO = Path(__file__).resolve().parents[2]


def test_tasks_go_to_this_runs_own_queue(broker_key) -> None:
    """Also the target of the nested run below: it enqueues a message, as many tests do."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    before = client.llen(broker_key(app.conf.task_default_queue))
    refresh_stack_stats_task.delay(0)
    assert client.llen(broker_key(app.conf.task_default_queue)) == before + 1
    print(f"this run's prefix: {broker_key('')}")


def test_a_test_run_leaves_queues_it_did_not_create_alone() -> None:
    """Messages of another site on this Redis database, in its default queue ("celery", which
    the suite used to purge) and in a queue of another name, outlive a whole test run."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    marker = f"someone else's message {uuid.uuid4()}".encode()
    queues = ["celery", f"someone-else-{uuid.uuid4().hex[:8]}"]
    for queue in queues:
        client.lpush(queue, marker)
    try:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
        env.pop("CELERY_BROKER_KEY_PREFIX", None)  # the nested run picks its own
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "0", "-q", "-s"]
            + [f"{Path(__file__).relative_to(REPO)}::test_tasks_go_to_this_runs_own_queue"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        for queue in queues:
            assert marker in client.lrange(queue, 0, -1), queue
        # The nested run removed what it created: its message and its queue's bindings.
        prefix = re.search(r"this run's prefix: (\S+)", run.stdout).group(1)
        assert prefix.startswith("benchloop-test-")
        assert not list(client.scan_iter(match=f"{prefix}*"))
    finally:
        for queue in queues:
            client.lrem(queue, 0, marker)
