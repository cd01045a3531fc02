"""Slowloris drill: do other clients still get /healthz while slow clients hold connections?

Half of the slow clients send their request headers one line per `--interval` and never finish
them (classic slowloris); the other half send complete headers for a form POST that Django
must read (a CSRF-checked sign-in with a self-made csrftoken cookie, so no database row is
needed) and then drip its body one byte per interval. A slow client the server drops
reconnects at once, as an attacker would. Meanwhile `--good` clients fetch /healthz in a loop,
each on a new connection, and every answer's latency is kept.

Topologies it can start itself (`--start`), each with production settings (DEBUG off):
- `sync`: gunicorn with 2 sync workers, the embedded default's server before this drill;
- `embedded`: the server line of scripts/serve.sh (waitress, benchloop_site/server.py), on the
  embedded defaults (SQLite and the filesystem broker in a temporary folder);
- `compose`: docker-compose's proxy (nginx with docker/nginx.conf.template, over TLS) in front
  of the `web` service's command and environment, on the Postgres and Redis named by
  DATABASE_URL and CELERY_BROKER_URL (no Docker engine: the same programs on loopback, see
  leaderboard/tests/compose_topology.py);
- `compose-web`: the `web` command alone, as if its port faced the clients.
Or point it at any running site with `--url`.

Usage: .venv/bin/python bench/slowloris.py --start embedded [--slow 50] [--hold 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shlex
import signal
import ssl
import string
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
for _folder in (REPO, REPO / "bench"):  # also loaded by path from leaderboard/tests
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
import loadlib  # noqa: E402

from leaderboard.tests import compose_topology as topo  # noqa: E402

SLOW_BODY_PATH = "/account/login/"
SLOW_BODY_LENGTH = 100_000
GOOD_TIMEOUT = 10.0


@dataclass
class Drill:
    """What one drill saw: the good clients' latencies (seconds) and the slow clients' fate."""

    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    slow_connected: int = 0
    slow_dropped: int = 0  # connections the server closed on a slow client
    slow_refused: int = 0  # connection attempts that failed outright
    seconds: float = 0.0

    def percentile(self, fraction: float) -> float:
        return loadlib.percentile(self.latencies, fraction)

    def summary(self) -> dict:
        return {
            "good_requests": len(self.latencies),
            "good_failures": len(self.failures),
            "median_ms": round(self.percentile(0.5) * 1000, 1),
            "p99_ms": round(self.percentile(0.99) * 1000, 1),
            "max_ms": round(max(self.latencies, default=float("nan")) * 1000, 1),
            "slow_clients_connected": self.slow_connected,
            "slow_connections_dropped_by_server": self.slow_dropped,
            "slow_connections_refused": self.slow_refused,
            "seconds": round(self.seconds, 1),
            "first_failures": self.failures[:3],
        }


@dataclass
class Target:
    url: str  # where to connect, http:// or https://
    host: str  # the Host header (and TLS server name)
    cafile: str | None = None
    source: str | None = None  # a local address to connect from (loopback has 127.0.0.0/8)

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        parts = urlsplit(self.url)
        context = None
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=self.cafile)
            if not self.cafile:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        return await asyncio.open_connection(
            parts.hostname,
            parts.port or (443 if context else 80),
            ssl=context,
            server_hostname=self.host.split(":")[0] if context else None,
            local_addr=(self.source, 0) if self.source else None,
        )


async def _drip(
    target: Target, interval: float, stop: asyncio.Event, drill: Drill, head: str, drop
) -> None:
    """Hold one slow connection at a time: send `head`, then `drop(n)` every `interval`, never
    finishing; reconnect at once when the server gives up on us, as an attacker would."""
    first = True
    while not stop.is_set():
        try:
            reader, writer = await target.connect()
        except OSError:
            drill.slow_refused += 1
            await asyncio.sleep(interval)
            continue
        if first:
            drill.slow_connected += 1
            first = False
        try:
            writer.write(head.encode())
            await writer.drain()
            sent = 0
            while not stop.is_set():
                # A server that gives up on us closes the socket: reading then ends at once.
                with contextlib.suppress(TimeoutError):
                    if await asyncio.wait_for(reader.read(1024), interval) == b"":
                        raise ConnectionResetError
                sent += 1
                writer.write(drop(sent))
                await writer.drain()
        except (OSError, ssl.SSLError):
            if not stop.is_set():
                drill.slow_dropped += 1
        finally:
            # An attacker never says goodbye: abort closes the socket at once, where close()
            # would start a TLS shutdown that the drill's loop may not live to finish.
            writer.transport.abort()


async def _slow_headers(target: Target, interval: float, stop: asyncio.Event, drill: Drill) -> None:
    head = f"GET /healthz HTTP/1.1\r\nHost: {target.host}\r\n"
    await _drip(target, interval, stop, drill, head, lambda n: f"X-Slow-{n}: aaaaaaaa\r\n".encode())


async def _slow_body(target: Target, interval: float, stop: asyncio.Event, drill: Drill) -> None:
    # A csrftoken of our own making: Django accepts any well-formed secret in the cookie and
    # then reads the whole form body to compare it with the token field.
    token = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
    origin = f"{target.scheme}://{target.host}"
    head = (
        f"POST {SLOW_BODY_PATH} HTTP/1.1\r\nHost: {target.host}\r\nOrigin: {origin}\r\n"
        f"Cookie: csrftoken={token}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {SLOW_BODY_LENGTH}\r\n\r\ncsrfmiddlewaretoken={token}&username="
    )
    await _drip(target, interval, stop, drill, head, lambda _n: b"a")


async def _get_status(target: Target, path: str) -> int:
    reader, writer = await target.connect()
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {target.host}\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        status_line = await reader.readline()
        await reader.read()  # the whole answer, as a monitor would
        return int(status_line.split()[1]) if status_line else 0
    finally:
        writer.transport.abort()  # the answer is read (or given up on): nothing left to say


async def _good(target: Target, stop: asyncio.Event, drill: Drill, timeout: float) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            status = await asyncio.wait_for(_get_status(target, "/healthz"), timeout)
            problem = "" if status == 200 else f"status {status}"
        except (OSError, ssl.SSLError, TimeoutError, IndexError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        elapsed = time.monotonic() - started
        drill.latencies.append(elapsed)
        if problem:
            drill.failures.append(f"after {elapsed:.1f} s: {problem}")
        await asyncio.sleep(0.05)


async def run_drill(
    target: Target,
    *,
    slow: int = 50,
    hold: float = 20.0,
    interval: float = 1.0,
    good: int = 4,
    settle: float | None = None,
    good_timeout: float = GOOD_TIMEOUT,
    kind: str = "both",
    good_source: str | None = None,
) -> Drill:
    """Hold `slow` slow connections for `settle` + `hold` seconds; measure the good clients
    during `hold`, once every slow client has had time to connect and start dripping."""
    drill = Drill()
    stop = asyncio.Event()
    kinds = {"headers": [_slow_headers], "body": [_slow_body]}.get(kind) or [
        _slow_headers,
        _slow_body,
    ]
    slow_tasks = [
        asyncio.create_task(kinds[i % len(kinds)](target, interval, stop, drill))
        for i in range(slow)
    ]
    await asyncio.sleep(settle if settle is not None else min(2 * interval, 2.0))
    measuring = asyncio.Event()
    good_target = replace(target, source=good_source) if good_source else target
    good_tasks = [
        asyncio.create_task(_good(good_target, measuring, drill, good_timeout)) for _ in range(good)
    ]
    started = time.monotonic()
    await asyncio.sleep(hold)
    measuring.set()
    await asyncio.gather(*good_tasks)
    drill.seconds = time.monotonic() - started
    stop.set()
    for task in slow_tasks:
        task.cancel()
    await asyncio.gather(*slow_tasks, return_exceptions=True)
    await asyncio.sleep(0.2)  # transports closed above release their sockets on the next turns
    return drill


# --- starting the topologies -------------------------------------------------------------


def production_env(**extra: str) -> dict[str, str]:
    """DEBUG off with throwaway secrets, as scripts/serve.sh runs the embedded default."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "LIMITS_CACHE_URL")
    }
    env.update(
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        API_KEY_PEPPER=secrets.token_urlsafe(32),
        LOG_LEVEL="WARNING",
        BENCHLOOP_DEMO_BANNER="False",
        **extra,
    )
    return env


def embedded_env(var_dir: Path, port: int) -> dict[str, str]:
    """The embedded defaults (SQLite and the filesystem broker under `var_dir`), served plainly
    on loopback as scripts/serve.sh serves them."""
    return production_env(
        BENCHLOOP_VAR_DIR=str(var_dir),
        ALLOWED_HOSTS="127.0.0.1",
        SITE_URL=f"http://127.0.0.1:{port}",
        SECURE_SSL_REDIRECT="False",
    )


def embedded_command(port: int) -> list[str]:
    """scripts/serve.sh's server line."""
    return [sys.executable, "-m", "benchloop_site.server", "--listen", f"127.0.0.1:{port}"]


def sync_command(port: int) -> list[str]:
    """scripts/serve.sh's server before this drill: two sync workers facing the clients."""
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    return [gunicorn, "benchloop_site.wsgi:application", "--bind", f"127.0.0.1:{port}"] + [
        "--workers",
        "2",
    ]


@contextlib.contextmanager
def embedded(work: Path, command=embedded_command, static: bool = False) -> Iterator[Target]:
    """The embedded default's server (or another `command(port)`) on its defaults; `static`
    collects the static files first, which pages need with DEBUG off (/healthz does not)."""
    port = topo.free_port()
    env = embedded_env(work / "var", port)
    if static:
        env["STATIC_ROOT"] = str(work / "static")
        topo.collect_static(env)
    log = work / "server.log"
    with topo.running(command(port), env, log) as proc:
        url = f"http://127.0.0.1:{port}"
        topo.wait_for(f"{url}/healthz", proc, log, host=f"127.0.0.1:{port}")
        yield Target(url, f"127.0.0.1:{port}")


@contextlib.contextmanager
def topology(name: str, work: Path, server: str = "", static: bool = False) -> Iterator[Target]:
    """Start the named topology (see the module docstring) and yield where to reach it;
    `server` is another command for `embedded`, with {port} (and {python}) to fill in."""
    if name == "embedded":
        command = embedded_command
        if server:

            def command(port: int) -> list[str]:
                return shlex.split(server.format(port=port, python=sys.executable))

        with embedded(work, command, static) as target:
            yield target
        return
    if name == "sync":
        with embedded(work, sync_command, static) as target:
            yield target
        return
    database = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    broker = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
    with topo.web(work, database, broker) as site:
        if name == "compose-web":
            # Straight to gunicorn, as clients would be if its port were published.
            yield Target(f"http://127.0.0.1:{site.port}", topo.PUBLIC_NAME)
            return
        with topo.proxy(work, site.port) as front:
            yield Target(front.url, topo.PUBLIC_NAME, cafile=str(front.certificate))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--start", choices=["sync", "embedded", "compose", "compose-web"])
    where.add_argument("--url", help="a running site, e.g. http://127.0.0.1:8000")
    parser.add_argument("--host", help="Host header (default: the URL's host)")
    parser.add_argument("--slow", type=int, default=50, help="slow clients [50]")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds measured [20]")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between drips [1]")
    parser.add_argument("--good", type=int, default=4, help="clients fetching /healthz [4]")
    parser.add_argument("--kind", choices=["both", "headers", "body"], default="both")
    parser.add_argument(
        "--good-from",
        help="a local address for the good clients, e.g. 127.0.0.2 (the slow "
        "ones use 127.0.0.1): per-address limits then tell them apart",
    )
    parser.add_argument(
        "--server",
        default="",
        help="with --start embedded: another server command, {port} filled in, e.g. "
        "'{python} -m gunicorn benchloop_site.wsgi -k gthread --threads 8 --bind 127.0.0.1:{port}'",
    )
    parser.add_argument(
        "--serve", action="store_true", help="only start the topology and wait (for wrk & co.)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # Stopped with SIGTERM too, it still stops what it started (they run in their own sessions).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with (
        tempfile.TemporaryDirectory(prefix="benchloop-slowloris-") as work,
        contextlib.ExitStack() as stack,
    ):
        if args.start:
            where = topology(args.start, Path(work), args.server, static=args.serve)
            target = stack.enter_context(where)
        else:
            target = Target(args.url, args.host or urlsplit(args.url).netloc)
        if args.serve:
            print(f"serving at {target.url} (Host: {target.host}); Ctrl-C stops", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
            return 0
        options = dict(slow=args.slow, hold=args.hold, interval=args.interval, good=args.good)
        options.update(kind=args.kind, good_source=args.good_from)
        drill = asyncio.run(run_drill(target, **options))
    result = {"topology": args.start or args.url, "slow": args.slow, **drill.summary()}
    result["load_average"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key:>36}: {value}")
    return 0 if not drill.failures and drill.percentile(0.99) < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
