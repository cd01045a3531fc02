"""Energy and memory during a run: GPU board power and memory (NVML), the server's host RAM.

A sampler thread reads every device's board power (milliwatts) and memory in use every
``interval`` seconds, and the resident memory of the server's processes when the server runs
on this machine. Without a GPU there is no power to integrate, so the thread wakes once a
second at most (``HOST_INTERVAL_S``): on a CPU-only machine the benchmark shares its cores with
the server it measures, and the server's RAM is read at that rate whatever the power rate.
Energy is the integral of board power over a measured window (trapezoids between samples),
summed over devices: joules per prompt token over the prefill window and per output token over
the decode window.

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
# Without NVML (no power to integrate) and for host RAM in every case: no faster than this.
HOST_INTERVAL_S = 1.0
# Listing a process tree walks every process on the machine: often enough to catch a runner
# Ollama starts, while the RSS of the pids already known is read every HOST_INTERVAL_S.
TREE_INTERVAL_S = 2.0
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
    started_at: float | None = None  # the clock at start(): windows are reported from it
    peak_vram_mib: dict[int, float] = field(default_factory=dict)
    peak_server_rss_mib: float | None = None
    idle_watts: float | None = None
    note: str = ""
    _handles: list = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    # One sample at a time: a trial's own mark() and the thread's must append in clock order.
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pids: set[int] | None = None
    _processes: dict[int, psutil.Process] = field(default_factory=dict)
    _tree_at: float | None = None  # the clock when the server's pids were last listed
    _rss_at: float | None = None  # ... and when their RSS was last read

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
        with self._lock:
            self._sample()

    def mark(self) -> float:
        """A sample now, so a window that just ended is bounded by a reading after it."""
        with self._lock:
            self._sample()
            return self.samples[-1].t if self.samples else self.clock()

    def _sample(self) -> None:
        now = self.clock()
        watts: list[float | None] = []
        handles = self._handles if self.nvml is not None else []  # none after stop()
        for index, handle in enumerate(handles):
            try:
                watts.append(self.nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
                used = self.nvml.nvmlDeviceGetMemoryInfo(handle).used / _MIB
                self.peak_vram_mib[index] = max(self.peak_vram_mib.get(index, 0.0), used)
            except Exception:
                watts.append(None)
        if handles:
            self.samples.append(PowerSample(now, tuple(watts)))
        if self.server_pids is not None and (
            self._rss_at is None or now - self._rss_at >= HOST_INTERVAL_S
        ):
            self._rss_at = now
            rss = self._server_rss_mib(now)
            if rss is not None:
                self.peak_server_rss_mib = max(self.peak_server_rss_mib or 0.0, rss)

    def _server_rss_mib(self, now: float) -> float | None:
        assert self.server_pids is not None
        if self._tree_at is None or now - self._tree_at >= TREE_INTERVAL_S:
            self._tree_at = now
            with contextlib.suppress(Exception):
                self._pids = set(self.server_pids())
            self._processes = {p: v for p, v in self._processes.items() if p in (self._pids or ())}
        total = 0
        for pid in self._pids or ():
            with contextlib.suppress(psutil.Error):
                # Kept between samples: a new Process reads /proc/<pid>/stat for its identity.
                process = self._processes.get(pid)
                if process is None:
                    process = self._processes[pid] = psutil.Process(pid)
                total += process.memory_info().rss
        return total / _MIB if total else None

    def start(self) -> PowerMonitor:
        self._open()
        if not self._handles:
            self.interval = max(self.interval, HOST_INTERVAL_S)
        self.started_at = self.clock()
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
        """The last sample, then NVML released; a second call does nothing (NVML counts its
        inits, so a second shutdown would release the contention monitor's)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self.interval + 5)
            self._thread = None
            self.sample()
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = None

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
            "server_rss_note": ""
            if self.peak_server_rss_mib
            else "not measured: the server's process is not visible from here",
            "interval_s": self.interval,
        }


def _window(
    monitor: PowerMonitor, start: float, end: float, tokens: int | None
) -> tuple[dict, float | None]:
    """One window's joules, per-token figure, place (s from the monitor's start) and reason."""
    energy = monitor.energy(start, end)
    origin = monitor.started_at or 0.0
    note = energy.reason
    if energy.measured and not tokens:
        note = "no tokens to divide by"
    joules = round(energy.joules, 4) if energy.joules is not None else None
    return (
        {
            "joules": joules,
            "tokens": tokens,
            "window_s": [round(start - origin, 4), round(end - origin, 4)],
            "note": note if per_token(energy, tokens) is None else "",
        },
        per_token(energy, tokens),
    )


def trial_energy(monitor: PowerMonitor | None, sent: float, metrics: dict, why_not: str) -> dict:
    """The `energy` block of one speed trial.

    ``sent`` is the monitor's clock just before the request went out; ``metrics`` the trial's
    speed figures (worker.engine.metrics.request_metrics). The prefill window runs from sent to
    the first output token and is divided by the prompt tokens the server processed (prompt
    minus cached, as prefill tok/s is meant to count them); the decode window runs from the
    first to the last output token and is divided by the tokens generated after the first, as
    TPOT is. ``why_not`` is the reason given when there is no monitor (a remote server).
    """
    ttft, last = metrics.get("ttft_ms"), metrics.get("e2e_ms")
    if monitor is None or ttft is None or last is None:
        reason = why_not if monitor is None else "the trial has no first or last token time"
        return {
            "joules_per_prompt_token": None,
            "joules_per_output_token": None,
            "prefill": None,
            "decode": None,
            "note": reason,
        }
    monitor.mark()  # a reading after the last token, so the decode window is bounded
    # The same count as prefill tok/s (metrics.evaluated_prompt_tokens): cached tokens cost nothing.
    processed = metrics.get("prefill_tokens")
    completion = metrics.get("completion_tokens") or 0
    first = sent + ttft / 1000.0
    prefill, per_prompt = _window(monitor, sent, first, processed)
    decode, per_output = _window(
        monitor, first, sent + last / 1000.0, completion - 1 if completion > 1 else None
    )
    return {
        "joules_per_prompt_token": _rounded(per_prompt),
        "joules_per_output_token": _rounded(per_output),
        "prefill": prefill,
        "decode": decode,
        "note": decode["note"] or prefill["note"],
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def energy_summary(trials: Sequence[dict]) -> dict:
    """The run's energy figures: medians over the speed trials that measured each window."""
    from ..rules.stats import median

    energy = [t.get("energy") or {} for t in trials]
    measured = [t for t in trials if (t.get("energy") or {}).get("joules_per_output_token")]
    notes = [t["energy"]["note"] for t in trials if (t.get("energy") or {}).get("note")]
    return {
        "joules_per_output_token": median(
            (e.get("joules_per_output_token") for e in energy), digits=6
        ),
        "joules_per_prompt_token": median(
            (e.get("joules_per_prompt_token") for e in energy), digits=6
        ),
        "trials": len(trials),
        "trials_measured": len(measured),
        # Why a trial measured nothing: the first such reason (they are usually all the same).
        "note": notes[0] if notes and not measured else "",
    }


def unmeasured_block(reason: str, expected_devices: int) -> dict:
    """The `resources` block where nothing could be sampled (a server on another machine)."""
    return {
        "energy_method": None,
        "energy_note": f"not measured: {reason}",
        "gpu_devices_expected": expected_devices,
        "gpu_devices_seen": 0,
        "idle_watts": None,
        "peak_vram_mib": {},
        "peak_server_rss_mib": None,
        "server_rss_note": f"not measured: {reason}",
        "interval_s": None,
    }
