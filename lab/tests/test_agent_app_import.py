"""Importing the lab agent's Celery app leaves a process's current app alone: the site's
current_app (lab.dispatch.send_job, shared_task's .delay, the health check) kept sending with
the agent's app in a test process that had imported worker.agent.app, and queued jobs went
astray for every later test in it."""

from __future__ import annotations

import os
import subprocess
import sys

from leaderboard.tests.installs import REPO

PROBE = """
import benchloop_site.celery
from celery import current_app
import worker.agent.app as agent
print(current_app.main, agent.app.main)
"""


def test_importing_the_agent_app_keeps_the_sites_current_app() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "benchloop_site.settings",
        "BENCHLOOP_BROKER_URL": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15"),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["benchloop", "benchloop-lab-agent"]
