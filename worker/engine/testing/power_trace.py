"""A pynvml stand-in that replays a recorded power trace in real time, for machines without a GPU.

The trace (worker/tests/data/nvml/*.json) lists device names and samples of each device's board
power and memory in use every 100 ms. Installed as ``pynvml`` for a whole run, it answers what
hardware detection, the contention probe and the power monitor ask: the devices and their
memory, no other GPU processes, and at any moment the power of the trace's sample that the time
since the stand-in was made falls on (the trace repeats, so it never runs out). ``drop_device``
makes one device stop answering power queries, as a board that falls off the bus does.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

_GIB = 1024**3


@dataclass
class _Memory:
    total: int
    used: int
    free: int


@dataclass
class _Utilization:
    gpu: int
    memory: int


class NVMLError(Exception):
    """What pynvml raises; a dropped device raises it for power."""


class PowerTraceNvml:
    """``PowerTraceNvml(path)`` behaves as the pynvml module for the calls the engine makes."""

    NVMLError = NVMLError

    def __init__(
        self, path: Path, *, drop_device: int | None = None, total_gib: float = 24.0
    ) -> None:
        trace = json.loads(Path(path).read_text())
        self.names: list[str] = trace["device_names"]
        self.rows: list[dict] = trace["samples"]
        self.interval: float = trace["interval_s"]
        self.drop_device = drop_device
        self.total = int(total_gib * _GIB)
        self.t0 = time.perf_counter()
        # Every power answer given: (perf_counter time, device, watts), for a hand calculation.
        self.answers: list[tuple[float, int, float]] = []

    def row(self) -> dict:
        """The trace's sample for now."""
        step = int((time.perf_counter() - self.t0) / self.interval)
        return self.rows[step % len(self.rows)]

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        pass

    def nvmlShutdown(self) -> None:  # noqa: N802
        pass

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return "550.54.14"

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return 12040

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return self.names[handle]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:  # noqa: N802
        used = int(self.row()["vram_mib"][handle] * 1024**2)
        return _Memory(total=self.total, used=used, free=self.total - used)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:  # noqa: N802
        if handle == self.drop_device:
            raise NVMLError("GPU is lost")
        now = time.perf_counter()
        watts = self.row()["watts"][handle]
        self.answers.append((now, handle, watts))
        return int(round(watts * 1000))  # milliwatts, as NVML answers

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list:  # noqa: N802
        return []

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list:  # noqa: N802
        return []

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Utilization:  # noqa: N802
        return _Utilization(0, 0)

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:  # noqa: N802
        return b"?"
