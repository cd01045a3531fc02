"""docker-compose.yml cannot run here (no Docker engine): check everything short of running it,
and run what can run without it (compose_topology.py): the `web` command with its healthcheck,
and the `proxy` nginx with the mounted template in front of it, under production settings."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis
import yaml

from leaderboard.tests.compose_topology import (
    PUBLIC_NAME,
    dot_env,
    get,
    interpolate,
    proxy,
    web,
)
from worker.engine.testing.xllama_launcher import free_port

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP_SERVICES = ["web", "worker", "beat"]


def test_it_defines_the_production_services() -> None:
    assert set(SERVICES) == {"proxy", "web", "worker", "beat", "postgres", "redis", "cache"}
    # Only the proxy faces the clients; gunicorn's port is on the compose network alone.
    assert [name for name, service in SERVICES.items() if "ports" in service] == ["proxy"]
    assert SERVICES["proxy"]["depends_on"] == {"web": {"condition": "service_healthy"}}


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
        assert env["NUM_PROXIES"] == "1"  # behind the proxy, which sets X-Forwarded-For
        site = interpolate(env["SITE_URL"], dot_env())
        assert site == "https://bench.example.org"
        assert interpolate(env["ALLOWED_HOSTS"], dot_env()) == "bench.example.org"


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
    # The base distribution is the CLI alone; the image serves the site.
    assert 'RUN pip install ".[site]"' in dockerfile.splitlines()
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), source
    # Every package the distribution installs is in the image (lab/ was once left out).
    import tomllib

    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    copied = {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ")}
    for pattern in packages["packages"]["find"]["include"]:
        assert pattern.rstrip("*") in copied, f"the Dockerfile does not copy {pattern}"
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


def test_every_setting_compose_passes_is_one_benchloop_reads() -> None:
    """A misspelt variable would be silently ignored: each must be listed in .env.example."""
    documented = {
        line.split("=", 1)[0]
        for line in (REPO / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    for name in APP_SERVICES:
        missing = set(SERVICES[name]["environment"]) - documented - {"RUN_MIGRATIONS"}
        assert not missing, (name, missing)
    compose_only = {"SITE_DOMAIN", "TLS_CERTIFICATE_DIR"}
    assert compose_only <= documented


def _web_healthcheck(port: int) -> list[str]:
    """The `web` healthcheck's command, with the container's port 8000 mapped to `port`."""
    check = SERVICES["web"]["healthcheck"]["test"]
    assert check[0] == "CMD" and check[1] == "python"
    return [sys.executable] + [part.replace(":8000/", f":{port}/") for part in check[2:]]


def test_the_web_healthcheck_passes_with_production_settings(
    tmp_path, test_database_url, broker
) -> None:
    """DEBUG off and ALLOWED_HOSTS the public name: a check that asks for 127.0.0.1 gets 400
    and the container never becomes healthy; the check sends SITE_URL's host instead."""
    with web(tmp_path, test_database_url, broker) as site:
        assert site.env["DEBUG"] == "False" and site.env["ALLOWED_HOSTS"] == PUBLIC_NAME
        result = subprocess.run(
            _web_healthcheck(site.port), env=site.env, capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
        # What the check asked before: Django's host validation refuses it.
        assert get(f"http://127.0.0.1:{site.port}/healthz", host="127.0.0.1").status_code == 400


def test_the_proxy_serves_the_site_over_tls_and_passes_the_client_on(
    tmp_path, test_database_url, broker
) -> None:
    with web(tmp_path, test_database_url, broker) as site, proxy(tmp_path, site.port) as front:
        # The proxy's own healthcheck, as compose runs it (the image's busybox wget here is
        # Debian's wget, with the same flags).
        command = interpolate(SERVICES["proxy"]["healthcheck"]["test"][1], dot_env())
        check = subprocess.run(["sh", "-c", command], env=front.env, timeout=30)
        assert check.returncode == 0

        # TLS for the public name, and Django knows the request was HTTPS (no redirect loop).
        page = get(f"{front.url}/methodology/", verify=front.ssl_context())
        assert page.status_code == 200
        assert page.headers["Strict-Transport-Security"].startswith("max-age=31536000")
        # Plain HTTP goes to HTTPS on the public name; any other name gets no TLS at all.
        plain = get(f"http://127.0.0.1:{front.http_port}/leaderboard/?a=1")
        assert plain.status_code == 301
        assert plain.headers["Location"] == f"https://{PUBLIC_NAME}/leaderboard/?a=1"
        with pytest.raises(httpx.ConnectError):
            get(f"{front.url}/healthz", host="elsewhere.example.net")

        # A body over BENCHLOOP_MAX_UPLOAD_BYTES stops at the proxy, in the API's error shape.
        limit = int(front.env["BENCHLOOP_MAX_UPLOAD_BYTES"])
        with httpx.Client(verify=front.ssl_context(), timeout=30) as client:
            too_large = client.post(
                f"{front.url}/api/v1/runs",
                content=b"{" + b" " * limit + b"}",
                headers={"Host": PUBLIC_NAME, "Content-Type": "application/json"},
                extensions={"sni_hostname": PUBLIC_NAME},
            )
        assert too_large.status_code == 413
        assert too_large.json()["error"]["code"] == "payload_too_large"
        assert str(limit) in too_large.json()["error"]["message"]


def test_behind_the_proxy_each_client_is_known_by_its_own_address(
    tmp_path, test_database_url, broker
) -> None:
    """nginx sets X-Forwarded-For to the client's address and NUM_PROXIES=1 makes Django use
    it: one client's throttle is not another's, and a forged header changes nothing. (Loopback
    has 127.0.0.0/8, so clients here can come from different addresses.)"""
    import random

    clients = [f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{n}" for n in (2, 3)]
    with (
        web(tmp_path, test_database_url, broker, THROTTLE_ANON="3/minute") as site,
        proxy(tmp_path, site.port) as front,
    ):

        def hardware(source: str, forged: str) -> int:
            transport = httpx.HTTPTransport(local_address=source, verify=front.ssl_context())
            with httpx.Client(transport=transport, timeout=30) as client:
                return client.get(
                    f"{front.url}/api/v1/hardware",
                    headers={"Host": PUBLIC_NAME, "X-Forwarded-For": forged},
                    extensions={"sni_hostname": PUBLIC_NAME},
                ).status_code

        first, second = clients
        answers = [hardware(first, f"10.0.0.{n}") for n in range(4)]  # a new forgery each time
        assert answers == [200, 200, 200, 429]
        assert hardware(second, first) == 200
