"""The lab tests add approved hosts, since a job is only queued to a pool that one serves (the
llama.cpp fixtures come from the root conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from lab.models import WorkerHost
from lab.tests.lab import LabSite, lab_site_env
from worker.engine.testing.xllama_launcher import free_port


def approved_host(name: str, pools: list[str], inventory: list | None = None) -> WorkerHost:
    """An approved lab host that has just sent its heartbeat."""
    return WorkerHost.objects.create(
        name=name,
        pools=pools,
        inventory=inventory or [],
        approved_at=timezone.now(),
        last_heartbeat_at=timezone.now(),
    )


@pytest.fixture
def lab_hosts(db) -> list[WorkerHost]:
    """Two approved hosts: one serves "cpu", the other "gpu.4090" and reports a server."""
    return [
        approved_host("lab-cpu", ["cpu"]),
        approved_host(
            "lab-4090-a",
            ["gpu.4090"],
            [{"url": "http://127.0.0.1:8080", "kind": "llama.cpp", "models": ["qwen3-8b-q4"]}],
        ),
    ]


@pytest.fixture
def lab_site(transactional_db, tmp_path) -> Iterator[LabSite]:
    """gunicorn and the site's Celery worker on the test database, for lab agents to talk to."""
    folder = tmp_path / "site"
    folder.mkdir()
    site = LabSite(url=f"http://127.0.0.1:{free_port()}", env=lab_site_env(folder), folder=folder)
    try:
        site.start()
        yield site
    finally:
        site.stop()


@pytest.fixture
def agent_for(live_server) -> Iterator:
    """A factory of agent clients to the in-process site, each with a fresh host key."""
    from lab import agents
    from worker.agent.client import SiteClient

    clients = []

    def make(host_name: str) -> SiteClient:
        _key, plaintext = agents.create_host_key(host_name=host_name, user=None)
        clients.append(SiteClient(live_server.url, plaintext, timeout=10))
        return clients[-1]

    yield make
    for client in clients:
        client.close()
