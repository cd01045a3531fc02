"""A pynvml stand-in that replays a trace of NVML answers, for machines without an NVIDIA GPU.

The trace is plain data: the devices, then one entry per sample with each device's compute
and graphics processes (pid, used memory in bytes) and utilisation. Every call the contention
probe makes returns the trace's answer in the objects pynvml returns, so the probe's own code
runs unchanged; the k-th process query of a device reads the k-th sample (the last one repeats).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Process:
    pid: int
    usedGpuMemory: int | None  # noqa: N815 - pynvml's attribute name


@dataclass
class _Utilization:
    gpu: int
    memory: int


class NvmlTrace:
    """``NvmlTrace({"devices": [...], "samples": [...]})`` behaves as the pynvml module."""

    def __init__(self, trace: dict):
        self.devices = trace["devices"]
        self.samples = trace["samples"]
        self.names = {int(k): v for k, v in trace.get("process_names", {}).items()}
        self.calls: dict[tuple[str, int], int] = {}
        self.initialised = self.shut_down = 0

    def _sample(self, kind: str, handle: int) -> dict:
        count = self.calls.get((kind, handle), 0)
        self.calls[(kind, handle)] = count + 1
        return self.samples[min(count, len(self.samples) - 1)][handle]

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shut_down += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return self.devices[handle]["name"]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[_Process]:  # noqa: N802
        listed = self._sample("compute", handle).get("compute", [])
        return [_Process(p["pid"], p.get("used_bytes")) for p in listed]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[_Process]:  # noqa: N802
        listed = self._sample("graphics", handle).get("graphics", [])
        return [_Process(p["pid"], p.get("used_bytes")) for p in listed]

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Utilization:  # noqa: N802
        return _Utilization(int(self._sample("utilization", handle).get("utilization", 0)), 0)

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:  # noqa: N802
        return self.names.get(pid, "?").encode()


def nvml_present() -> bool:
    """Whether this machine has a working NVML (tests of its absence skip where it has one)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    pynvml.nvmlShutdown()
    return True
