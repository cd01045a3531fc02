"""The slowloris drill of bench/slowloris.py in CI: fifty slow clients (half dripping request
headers, half dripping a form body) hold their connections while four others keep fetching
/healthz, each answer in under a second. The hold is short here; bench/README.md has the
twenty-second figures."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import sys
from pathlib import Path

import pytest

from leaderboard.tests.compose_topology import PUBLIC_NAME, proxy, web

pytestmark = pytest.mark.drill
REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("slowloris", REPO / "bench" / "slowloris.py")
slowloris = importlib.util.module_from_spec(_spec)
sys.modules["slowloris"] = slowloris  # its dataclasses look their module up there
_spec.loader.exec_module(slowloris)

SLOW_CLIENTS = 50


def _drill(target, **options):
    drill = asyncio.run(
        slowloris.run_drill(
            target, slow=SLOW_CLIENTS, hold=3.0, interval=0.5, good=4, settle=1.5, **options
        )
    )
    # A socket the drill left open would warn when collected, in whatever test runs then:
    # collect here, so such a leak fails this test (warnings are errors) and no other.
    gc.collect()
    return drill


def _assert_unharmed(drill) -> None:
    assert drill.slow_connected == SLOW_CLIENTS
    assert not drill.failures, drill.summary()
    assert len(drill.latencies) >= 12, drill.summary()
    # A 3 s hold gives under a hundred answers, so its "p99" is the single slowest one, which a
    # busy CI machine (the other xdist worker) can push past a second once. The CI drill holds
    # 95% of answers under a second and every one under two; bench/README.md has the 20 s
    # drill's p99. A site the slow clients take down still fails both (the sync-worker test).
    assert drill.percentile(0.95) < 1.0, drill.summary()
    assert max(drill.latencies) < 2.0, drill.summary()


def test_slow_clients_cannot_take_the_compose_topology_down(
    tmp_path, test_database_url, broker
) -> None:
    """nginx (the mounted template) in front of the `web` command, over TLS."""
    with web(tmp_path, test_database_url, broker) as site, proxy(tmp_path, site.port) as front:
        target = slowloris.Target(front.url, PUBLIC_NAME, cafile=str(front.certificate))
        _assert_unharmed(_drill(target))


def test_slow_clients_cannot_take_the_embedded_server_down(tmp_path) -> None:
    """scripts/serve.sh's server on the embedded defaults (SQLite, filesystem broker)."""
    assert "python -m benchloop_site.server" in (REPO / "scripts" / "serve.sh").read_text()
    with slowloris.embedded(tmp_path) as target:
        _assert_unharmed(_drill(target))


def test_the_drill_takes_down_what_it_should(tmp_path) -> None:
    """The server serve.sh had before, two sync gunicorn workers, fails the same drill: the
    drill is not one that any server passes."""
    with slowloris.embedded(tmp_path, slowloris.sync_command) as target:
        drill = _drill(target, good_timeout=2.0)
    assert drill.slow_connected == SLOW_CLIENTS
    assert drill.failures and all("TimeoutError" in failure for failure in drill.failures)
