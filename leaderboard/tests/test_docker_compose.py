"""docker-compose.yml cannot run here (no Docker engine); check everything short of running it."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import yaml

from worker.engine.testing.xllama_launcher import free_port

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP_SERVICES = ["web", "worker", "beat"]


def test_it_defines_the_production_services() -> None:
    assert set(SERVICES) == {"web", "worker", "beat", "postgres", "redis", "cache"}


def test_every_service_has_a_healthcheck() -> None:
    for name, service in SERVICES.items():
        check = service.get("healthcheck")
        assert check and check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert check.get("interval") and check.get("retries"), name


def test_app_services_wait_for_healthy_postgres_and_both_redis() -> None:
    for name in APP_SERVICES:
        depends = SERVICES[name]["depends_on"]
        assert depends == {
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
            "cache": {"condition": "service_healthy"},
        }, name
        env = SERVICES[name]["environment"]
        assert env["DEBUG"] == "False"
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        # Pages in the capped cache; counters (LIMITS_CACHE_URL unset) in the broker's Redis.
        assert env["CACHE_URL"] == "redis://cache:6379/0"
        assert "LIMITS_CACHE_URL" not in env
        assert "?" in env["SECRET_KEY"]  # compose refuses to start without one


def test_the_commands_exist_in_this_project() -> None:
    bin_dir = Path(sys.executable).parent
    web = SERVICES["web"]["command"]
    assert web[0] == "gunicorn" and (bin_dir / "gunicorn").exists()
    module, _, attr = web[1].partition(":")
    assert hasattr(importlib.import_module(module), attr)
    for name in ("worker", "beat"):
        command = SERVICES[name]["command"]
        assert command[:3] == ["celery", "-A", "benchloop_site"], name
        assert command[3] == name
        assert (bin_dir / "celery").exists()
    assert importlib.import_module("benchloop_site").celery_app.main == "benchloop"
    assert SERVICES["web"]["environment"]["RUN_MIGRATIONS"] == "1"


def test_the_image_build_inputs_exist() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), source
    entrypoint = REPO / "docker" / "entrypoint.sh"
    assert entrypoint.stat().st_mode & 0o111
    assert 'exec "$@"' in entrypoint.read_text()
    assert shutil.which("sh")


def test_health_commands_name_real_tools() -> None:
    assert "pg_isready" in SERVICES["postgres"]["healthcheck"]["test"][1]
    assert SERVICES["redis"]["healthcheck"]["test"][1:] == ["redis-cli", "ping"]
    assert "/healthz" in " ".join(SERVICES["web"]["healthcheck"]["test"])
    assert "inspect ping" in SERVICES["worker"]["healthcheck"]["test"][1]


@pytest.mark.parametrize(
    ("service", "policy", "maxmemory"),
    [("redis", "noeviction", "0"), ("cache", "allkeys-lru", "268435456")],
)
def test_the_redis_commands_start_a_real_redis_with_their_eviction_policy(
    tmp_path, service, policy, maxmemory
) -> None:
    """This machine's redis-server takes each service's command line as written."""
    command = SERVICES[service]["command"]
    assert command[0] == "redis-server"
    port = free_port()
    server = subprocess.Popen(
        [*command, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": policy}
        assert client.config_get("maxmemory") == {"maxmemory": maxmemory}
    finally:
        server.terminate()
        server.wait(10)
