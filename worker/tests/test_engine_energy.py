"""Energy per token from GPU board power, and "not measured" whenever the trace cannot carry it.

NVML is not on this machine, so the monitor reads a power trace through a stand-in NVML module.
The trace (data/nvml/two-4090-decode.json) has the shape two GPUs draw under llama.cpp: idle,
a prefill burst, a jittery decode plateau, idle again, at NVML's 100 ms sampling; it is shaped
after such runs, not recorded from one (no GPU was lent to record it)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from worker.engine.power import METHOD, Energy, PowerMonitor, PowerSample, integrate, per_token

TRACE = json.loads((Path(__file__).parent / "data/nvml/two-4090-decode.json").read_text())


def _samples(rows=TRACE["samples"]) -> list[PowerSample]:
    return [PowerSample(r["t"], tuple(r["watts"])) for r in rows]


def _by_hand(rows, start: float, end: float) -> float:
    """The trapezoid rule written out: samples 100 ms apart, both devices, whole steps only."""
    inside = [r for r in rows if start - 1e-9 <= r["t"] <= end + 1e-9]
    total = 0.0
    for device in (0, 1):
        w = [r["watts"][device] for r in inside]
        total += 0.1 * (w[0] / 2 + sum(w[1:-1]) + w[-1] / 2)
    return total


def test_the_decode_windows_joules_match_a_hand_calculation() -> None:
    energy = integrate(_samples(), 1.5, 5.5, devices=2)
    assert energy.measured
    assert energy.joules == pytest.approx(_by_hand(TRACE["samples"], 1.5, 5.5), rel=1e-9)
    # About 2 × 262 W for 4 s, give or take the jitter.
    assert 2000 < energy.joules < 2200
    assert per_token(energy, 400) == pytest.approx(energy.joules / 400)


def test_a_window_between_samples_is_cut_from_the_line_through_them() -> None:
    # A linear ramp: the trapezoid is exact, so 0 → 300 W over [0.25 s, 0.75 s] is 75 J.
    ramp = [PowerSample(t / 10, (300.0 * t / 10,)) for t in range(11)]
    assert integrate(ramp, 0.25, 0.75, devices=1).joules == pytest.approx(75.0)


def test_a_gap_in_the_trace_reports_nothing_rather_than_a_straight_line() -> None:
    rows = [r for r in TRACE["samples"] if not 2.0 < r["t"] < 2.8]
    energy = integrate(_samples(rows), 1.5, 5.5, devices=2)
    assert energy == Energy(None, "a 0.80 s gap between power samples (over 0.5 s)")
    # Outside the gap the same trace still measures.
    assert integrate(_samples(rows), 3.0, 5.0, devices=2).measured


def test_a_device_that_stops_answering_or_is_missing_reports_nothing() -> None:
    rows = [dict(r) for r in TRACE["samples"]]
    rows[30] = {**rows[30], "watts": [rows[30]["watts"][0], None]}
    assert integrate(_samples(rows), 2.5, 3.5, devices=2).reason == "1 of 2 GPUs reported power"
    one_gpu = [{**r, "watts": r["watts"][:1]} for r in TRACE["samples"]]
    assert integrate(_samples(one_gpu), 2.5, 3.5, devices=2).reason == (
        "1 of 2 GPUs reported power"
    )
    assert integrate(_samples(), 2.5, 3.5, devices=0).reason == "no GPU to measure"


def test_a_window_the_trace_does_not_cover_reports_nothing() -> None:
    assert not integrate(_samples(), 6.0, 9.0, devices=2).measured
    assert per_token(integrate(_samples(), 6.0, 9.0, devices=2), 100) is None


class _TraceNvml:
    """NVML's calls, answered from the trace as the monitor's clock moves through it."""

    def __init__(self, rows, clock) -> None:
        self.rows, self.clock = rows, clock

    def _row(self):
        return min(self.rows, key=lambda r: abs(r["t"] - self.clock()))

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.rows[0]["watts"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self._row()["watts"][handle] * 1000)  # milliwatts, as NVML answers

    def nvmlDeviceGetMemoryInfo(self, handle: int):
        return SimpleNamespace(used=int(self._row()["vram_mib"][handle] * 1024**2))


def test_the_monitor_samples_power_peak_vram_and_idle_power_through_nvml() -> None:
    now = [0.0]
    monitor = PowerMonitor(
        expected_devices=2, nvml=_TraceNvml(TRACE["samples"], lambda: now[0]), clock=lambda: now[0]
    )
    monitor._open()
    for row in TRACE["samples"]:
        now[0] = row["t"]
        monitor.sample()
    monitor.idle_watts = sum(monitor.samples[0].watts)
    energy = monitor.energy(1.5, 5.5)
    assert energy.joules == pytest.approx(_by_hand(TRACE["samples"], 1.5, 5.5), rel=1e-6)
    block = monitor.block()
    assert block["energy_method"] == METHOD and block["gpu_devices_seen"] == 2
    assert block["peak_vram_mib"] == {"0": 15660.0, "1": 14848.0}
    assert block["idle_watts"] == pytest.approx(60.5)


def test_without_nvml_nothing_is_measured_and_the_block_says_why() -> None:
    class Broken:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    monitor = PowerMonitor(expected_devices=1, nvml=Broken()).start()
    monitor.stop()
    assert monitor.energy(0.0, 1.0).reason.startswith("not measured: NVML is not available")
    block = monitor.block()
    assert (
        block["energy_method"] is None and "NVML Shared Library Not Found" in block["energy_note"]
    )
    assert block["gpu_devices_seen"] == 0 and block["peak_vram_mib"] == {}


def test_the_servers_host_ram_is_sampled_when_it_runs_here() -> None:
    import os

    monitor = PowerMonitor(expected_devices=0, server_pids=lambda: {os.getpid()}, nvml=object())
    monitor.sample()
    assert monitor.peak_server_rss_mib and monitor.peak_server_rss_mib > 10
