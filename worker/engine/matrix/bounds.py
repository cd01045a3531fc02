"""What bounds a caged harness run: rlimits, a cgroup where one is ours to make, and the clean-up
of what the program leaves in the workspace.

- rlimits (address space, file size, CPU time, open files, processes) are set by the cage's own
  launcher, inside the namespace, before the program starts (``rlimit_pairs``). ``RLIMIT_NPROC``
  is counted per user namespace and uid, so it bounds the run's own processes; but the kernel
  never applies it to a process whose real uid is the host's root, which a cage started by root
  is (its uid 65534 maps to root outside).
- A cgroup (``Scope``) bounds the whole run's processes and memory (tmpfs pages included) and
  counts how often a limit was hit. We use one where this process may create a child of its own
  cgroup: cgroup v2 with the ``pids`` and ``memory`` controllers delegated, else the v1 ``pids``
  and ``memory`` hierarchies (containers run as root often have those).
- ``scrub`` strips setuid and setgid bits and removes device nodes, FIFOs and sockets from the
  workspace after the run, so none of them reaches the host's view.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..sandbox.isolation import bwrap_features
from .spec import CageLimits

CGROUP_ROOT = Path("/sys/fs/cgroup")
_MIB = 1024 * 1024


def rlimit_pairs(limits: CageLimits) -> list[list[int]]:
    """``[[resource number, soft, hard], ...]`` for the launcher to set. CPU's hard limit is a
    second above the soft one, so the program dies of ``SIGXCPU`` (the kernel's word for the
    limit) rather than of the ``SIGKILL`` that comes at the hard limit."""
    import resource  # Unix only; the cage exists only on Linux

    same = [
        (resource.RLIMIT_AS, limits.memory_mb * _MIB),
        (resource.RLIMIT_FSIZE, limits.file_mb * _MIB),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_CORE, 0),
    ]
    return [[resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1]] + [[n, v, v] for n, v in same]


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


@dataclass
class Layout:
    """Where a run's cgroup goes: ``version`` 2 (one folder) or 1 (one per controller)."""

    version: int
    parents: dict[str, Path]  # controller -> the folder the run's cgroup is made in


def find_layout() -> Layout | None:
    """The cgroup this process may make children in, with pids and memory; None if none."""
    own = _own_paths()
    if (CGROUP_ROOT / "cgroup.controllers").is_file() and "" in own:
        parent = CGROUP_ROOT / own[""].lstrip("/")
        with contextlib.suppress(OSError):
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            if {"pids", "memory"} <= set(enabled) and _writable(parent):
                return Layout(2, {"pids": parent, "memory": parent})
        return None
    parents = {}
    for name in ("pids", "memory"):
        parent = CGROUP_ROOT / name / own.get(name, "/").lstrip("/")
        if not (_writable(parent) and (parent / "cgroup.procs").is_file()):
            return None
        parents[name] = parent
    return Layout(1, parents)


def mechanism(limits: CageLimits | None = None) -> str:
    """Which mechanism bounds a run here, in words (``benchloop info --all``)."""
    limits = limits or CageLimits()
    rl = (
        f"rlimits per process: address space {limits.memory_mb} MiB, file size "
        f"{limits.file_mb} MiB, CPU {limits.cpu_s} s, {limits.open_files} open files, "
        f"{limits.processes} processes"
    )
    bwrap = shutil.which("bwrap")
    if bwrap and "--size" not in bwrap_features(bwrap):
        tmp = "private /tmp and /dev/shm NOT sized (bwrap older than 0.5 has no --size)"
    else:
        tmp = f"private /tmp {limits.tmp_mb} MiB and /dev/shm {limits.shm_mb} MiB (tmpfs)"
    layout = find_layout()
    if layout is not None:
        whole = f"cgroup v{layout.version} per run: {limits.processes} processes, "
        return f"{whole}{limits.memory_mb} MiB of memory; {rl}; {tmp}"
    if os.geteuid() == 0:
        note = "no cgroup of ours here, and as root the process limit does not bind"
        return f"rlimits only ({note}); {rl}; {tmp}"
    return f"rlimits only (no cgroup of ours here); {rl}; {tmp}"


@dataclass
class Scope:
    """One run's cgroup: made before the run, read and removed after it."""

    layout: Layout
    folders: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def create(cls, limits: CageLimits) -> Scope | None:
        layout = find_layout()
        if layout is None:
            return None
        scope = cls(layout)
        name = f"benchloop-cage-{uuid.uuid4().hex[:12]}"
        memory = str(limits.memory_mb * _MIB)
        try:
            for controller, parent in layout.parents.items():
                folder = parent / name
                if folder not in scope.folders.values():
                    folder.mkdir()
                scope.folders[controller] = folder
            scope._write("pids", "pids.max", str(limits.processes))
            if layout.version == 2:
                scope._write("memory", "memory.max", memory)
                with contextlib.suppress(OSError):
                    scope._write("memory", "memory.swap.max", "0")
            else:
                scope._write("memory", "memory.limit_in_bytes", memory)
        except OSError:
            scope.remove()
            return None
        return scope

    def _write(self, controller: str, name: str, value: str) -> None:
        (self.folders[controller] / name).write_text(value)

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.folders[controller] / name).read_text()
        except (OSError, KeyError):
            return ""

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files the cage's first process writes itself into."""
        return sorted({str(f / "cgroup.procs") for f in self.folders.values()})

    def _counts(self, controller: str, name: str) -> dict[str, int]:
        """A flat-keyed file of counters (``max 3``), as numbers; absent ones read as 0."""
        counts = {}
        for line in self._read(controller, name).splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                counts[key] = int(value)
        return counts

    def hits(self) -> list[str]:
        """The limits the kernel counted as hit, in words."""
        found = []
        refused = self._counts("pids", "pids.events").get("max", 0)
        if refused:
            found.append(f"process limit: {refused} forks refused (cgroup)")
        # Processes the kernel killed for the run's memory (reaching the limit alone is no
        # failure: page cache is reclaimed there).
        events = "memory.events" if self.layout.version == 2 else "memory.oom_control"
        killed = self._counts("memory", events).get("oom_kill", 0)
        if killed:
            found.append(f"memory limit: {killed} processes killed (cgroup)")
        return found

    def remove(self) -> None:
        """Kill anything left in the run's cgroup (only ever its own processes), then remove it."""
        for folder in set(self.folders.values()):
            for _ in range(50):
                pids = [int(p) for p in self._procs(folder)]
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)  # the killed are still being reaped

    @staticmethod
    def _procs(folder: Path) -> list[str]:
        try:
            return (folder / "cgroup.procs").read_text().split()
        except OSError:
            return []


def enter_command(scope: Scope | None, command: list[str]) -> list[str]:
    """``command``, started inside ``scope``: a shell writes its own pid into the cgroup, then
    execs the command, so nothing of the run ever runs outside it."""
    if scope is None:
        return command
    files = scope.procs_files()
    script = (
        'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; '
        'n=$((n - 1)); done; exec "$@"'
    )
    return ["/bin/sh", "-c", script, "sh", str(len(files)), *files, *command]


def scrub(root: Path) -> tuple[list[str], int]:
    """Strip setuid/setgid bits and remove device nodes, FIFOs and sockets under ``root``
    (never following a symlink). What was changed (``root``-relative paths), and the size of
    the largest regular file found."""
    changed: list[str] = []
    largest = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            rel = os.path.relpath(path, root)
            mode = info.st_mode
            if stat.S_ISLNK(mode):
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    changed.append(f"removed {rel}")
                continue
            if stat.S_ISREG(mode):
                largest = max(largest, info.st_size)
            if mode & (stat.S_ISUID | stat.S_ISGID):
                with contextlib.suppress(OSError):
                    os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
                    changed.append(f"cleared setuid/setgid on {rel}")
    return changed, largest
