"""The lab agent as it runs on a GPU host: no database credentials in its processes, a revoked
key stops it, and a site restart in the middle of a job loses and repeats nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lab import agents
from lab.models import HostKey, JobEvent
from lab.tests.lab import (
    approve,
    assert_one_clean_attempt,
    finished,
    queue_over_http,
    start_worker,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)
SECRETS = ("DATABASE_URL", "SECRET_KEY", "API_KEY_PEPPER", "postgres://", "postgresql://")


def _process_tree(pid: int) -> list[int]:
    """The agent's main process and its pool children."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    found = [pid]
    for child in children.read_text().split() if children.exists() else []:
        found += _process_tree(int(child))
    return found


def _environment(pid: int) -> str:
    return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").replace("\0", "\n")


def test_the_agent_holds_no_database_url_and_a_revoked_key_stops_it(
    lab_site, tmp_path, operator
) -> None:
    worker = start_worker(tmp_path, "lab-iso", ["cpu.test"], site=lab_site)
    try:
        approve("lab-iso")
        wait_for(lambda: "now consumes its pools" in worker.log(), 60, "the host to consume")
        tree = wait_for(
            lambda: (t := _process_tree(worker.process.pid)) and len(t) > 1 and t,
            30,
            "the pool child",
        )
        for pid in tree:
            environment = _environment(pid)
            leaked = [s for s in SECRETS if s in environment]
            assert not leaked, f"process {pid} holds {leaked}"
            assert "BENCHLOOP_HOST_KEY=blh_" in environment
        agents.revoke_host_key(key=HostKey.objects.get(host_name="lab-iso"))
        revoked_at = time.monotonic()
        worker.process.wait(timeout=60)  # the host's next call gets a 401: it stops
        took = time.monotonic() - revoked_at
    finally:
        worker.stop()
    assert "stops: This host key has been revoked." in worker.log()
    assert took < 30, f"stopped {took:.0f} s after the key was revoked"


@pytest.mark.llm
def test_a_job_survives_a_site_restart_and_records_every_event_once(
    lab_site, tmp_path, operator, alice_key, llm_url, llm_model
) -> None:
    tasks = ["speed-p128-n256", "speed-p512-n16", "speed-p2048-n256"]
    worker = start_worker(tmp_path, "lab-s", ["cpu.test"], site=lab_site)
    try:
        approve("lab-s")
        job_id = queue_over_http(
            alice_key, endpoint_url=llm_url, model=llm_model, tasks=tasks, max_tokens=32
        )
        wait_for(
            lambda: JobEvent.objects.filter(job_id=job_id, kind="task_completed").exists(),
            120,
            "the first task",
            interval=0.05,
        )
        lab_site.kill_web()  # gunicorn dies mid-job: every agent call now fails
        time.sleep(3)
        lab_site.start_web()  # back on the same address, well before the job is stale
        job = wait_for(lambda: finished(job_id), 240, "the job to finish after the restart")
        time.sleep(2)  # anything sent twice would have landed by now
    finally:
        worker.stop()
    assert "retrying in" in worker.log(), "the outage was never seen by the agent"
    try:
        assert_one_clean_attempt(job.pk, tasks=3)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{worker.log()[-4000:]}") from exc
