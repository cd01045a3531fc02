"""Shared pieces of the HTTP load benchmarks: a production-like gunicorn, a closed-loop load
generator, percentiles and the machine's load average.

The server runs with DEBUG off (no per-query logging), persistent database connections and
Redis for the broker and the cache, as docker-compose runs it. Only the port, the database and
the throttle rates differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
REDIS_DB = 12
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the benchmarks also set up Django in-process


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} {five:.1f} {fifteen:.1f}"


def server_env(db: str, **extra: str) -> dict[str, str]:
    """The environment of a production-like site on database `db` (secrets are throwaway)."""
    static_root = Path(tempfile.gettempdir()) / "benchloop-bench-static"
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{db}",
        "DATABASE_CONN_MAX_AGE": "600",
        "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "API_KEY_PEPPER": "bench-pepper",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "False",
        "SITE_URL": "http://127.0.0.1",
        "STATIC_ROOT": str(static_root),
        "BENCHLOOP_DEMO_BANNER": "False",
        "LOG_LEVEL": "WARNING",
        **extra,
    }


def manage(env: dict[str, str], *args: str, capture: bool = False) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=capture,
        text=True,
    )
    return done.stdout if capture else ""


def fresh_database(db: str) -> None:
    subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-qc",
            f"DROP DATABASE IF EXISTS {db}",
            "-c",
            f"CREATE DATABASE {db}",
        ],
        check=True,
        capture_output=True,
    )


def flush_redis() -> None:
    subprocess.run(["redis-cli", "-n", str(REDIS_DB), "flushdb"], check=True, capture_output=True)


class Gunicorn:
    """gunicorn with `workers` sync workers on 127.0.0.1:port; stopped on exit."""

    def __init__(self, env: dict[str, str], port: int, workers: int) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        # Request warnings (every refused upload logs one) go here, not to the report.
        self.log_path = Path(tempfile.gettempdir()) / f"benchloop-gunicorn-{port}.log"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "benchloop_site.wsgi:application",
                "-b",
                f"127.0.0.1:{port}",
                "-w",
                str(workers),
                "--backlog",
                "2048",
                "--timeout",
                "120",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log_path, "w"),  # noqa: SIM115 (closed with the process)
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit("gunicorn exited during start-up")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit("gunicorn did not answer /healthz")

    def workers(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()

    def worker_rss_mib(self) -> list[float]:
        return [w.memory_info().rss / 2**20 for w in self.workers()]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def __enter__(self) -> Gunicorn:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class RssSampler:
    """Samples the web workers' resident memory every `interval` s; keeps the peak per worker."""

    def __init__(self, server: Gunicorn, interval: float = 0.25) -> None:
        self.server = server
        self.interval = interval
        self.peak: dict[int, float] = {}
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            for worker in self.server.workers():
                try:
                    rss = worker.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self.peak[worker.pid] = max(self.peak.get(worker.pid, 0.0), rss)
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class CpuMeter:
    """CPU seconds used between start() and stop() by the web server, Postgres, Redis and this
    process (the load generator): where a benchmark's two cores went.

    Processes that start or end in between are counted for the part of their life it saw, so
    the meter is taken on a warm server with persistent database connections.
    """

    GROUPS = ("web", "postgres", "redis", "load generator")

    def __init__(self, server: Gunicorn) -> None:
        self.server = server
        self._before: dict[tuple[str, int], float] = {}
        self.used: dict[str, float] = {}

    def _snapshot(self) -> dict[tuple[str, int], float]:
        web = [psutil.Process(self.server.process.pid), *self.server.workers()]
        groups = [("web", p) for p in web] + [("load generator", psutil.Process())]
        for process in psutil.process_iter(["name"]):
            if process.info["name"] in ("postgres", "redis-server"):
                groups.append(
                    ("redis" if process.info["name"] == "redis-server" else "postgres", process)
                )
        taken = {}
        for group, process in groups:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                taken[(group, process.pid)] = times.user + times.system
        return taken

    def start(self) -> None:
        self._before = self._snapshot()

    def stop(self) -> dict[str, float]:
        after = self._snapshot()
        self.used = dict.fromkeys(self.GROUPS, 0.0)
        for (group, pid), seconds in after.items():
            self.used[group] += seconds - self._before.get((group, pid), 0.0)
        return self.used


@dataclass
class Sample:
    """One request: what was sent (an index into the caller's plan) and what came back."""

    index: int
    status: int
    seconds: float
    body: bytes = b""


@dataclass
class LoadResult:
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0

    def latencies_ms(self, statuses: tuple[int, ...] | None = None) -> list[float]:
        return [s.seconds * 1000 for s in self.samples if statuses is None or s.status in statuses]


async def fetch(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, bytes]:
    """One HTTP/1.1 request on a new connection, read to the end: (status, body).

    A few lines of asyncio instead of an HTTP library: on a 2-core machine the load generator
    shares the CPU with the server, and httpx spends about ten times as much per request.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
    raw = await reader.read()
    writer.close()
    head, _, content = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        content = _unchunk(content)
    return status, content


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)


async def closed_loop(
    port: int,
    queues: list[list[tuple[int, str, str, bytes | None, dict[str, str]]]],
    *,
    keep_body: bool = False,
) -> LoadResult:
    """Each queue is one client sending its requests one after another (index, method, path,
    body, headers); all clients run at once. Latency is from connect to the last byte."""
    result = LoadResult()

    async def run_client(queue) -> None:
        for index, method, path, body, headers in queue:
            started = time.perf_counter()
            status, content = await fetch(port, method, path, body, headers)
            elapsed = time.perf_counter() - started
            result.samples.append(Sample(index, status, elapsed, content if keep_body else b""))

    started = time.perf_counter()
    await asyncio.gather(*(run_client(q) for q in queues))
    result.wall_s = time.perf_counter() - started
    return result


async def timed_loop(
    port: int, path: str, *, connections: int, seconds: float, warmup: float = 1.0
) -> LoadResult:
    """`connections` clients GET `path` back to back for `seconds` (after `warmup` seconds
    whose answers are not counted); every answer must be 200."""
    result = LoadResult()
    measure_from = time.perf_counter() + warmup
    stop_at = measure_from + seconds

    async def run_client() -> None:
        while (started := time.perf_counter()) < stop_at:
            status, _ = await fetch(port, "GET", path)
            if status != 200:
                raise SystemExit(f"{path}: HTTP {status}")
            if started >= measure_from:
                result.samples.append(Sample(0, 200, time.perf_counter() - started))

    await asyncio.gather(*(run_client() for _ in range(connections)))
    result.wall_s = seconds
    return result
