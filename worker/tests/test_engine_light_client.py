"""A light client: the background samplers' real rates, the process table they read, and the
stream reader on a real llama.cpp stream (whole, and replayed cut at any byte)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import psutil
import pytest

from worker.engine.contention import (
    ContentionMonitor,
    _linux_table,
    _psutil_table,
    process_table,
    with_descendants,
)
from worker.engine.power import HOST_INTERVAL_S, INTERVAL_S, PowerMonitor
from worker.engine.providers import ChatRequest, OpenAIProvider
from worker.engine.testing.nvml_trace import nvml_present
from worker.engine.transport import Transport, timed_lines

# Busy for a moment, says so, then only sleeps: its CPU seconds stop growing once it has said so.
SLEEPER = "import time\nsum(range(3_000_000))\nprint('ready', flush=True)\ntime.sleep(60)\n"


@pytest.fixture
def server_like():
    """A real process standing in for a local server: it used some CPU and holds some RAM."""
    process = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    assert process.stdout and process.stdout.readline() == "ready\n"
    try:
        yield process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


def _wakeups(thread: threading.Thread | None) -> int:
    """The times the kernel put this thread to sleep (voluntary context switches)."""
    assert thread is not None and thread.native_id is not None
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    found = re.search(r"voluntary_ctxt_switches:\s+(\d+)", status)
    assert found
    return int(found.group(1))


@pytest.mark.skipif(nvml_present(), reason="this machine has a working NVML")
def test_without_a_gpu_the_samplers_wake_at_most_once_a_second(server_like):
    readings: list[float] = []

    def clock() -> float:
        readings.append(time.perf_counter())
        return readings[-1]

    listed: list[float] = []

    def server() -> set[int]:
        listed.append(time.perf_counter())
        return {server_like.pid}

    power = PowerMonitor(expected_devices=0, server_pids=server, clock=clock).start()
    contention = ContentionMonitor(server_pids=server).start()
    assert power.interval == HOST_INTERVAL_S == 1.0
    threads = (power._thread, contention._thread)
    before = [_wakeups(t) for t in threads]
    start = time.perf_counter()
    time.sleep(4.5)
    end = time.perf_counter()
    after = [_wakeups(t) for t in threads]
    hosts = [s["t"] for s in contention.host_snapshots]
    power.stop()
    contention.stop()
    seconds = end - start
    power_samples = [t for t in readings if start <= t <= end]
    host_samples = [t for t in hosts if start <= t <= end]
    # 10 Hz before: 45 power samples in this window. Now once a second, and the contention
    # sampler every 2 s. Each thread sleeps once a sample, and a sample may also wait once for
    # the GIL (another voluntary switch: in CI a busy xdist worker gave the contention thread 5
    # over 4.5 s), so the bound is twice the samples' pace, still far below 10 Hz's 45.
    assert 3 <= len(power_samples) <= seconds / HOST_INTERVAL_S + 1
    assert 1 <= len(host_samples) <= seconds / 2.0 + 1
    assert after[0] - before[0] <= 2 * (seconds / HOST_INTERVAL_S + 1)
    assert after[1] - before[1] <= 2 * (seconds / 2.0 + 1)
    # The server's pids are listed every 2 s at most by the RAM sampler, and now and then by the
    # contention sampler (its children come from the table it already read).
    assert len([t for t in listed if start <= t <= end]) <= seconds / 2.0 + 2
    # And the samples are still real: the server's RAM, and its CPU counted as the benchmark's.
    assert power.peak_server_rss_mib and power.peak_server_rss_mib > 1
    assert server_like.pid in contention.known
    block = power.block()
    assert block["interval_s"] == 1.0 and block["energy_method"] is None


class _Board:
    """A one-GPU NVML stand-in that answers power and memory (the GPU path's own calls)."""

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        pass

    def nvmlShutdown(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:  # noqa: N802
        return 250_000

    def nvmlDeviceGetMemoryInfo(self, handle: int):  # noqa: N802
        return SimpleNamespace(used=4 * 1024**3)


def test_with_a_gpu_power_keeps_its_rate_and_ram_stays_at_once_a_second(server_like):
    rss_reads: list[float] = []
    monitor = PowerMonitor(expected_devices=1, server_pids=lambda: {server_like.pid}, nvml=_Board())
    original = monitor._server_rss_mib

    def counted(now: float) -> float | None:
        rss_reads.append(now)
        return original(now)

    monitor._server_rss_mib = counted  # type: ignore[method-assign]
    monitor.start()
    assert monitor.interval == INTERVAL_S == 0.1
    time.sleep(1.6)
    monitor.stop()
    span = monitor.samples[-1].t - monitor.samples[0].t
    # NVML's 100 ms: the recorded traces' rate, which the energy windows are checked against.
    assert len(monitor.samples) >= 0.5 * span / INTERVAL_S
    assert len(rss_reads) <= span / HOST_INTERVAL_S + 1
    assert monitor.peak_server_rss_mib and monitor.peak_server_rss_mib > 1


def test_the_process_table_reads_what_psutil_reads(server_like):
    # A grandchild too: sh is our child, its sleep is not.
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not psutil.Process(shell.pid).children():
            time.sleep(0.05)
        (grandchild,) = psutil.Process(shell.pid).children()
        table = process_table()
        other = _psutil_table()
    finally:
        shell.kill()
        shell.wait()
    name, parent, seconds, _children = table[server_like.pid]
    process = psutil.Process(server_like.pid)
    assert name == process.name() == other[server_like.pid][0]
    assert parent == os.getpid() == other[server_like.pid][1]
    times = process.cpu_times()
    assert seconds > 0.02
    assert seconds == pytest.approx(times.user + times.system, abs=0.02)
    assert seconds == pytest.approx(other[server_like.pid][2], abs=0.02)
    ours = with_descendants({os.getpid()}, table)
    assert {server_like.pid, shell.pid, grandchild.pid} <= ours
    assert 1 not in ours and with_descendants({12_345_678}, table) == {12_345_678}
    assert _linux_table()[os.getpid()][1] == os.getppid()


# --- the stream reader ------------------------------------------------------------------------


class _Replay(httpx.SyncByteStream):
    """A recorded body, delivered ``size`` bytes a read."""

    def __init__(self, body: bytes, size: int):
        self.body, self.size = body, size

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self.body), self.size):
            yield self.body[start : start + self.size]


def _replaying(url: str, body: bytes, size: int) -> Transport:
    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Replay(body, size))

    transport = Transport(url)
    transport.client = httpx.Client(base_url=url, transport=httpx.MockTransport(answer))
    return transport


def test_lines_cut_between_reads_come_out_whole_with_the_read_that_completed_them():
    body = b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\n\n: keep-alive\n\ndata: [DONE]'
    for size in (1, 2, 5, 7, 64):
        response = httpx.Response(200, stream=_Replay(body, size))
        lines = [line for _, line in timed_lines(response)]
        assert lines == body.split(b"\n")
    stamps = [t for t, _ in timed_lines(httpx.Response(200, stream=_Replay(body, 64)))]
    assert len(set(stamps[:-1])) == 1  # one read, one clock reading, for all its lines


@pytest.mark.llm
def test_a_real_stream_gives_every_token_a_chunk_time_and_reads_the_same_cut_anywhere(
    llm_url, llm_model
):
    request = ChatRequest(
        messages=[{"role": "user", "content": "Describe a harbour at dawn."}],
        max_tokens=40,
        ignore_eos=True,
        seed=11,
    )
    body = httpx.post(
        f"{llm_url}/v1/chat/completions",
        json={
            "model": llm_model,
            "messages": request.messages,
            "max_tokens": 40,
            "ignore_eos": True,
            "temperature": 0.0,
            "seed": 11,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        timeout=120,
    ).content
    with Transport(llm_url, timeout=120) as transport:
        live = OpenAIProvider(transport, llm_model, supports_ignore_eos=True).chat_stream(request)
    timing = live.timing
    assert timing is not None and live.server is not None
    # llama.cpp sends one token an event: every generated token has its own arrival time.
    assert len(timing.token_chunk_ms) == live.completion_tokens == live.server.predicted_n == 40
    assert timing.token_chunk_ms == sorted(timing.token_chunk_ms)
    assert timing.first_token_ms == timing.token_chunk_ms[0]
    assert timing.last_token_ms == timing.token_chunk_ms[-1]
    assert timing.headers_ms is not None and timing.written_ms is not None
    assert 0 < timing.headers_ms <= timing.first_token_ms <= timing.last_token_ms
    assert timing.last_token_ms <= timing.done_ms
    # Events: the tokens, plus the finish and usage events (llama.cpp also opens with a role one).
    assert 40 < timing.event_count <= 43
    assert timing.answer_events + timing.reasoning_events == 40
    assert live.finish_reason == "length" and live.content
    # The recorded body of the same greedy request, read 1, 3 or 4096 bytes at a time.
    for size in (1, 3, 4096):
        with _replaying(llm_url, body, size) as transport:
            replayed = OpenAIProvider(transport, llm_model).chat_stream(request)
        assert replayed.content == live.content
        assert replayed.completion_tokens == replayed.server.predicted_n == 40
        assert len(replayed.timing.token_chunk_ms) == 40
        assert replayed.timing.event_count == timing.event_count
        assert replayed.finish_reason == "length"
