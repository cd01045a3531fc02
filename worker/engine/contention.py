"""What else ran on the machine during a run: host load and other GPU processes (`contention`).

A background thread samples, every ``interval`` seconds (2 s by default, with a GPU or not),
the host's CPU times and load average (psutil; each process's from /proc/<pid>/stat on
Linux) and the processes on each NVIDIA GPU (NVML, where present). The benchmark itself (this
process, the server's process tree, and their children) is left out of "other" load. The block
says ``clear``, ``contended`` (with the reasons) or ``unknown`` (with why it could not look);
the site does not publish a lab run measured under contention as verified.

Rules (docs/metrics.md, "Contention"): the host is contended when other processes used more
than 10% of the machine's CPU time on average, or more than 25% in a tenth of the intervals; a
GPU is contended when another compute process, or a graphics process holding 1 GiB or more, is
on it at any sample. When the server's own process cannot be identified, one unknown GPU process
is taken to be the server.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from ..rules.contract import Contention, ContentionStatus
from ..rules.stats import percentile

INTERVAL_S = 2.0
# The server's own pids are asked for every this many samples (a new child of it is found
# through the process table at every sample).
SERVER_EVERY = 10
HOST_MEAN_LIMIT = 0.10
HOST_P90_LIMIT = 0.25
GRAPHICS_MIB_LIMIT = 1024
TOP_PROCESSES = 5
_MIB = 1024**2


def _cpu_busy_total() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    times = psutil.cpu_times()
    fields = times._asdict()
    # On Linux guest time is already inside user and nice; counting it twice would inflate.
    total = sum(v for k, v in fields.items() if k not in ("guest", "guest_nice"))
    idle = fields.get("idle", 0.0) + fields.get("iowait", 0.0)
    return total - idle, total


# One row per process: (name, parent pid, its own CPU seconds, its finished children's).
ProcessRow = tuple[str, int, float, float]
_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _linux_table() -> dict[int, ProcessRow]:
    """Every process from its /proc/<pid>/stat, one read each: psutil's process_iter reads more
    per process and costs 3-5x as much (bench/README.md, "Light client")."""
    table: dict[int, ProcessRow] = {}
    for entry in os.listdir(_PROC):
        if not entry.isdigit():
            continue
        try:  # a plain open: pathlib's would double the cost of the whole scan
            with open(f"/proc/{entry}/stat", "rb") as stat:
                data = stat.read()
        except OSError:  # ended since the listing, or not ours to read
            continue
        # The name is in parentheses and may hold spaces or ')': the fields follow the last ')'.
        close = data.rfind(b")")
        fields = data[close + 2 :].split()
        if len(fields) < 15:
            continue
        name = data[data.find(b"(") + 1 : close].decode(errors="replace")
        utime, stime, cutime, cstime = (int(f) / _TICKS for f in fields[11:15])
        table[int(entry)] = (name, int(fields[1]), utime + stime, cutime + cstime)
    return table


def _psutil_table() -> dict[int, ProcessRow]:
    """The same rows through psutil, where there is no /proc."""
    table: dict[int, ProcessRow] = {}
    for process in psutil.process_iter(["name", "ppid", "cpu_times"]):
        t = process.info.get("cpu_times")
        if t is None:
            continue
        children = getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        name = process.info.get("name") or "?"
        table[process.pid] = (name, process.info.get("ppid") or 0, t.user + t.system, children)
    return table


def process_table() -> dict[int, ProcessRow]:
    return _linux_table() if (_PROC / "self/stat").exists() else _psutil_table()


def with_descendants(roots: set[int], table: dict[int, ProcessRow]) -> set[int]:
    """``roots`` and every process below them in ``table``."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    for pid, row in table.items():
        children[row[1]].append(pid)
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class HostProbe:
    """Readings of this machine; ``own`` returns the process ids at the root of the benchmark
    (this process, the server's): they and their descendants are ``known`` after a snapshot."""

    def __init__(self, own: Callable[[], set[int]]):
        self.own = own
        self.known: set[int] = set()

    def snapshot(self) -> dict:
        busy, total = _cpu_busy_total()
        table = process_table()
        known = self.known = with_descendants(self.own(), table)
        own_seconds = 0.0
        others: dict[str, list] = {}
        for pid, (name, _parent, seconds, children) in table.items():
            if pid in known:
                # With its finished children's: the code sandbox's short-lived ones end between
                # samples. Another process's children are counted once, as themselves.
                own_seconds += seconds + children
            elif pid:
                others[str(pid)] = [name or "?", seconds]
        try:
            load = list(os.getloadavg())
        except (OSError, AttributeError):
            load = None
        return {
            "t": time.monotonic(),
            "busy_s": busy,
            "total_s": total,
            "own_s": own_seconds,
            "cpus": psutil.cpu_count() or 1,
            "load": load,
            "others": others,
        }


class NvmlProbe:
    """The processes on every NVIDIA GPU. ``note`` says why it cannot look, when it cannot."""

    source = "nvml"

    def __init__(self, nvml=None):
        self.nvml = nvml
        self.note = ""
        self.handles: list = []
        if self.nvml is None:
            try:
                self.nvml = importlib.import_module("pynvml")
            except ImportError:
                self.note = "NVML not available: nvidia-ml-py is not installed"
                return
        try:
            self.nvml.nvmlInit()
            self.handles = [
                self.nvml.nvmlDeviceGetHandleByIndex(i)
                for i in range(self.nvml.nvmlDeviceGetCount())
            ]
        except Exception as exc:  # NVMLError subclasses differ between driver setups
            self.note = f"NVML not available: {exc}"
            self.nvml = None

    @property
    def available(self) -> bool:
        return self.nvml is not None

    def _name(self, pid: int) -> str:
        with contextlib.suppress(psutil.Error):
            return psutil.Process(pid).name()
        with contextlib.suppress(Exception):
            name = self.nvml.nvmlSystemGetProcessName(pid)
            name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
            return os.path.basename(name)
        return "?"

    def snapshot(self) -> dict | None:
        if not self.available:
            return None
        processes: list[dict[str, Any]] = []
        utilization: list[float] = []
        for index, handle in enumerate(self.handles):
            for kind, getter in (
                ("compute", "nvmlDeviceGetComputeRunningProcesses"),
                ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
            ):
                try:
                    listed = getattr(self.nvml, getter)(handle)
                except Exception:
                    continue
                for entry in listed:
                    used = getattr(entry, "usedGpuMemory", None)
                    processes.append(
                        {
                            "gpu": index,
                            "pid": int(entry.pid),
                            "type": kind,
                            "used_mib": round(used / _MIB) if isinstance(used, int) else None,
                        }
                    )
            with contextlib.suppress(Exception):
                utilization.append(float(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
        for process in processes:
            process["name"] = self._name(process["pid"])
        return {"processes": processes, "utilization": utilization}

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


def host_block(snapshots: list[dict]) -> dict:
    """The host part of the block, from consecutive HostProbe snapshots."""
    if len(snapshots) < 2:
        return {"status": "unknown", "note": "too short a run to sample the host"}
    shares: list[float] = []
    busy_shares: list[float] = []
    by_name: defaultdict[str, float] = defaultdict(float)
    for before, after in zip(snapshots, snapshots[1:], strict=False):
        capacity = after["total_s"] - before["total_s"]
        if capacity <= 0:
            continue
        busy = after["busy_s"] - before["busy_s"]
        own = max(0.0, after["own_s"] - before["own_s"])
        busy_shares.append(min(1.0, max(0.0, busy / capacity)))
        shares.append(min(1.0, max(0.0, (busy - own) / capacity)))
        for pid, (name, seconds) in after["others"].items():
            if pid in before["others"]:
                by_name[name] += max(0.0, seconds - before["others"][pid][1]) / capacity
    if not shares:
        return {"status": "unknown", "note": "the host's CPU clock did not advance"}
    ordered = sorted(shares)
    loads = [s["load"][0] for s in snapshots if s.get("load")]
    block = {
        "cpu_count": snapshots[-1]["cpus"],
        "intervals": len(shares),
        "cpu_busy_share_mean": round(sum(busy_shares) / len(busy_shares), 4),
        "cpu_busy_share_max": round(max(busy_shares), 4),
        "other_cpu_share_mean": round(sum(shares) / len(shares), 4),
        "other_cpu_share_p90": round(percentile(ordered, 0.9), 4),
        "other_cpu_share_max": round(ordered[-1], 4),
        "load_avg_1m_mean": round(sum(loads) / len(loads), 3) if loads else None,
        "load_avg_1m_max": round(max(loads), 3) if loads else None,
        "top_other_processes": [
            {"name": name, "cpu_share_mean": round(total / len(shares), 4)}
            for name, total in sorted(by_name.items(), key=lambda kv: -kv[1])[:TOP_PROCESSES]
            if total / len(shares) >= 0.01
        ],
    }
    reasons = []
    if block["other_cpu_share_mean"] > HOST_MEAN_LIMIT:
        reasons.append(
            f"other processes used {block['other_cpu_share_mean']:.0%} of the CPUs on average"
        )
    elif block["other_cpu_share_p90"] > HOST_P90_LIMIT:
        reasons.append(
            f"other processes used over {block['other_cpu_share_p90']:.0%} of the CPUs "
            "in a tenth of the run"
        )
    block["status"] = "contended" if reasons else "clear"
    block["reasons"] = reasons
    return block


def gpu_block(snapshots: list[dict], known: set[int], *, server_known: bool) -> dict:
    """The GPU part of the block, from NvmlProbe snapshots (process ids in ``known`` are ours)."""
    seen: dict[tuple, dict] = {}
    unknown_allowed = not server_known
    contended_at = 0
    util = [u for s in snapshots for u in s.get("utilization") or []]
    for snapshot in snapshots:
        others = [p for p in snapshot["processes"] if p["pid"] not in known]
        compute = [p for p in others if p["type"] == "compute"]
        if unknown_allowed and not any(p["pid"] in known for p in snapshot["processes"]):
            # The server's process is not visible as such (another user, a container): the one
            # unknown compute process may be it, so one is given the benefit of the doubt.
            compute = compute[1:]
            others = [p for p in others if p["type"] != "compute"] + compute
        heavy = [
            p
            for p in others
            if p["type"] == "compute" or (p["used_mib"] or 0) >= GRAPHICS_MIB_LIMIT
        ]
        contended_at += bool(heavy)
        for p in heavy:
            key = (p["gpu"], p["pid"], p["type"])
            entry = seen.setdefault(
                key,
                {
                    "gpu": p["gpu"],
                    "name": p["name"],
                    "type": p["type"],
                    "used_mib_max": 0,
                    "samples": 0,
                },
            )
            entry["samples"] += 1
            entry["used_mib_max"] = max(entry["used_mib_max"], p["used_mib"] or 0)
    reasons = []
    if seen:
        names = ", ".join(sorted({e["name"] for e in seen.values()}))
        reasons.append(f"{len(seen)} other GPU process(es) during the run: {names}")
    return {
        "status": "contended" if reasons else "clear",
        "samples": len(snapshots),
        "samples_contended": contended_at,
        "other_processes": sorted(seen.values(), key=lambda e: (-e["samples"], e["name"])),
        "utilization_pct_mean": round(sum(util) / len(util), 1) if util else None,
        "utilization_pct_max": max(util) if util else None,
        "server_process_identified": server_known,
        "reasons": reasons,
    }


def unmeasured(note: str) -> Contention:
    """The block for a run whose machine this process cannot see (a remote endpoint)."""
    part = {"status": "unknown", "note": note}
    return Contention(status="unknown", reasons=[], interval_s=None, host=part, gpu=part)


class ContentionMonitor:
    """Samples the host and GPUs in a daemon thread between ``start()`` and ``stop()``."""

    def __init__(
        self,
        *,
        server_pids: Callable[[], set[int]] | None = None,
        gpu: NvmlProbe | None = None,
        interval: float = INTERVAL_S,
    ):
        self.server_pids = server_pids
        self.interval = interval
        self.gpu = gpu if gpu is not None else NvmlProbe()
        self.host = HostProbe(self._roots)
        self.host_snapshots: list[dict] = []
        self.gpu_snapshots: list[dict] = []
        self.known: set[int] = set()
        self._server: set[int] = set()
        self._samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _roots(self) -> set[int]:
        """This process and the server's; their children come from the snapshot's own table.
        The server's pids are asked for now and then only: asking walks every process again."""
        if self.server_pids is not None and self._samples % SERVER_EVERY == 0:
            with contextlib.suppress(Exception):
                self._server = set(self.server_pids())
        self._samples += 1
        return {os.getpid(), *self._server}

    def _sample(self) -> None:
        with contextlib.suppress(Exception):  # a failed reading loses a sample, never the run
            self.host_snapshots.append(self.host.snapshot())
        self.known |= self.host.known
        with contextlib.suppress(Exception):
            snapshot = self.gpu.snapshot()
            if snapshot is not None:
                self.gpu_snapshots.append(snapshot)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> ContentionMonitor:
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="contention", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Contention:
        """Stop sampling (taking a last sample) and return the bundle's `contention` block."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self.interval + 5)
            self._thread = None
            self._sample()
        self.gpu.close()
        return self.block()

    def block(self) -> Contention:
        host = host_block(self.host_snapshots)
        if self.gpu_snapshots:
            gpu = gpu_block(
                self.gpu_snapshots, self.known, server_known=self.server_pids is not None
            )
            gpu["source"] = self.gpu.source
        else:
            gpu = {"status": "unknown", "source": "none", "note": self.gpu.note or "no samples"}
        parts = (host["status"], gpu["status"])
        status: ContentionStatus = "unknown"
        if "contended" in parts:
            status = "contended"
        elif parts == ("clear", "clear"):
            status = "clear"
        return Contention(
            status=status,
            reasons=host.get("reasons", []) + gpu.get("reasons", []),
            interval_s=self.interval,
            host=host,
            gpu=gpu,
        )
