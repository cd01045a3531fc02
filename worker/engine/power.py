"""Energy and memory during a run: GPU board power and memory (NVML), the server's host RAM.

A sampler thread reads every device's board power (milliwatts) and memory in use every
``interval`` seconds, and the resident memory of the server's processes when the server runs
on this machine. Energy is the integral of board power over a measured window (trapezoids
between samples), summed over devices: joules per prompt token over the prefill window and per
output token over the decode window.

Nothing is reported rather than a wrong number. A window's energy is "not measured", with the
reason, when NVML is absent, when fewer devices answered than the run expects, when a sample
gap inside the window is longer than ``max_gap_s`` (a stalled sampler would otherwise draw a
straight line through a burst), or when the window has fewer than two samples. The idle power
before the run is kept beside the figures (the board's own floor is part of what a user pays,
so it is not subtracted). Method: "GPU board power via NVML" (docs/metrics.md).
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

METHOD = "GPU board power via NVML"
INTERVAL_S = 0.1
MAX_GAP_S = 0.5
_MIB = 1024**2


@dataclass(frozen=True)
class PowerSample:
    """One reading: monotonic time and, per device index, watts (None: that device failed)."""

    t: float
    watts: tuple[float | None, ...]


@dataclass(frozen=True)
class Energy:
    joules: float | None
    reason: str = ""  # why joules is None

    @property
    def measured(self) -> bool:
        return self.joules is not None


def integrate(
    samples: Sequence[PowerSample],
    start: float,
    end: float,
    *,
    devices: int,
    max_gap_s: float = MAX_GAP_S,
) -> Energy:
    """Joules drawn by `devices` GPUs between `start` and `end` (monotonic seconds)."""
    if devices < 1:
        return Energy(None, "no GPU to measure")
    if end <= start:
        return Energy(None, "empty window")
    inside = [s for s in samples if start <= s.t <= end]
    # The readings just outside the window bound it, so a short window between two samples
    # is still measured from the samples around it.
    before = [s for s in samples if s.t < start][-1:]
    after = [s for s in samples if s.t > end][:1]
    span = before + inside + after
    if len(span) < 2 or span[0].t > start or span[-1].t < end:
        return Energy(None, "too few power samples in the window")
    for sample in span:
        if len(sample.watts) < devices or any(w is None for w in sample.watts[:devices]):
            answered = sum(w is not None for w in sample.watts)
            return Energy(None, f"{answered} of {devices} GPUs reported power")
    gaps = [b.t - a.t for a, b in zip(span, span[1:], strict=False)]
    if max(gaps) > max_gap_s:
        return Energy(None, f"a {max(gaps):.2f} s gap between power samples (over {max_gap_s} s)")
    total = 0.0
    for a, b in zip(span, span[1:], strict=False):
        lo, hi = max(a.t, start), min(b.t, end)
        if hi <= lo:
            continue
        for device in range(devices):
            wa, wb = a.watts[device], b.watts[device]
            assert wa is not None and wb is not None  # checked above
            slope = (wb - wa) / (b.t - a.t)
            # The trapezoid of the line through (a, b), cut to [lo, hi].
            total += (wa + slope * (lo - a.t) + wa + slope * (hi - a.t)) / 2 * (hi - lo)
    return Energy(total)


def per_token(energy: Energy, tokens: int | None) -> float | None:
    if not energy.measured or not tokens:
        return None
    assert energy.joules is not None
    return energy.joules / tokens


@dataclass
class PowerMonitor:
    """Samples power and memory in a daemon thread between ``start()`` and ``stop()``."""

    expected_devices: int
    server_pids: Callable[[], set[int]] | None = None
    interval: float = INTERVAL_S
    nvml: Any = None  # pynvml, or a stand-in with its calls (tests)
    clock: Callable[[], float] = time.monotonic
    samples: list[PowerSample] = field(default_factory=list)
    peak_vram_mib: dict[int, float] = field(default_factory=dict)
    peak_server_rss_mib: float | None = None
    idle_watts: float | None = None
    note: str = ""
    _handles: list = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _open(self) -> None:
        try:
            if self.nvml is None:
                self.nvml = importlib.import_module("pynvml")
            self.nvml.nvmlInit()
            count = self.nvml.nvmlDeviceGetCount()
            self._handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:  # ImportError, or an NVMLError of whatever driver is there
            self.note = f"not measured: NVML is not available ({type(exc).__name__}: {exc})"
            self.nvml, self._handles = None, []

    def sample(self) -> None:
        now = self.clock()
        watts: list[float | None] = []
        for index, handle in enumerate(self._handles):
            try:
                watts.append(self.nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
                used = self.nvml.nvmlDeviceGetMemoryInfo(handle).used / _MIB
                self.peak_vram_mib[index] = max(self.peak_vram_mib.get(index, 0.0), used)
            except Exception:
                watts.append(None)
        if self._handles:
            self.samples.append(PowerSample(now, tuple(watts)))
        rss = self._server_rss_mib()
        if rss is not None:
            self.peak_server_rss_mib = max(self.peak_server_rss_mib or 0.0, rss)

    def _server_rss_mib(self) -> float | None:
        if self.server_pids is None:
            return None
        total = 0
        with contextlib.suppress(Exception):
            for pid in self.server_pids():
                with contextlib.suppress(psutil.Error):
                    total += psutil.Process(pid).memory_info().rss
        return total / _MIB if total else None

    def start(self) -> PowerMonitor:
        self._open()
        self.sample()
        if self.samples and all(w is not None for w in self.samples[0].watts):
            self.idle_watts = sum(w or 0.0 for w in self.samples[0].watts)
        self._thread = threading.Thread(target=self._loop, name="power", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self.interval + 5)
            self._thread = None
            self.sample()
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()

    def energy(self, start: float, end: float) -> Energy:
        if not self._handles:
            return Energy(None, self.note or "not measured: no GPU")
        return integrate(
            self.samples, start, end, devices=self.expected_devices, max_gap_s=MAX_GAP_S
        )

    def block(self) -> dict:
        """The bundle's `resources` block (per-window energy goes with each request)."""
        return {
            "energy_method": METHOD if self._handles else None,
            "energy_note": "" if self._handles else (self.note or "not measured: no GPU"),
            "gpu_devices_expected": self.expected_devices,
            "gpu_devices_seen": len(self._handles),
            "idle_watts": self.idle_watts,
            "peak_vram_mib": {str(k): round(v, 1) for k, v in sorted(self.peak_vram_mib.items())},
            "peak_server_rss_mib": (
                round(self.peak_server_rss_mib, 1) if self.peak_server_rss_mib else None
            ),
            "interval_s": self.interval,
        }
