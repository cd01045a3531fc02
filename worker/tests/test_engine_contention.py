"""Contention: the host's real load (psutil), NVML really absent here, and NVML traces replayed.

This machine has no NVIDIA GPU, so the GPU path runs on NvmlTrace (a replay of NVML's answers
in pynvml's objects); the host path runs on the real machine, with a real CPU burner.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.engine.contention import (
    ContentionMonitor,
    NvmlProbe,
    gpu_block,
    host_block,
)
from worker.engine.testing.nvml_trace import NvmlTrace, nvml_present

# Process ids above Linux's largest pid_max, so no real process answers for them.
SERVER, TRAINER, DESKTOP = 5_000_001, 5_000_002, 5_000_003
NAMES = {str(SERVER): "llama-server", str(TRAINER): "python-train", str(DESKTOP): "Xorg"}
GIB = 1024**3


def _trace(*samples: list[dict]) -> NvmlTrace:
    return NvmlTrace(
        {
            "devices": [{"name": "NVIDIA GeForce RTX 4090"}],
            "samples": [[sample] for sample in samples],
            "process_names": NAMES,
        }
    )


def _probe_samples(trace: NvmlTrace, count: int) -> list[dict]:
    probe = NvmlProbe(trace)
    assert probe.available and probe.note == ""
    samples = [probe.snapshot() for _ in range(count)]
    probe.close()
    assert (trace.initialised, trace.shut_down) == (1, 1)
    return samples


@pytest.mark.skipif(nvml_present(), reason="this machine has a working NVML")
def test_without_nvml_the_gpu_part_is_unknown_and_the_run_is_never_clear():
    probe = NvmlProbe()
    assert not probe.available and probe.note.startswith("NVML not available")
    monitor = ContentionMonitor(gpu=probe, interval=0.2).start()
    time.sleep(0.5)
    block = monitor.stop()
    assert block["gpu"] == {"status": "unknown", "source": "none", "note": probe.note}
    assert block["status"] in ("unknown", "contended")  # contended only for the host's sake
    assert block["host"]["status"] in ("clear", "contended")
    assert block["host"]["intervals"] >= 2
    assert block["host"]["cpu_count"] == os.cpu_count()


def test_a_trace_with_only_the_server_on_the_gpu_is_clear():
    samples = _probe_samples(
        _trace({"compute": [{"pid": SERVER, "used_bytes": 6 * GIB}], "utilization": 97}), 3
    )
    block = gpu_block(samples, {SERVER}, server_known=True)
    assert block["status"] == "clear" and block["reasons"] == []
    assert (block["utilization_pct_mean"], block["utilization_pct_max"]) == (97.0, 97.0)


def test_another_compute_process_in_any_sample_makes_the_gpu_contended():
    samples = _probe_samples(
        _trace(
            {"compute": [{"pid": SERVER, "used_bytes": 6 * GIB}], "utilization": 60},
            {
                "compute": [
                    {"pid": SERVER, "used_bytes": 6 * GIB},
                    {"pid": TRAINER, "used_bytes": 10 * GIB},
                ],
                "graphics": [{"pid": DESKTOP, "used_bytes": 200 * 1024**2}],
                "utilization": 100,
            },
            {"compute": [{"pid": SERVER, "used_bytes": 6 * GIB}], "utilization": 60},
        ),
        3,
    )
    block = gpu_block(samples, {SERVER}, server_known=True)
    assert block["status"] == "contended"
    assert block["other_processes"] == [
        {"gpu": 0, "name": "python-train", "type": "compute", "used_mib_max": 10240, "samples": 1}
    ]  # a 200 MiB desktop compositor is not contention
    assert block["samples_contended"] == 1
    assert block["reasons"] == ["1 other GPU process(es) during the run: python-train"]


def test_with_the_server_unidentified_one_unknown_process_is_taken_to_be_it():
    one = _probe_samples(_trace({"compute": [{"pid": SERVER, "used_bytes": GIB}]}), 1)
    assert gpu_block(one, set(), server_known=False)["status"] == "clear"
    two = _probe_samples(
        _trace({"compute": [{"pid": SERVER, "used_bytes": GIB}, {"pid": TRAINER}]}), 1
    )
    block = gpu_block(two, set(), server_known=False)
    assert block["status"] == "contended" and len(block["other_processes"]) == 1
    heavy_desktop = _probe_samples(
        _trace({"graphics": [{"pid": DESKTOP, "used_bytes": 2 * GIB}]}), 1
    )
    assert gpu_block(heavy_desktop, set(), server_known=True)["status"] == "contended"


def test_the_monitor_puts_host_and_trace_together_into_one_block():
    trace = _trace({"compute": [{"pid": SERVER}, {"pid": TRAINER, "used_bytes": GIB}]})
    monitor = ContentionMonitor(server_pids=lambda: {SERVER}, gpu=NvmlProbe(trace), interval=0.1)
    monitor.start()
    time.sleep(0.35)
    block = monitor.stop()
    assert block["gpu"]["status"] == "contended" and block["gpu"]["source"] == "nvml"
    assert block["status"] == "contended"
    assert "python-train" in " ".join(block["reasons"])
    assert block["gpu"]["samples"] == block["host"]["intervals"] + 1


def test_a_recorded_host_trace_is_judged_by_the_stated_limits():
    def snap(t: float, busy: float, own: float) -> dict:
        # A 4-CPU machine: 4 CPU-seconds of capacity per wall second.
        return {
            "t": t, "busy_s": busy, "total_s": 4 * t, "own_s": own, "cpus": 4,
            "load": [1.0, 1.0, 1.0], "others": {},
        }  # fmt: skip

    # The benchmark keeps 2 of 4 CPUs busy, others 0.08 of a CPU: 2% of the machine.
    calm = [snap(t, 2.08 * t, 2.0 * t) for t in range(0, 11)]
    block = host_block(calm)
    assert block["status"] == "clear" and block["reasons"] == []
    assert block["other_cpu_share_mean"] == 0.02 and block["cpu_busy_share_mean"] == 0.52
    # Others take 1.2 CPUs (30%) in the last two of ten intervals: 7.6% on average, but the
    # 90th percentile is 30%, over the 25% limit.
    spiky = calm[:9] + [snap(t, 2.08 * 8 + 3.2 * (t - 8), 2.0 * t) for t in (9, 10)]
    spiky_block = host_block(spiky)
    assert spiky_block["other_cpu_share_mean"] == 0.076
    assert spiky_block["other_cpu_share_p90"] == 0.3
    assert spiky_block["status"] == "contended"
    busy = [snap(t, 2.6 * t, 2.0 * t) for t in range(0, 4)]  # others 15% throughout
    assert host_block(busy)["reasons"] == ["other processes used 15% of the CPUs on average"]
    assert host_block(calm[:1])["status"] == "unknown"


@pytest.fixture
def burner():
    """A real CPU-bound process named bl-burner (its comm name, via prctl), started through a
    shell that exits at once, so it is not this process's child (children are the benchmark's
    own, like the code sandbox's)."""
    code = (
        "import ctypes\nctypes.CDLL(None).prctl(15, b'bl-burner', 0, 0, 0)\nwhile True:\n    pass\n"
    )
    started = subprocess.run(
        ["sh", "-c", 'setsid "$0" -c "$1" >/dev/null 2>&1 & echo $!', sys.executable, code],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(started.stdout.strip())
    comm = Path(f"/proc/{pid}/comm")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and comm.read_text().strip() != "bl-burner":
        time.sleep(0.05)  # psutil caches a name once read: wait until the rename is done
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_real_cpu_burner_is_other_load_unless_it_is_the_server(burner):
    outside = ContentionMonitor(interval=0.5).start()
    time.sleep(2.2)
    block = outside.stop()["host"]
    names = {p["name"]: p["cpu_share_mean"] for p in block["top_other_processes"]}
    # One busy thread, on CPUs this machine shares with other work: at least a part of one.
    assert names.get("bl-burner", 0) >= 0.02, block
    as_server = ContentionMonitor(server_pids=lambda: {burner}, interval=0.5).start()
    time.sleep(2.2)
    served = as_server.stop()["host"]
    assert "bl-burner" not in {p["name"] for p in served["top_other_processes"]}
