"""The lab tests add approved hosts, since a job is only queued to a pool that one serves (the
llama.cpp fixtures come from the root conftest)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from lab.models import WorkerHost


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
