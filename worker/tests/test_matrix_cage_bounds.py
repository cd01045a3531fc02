"""The harness cage's bounds, with the real bubblewrap cage (issue 31, defects 7 to 9).

Each bomb runs under small limits and bounds itself as well (at most 200 processes, 4 GiB, 1 GiB
of file, 256 MiB of /dev/shm), so that a cage that did not hold would fail the test without
taking the shared machine down. The host's side is watched from outside while the bomb runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import textwrap
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from worker.engine.matrix import bounds
from worker.engine.matrix.runner import run_program
from worker.engine.matrix.spec import (
    CageLimits,
    Endpoint,
    HarnessSpec,
    HarnessTask,
    Invocation,
    ProgramResult,
)
from worker.engine.matrix.suite import classify, judge

# The CLI's own interpreter stands in for a harness install (``install_dir`` falls back to it).
SPEC = HarnessSpec("probe", "benchloop-cage-probe", "0", "python3", "none", "a caged python")
LIMITS = CageLimits(
    processes=64, memory_mb=512, file_mb=64, cpu_s=20, open_files=64, tmp_mb=16, shm_mb=16
)
TASK = HarnessTask("bounds", "probe the cage's bounds", ())
MIB = 1024 * 1024


class Probe:
    """A stand-in adapter: ``code`` runs as the caged program, with ``marker`` in its argv."""

    spec = SPEC

    def __init__(self, code: str, marker: str = "") -> None:
        self.code = textwrap.dedent(code)
        self.marker = marker or uuid.uuid4().hex

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        return Invocation(argv=["python3", "-c", self.code, self.marker], timeout_s=60)

    def format_failures(self, result: ProgramResult) -> list[str]:
        return []


def _require_bwrap() -> None:
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed (scripts/test.sh installs it)")


def _processes_with(marker: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    count += marker.encode() in handle.read().split(b"\0")
            except OSError:
                continue
    return count


def _available_memory() -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable in /proc/meminfo")


def _host_processes() -> int:
    return sum(1 for entry in os.listdir("/proc") if entry.isdigit())


class Watch:
    """Samples the host while the cage runs: the bomb's processes and the free memory."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.peak_processes = 0
        self.lowest_memory = _available_memory()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_processes = max(self.peak_processes, _processes_with(self.marker))
            self.lowest_memory = min(self.lowest_memory, _available_memory())
            time.sleep(0.05)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run(
    tmp_path: Path, code: str, limits: CageLimits = LIMITS
) -> tuple[ProgramResult, Watch, Path]:
    _require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    probe = Probe(code)
    with Watch(probe.marker) as watch:
        result = run_program(
            probe,
            TASK,
            workspace,
            "http://127.0.0.1:9/v1",
            "m",
            max_tokens_cap=8,
            timeout_s=60,
            limits=limits,
        )
    assert not result.timed_out, result.stderr  # ended by a limit, not by the wall clock
    assert _processes_with(probe.marker) == 0  # nothing of it outlives the run
    return result, watch, workspace


def _harness_fault(result: ProgramResult) -> str:
    failure, reason = classify(result, False, [])
    assert failure == "harness_error", (failure, reason)
    return reason


def test_a_fork_bomb_stops_at_the_process_limit(tmp_path):
    before = _host_processes()
    result, watch, _ = _run(
        tmp_path,
        """
        import os, sys, time
        made = 0
        try:
            while made < 200:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                made += 1
        except OSError as exc:
            print("stopped after", made, exc, flush=True)
        sys.exit(3)
        """,
    )
    assert "stopped after" in result.stdout, result.stdout + result.stderr
    assert int(result.stdout.split()[2]) < LIMITS.processes
    assert 0 < watch.peak_processes <= LIMITS.processes
    assert result.returncode == 3
    _harness_fault(result)
    if bounds.find_layout() is not None:  # the cgroup counted the refused forks
        assert any(h.startswith("process limit") for h in result.limit_hits), result.limit_hits
    assert abs(_host_processes() - before) < 40  # the machine is shared: others come and go


def test_a_4_gib_allocation_is_refused(tmp_path):
    before = _available_memory()
    result, watch, _ = _run(
        tmp_path,
        """
        import sys
        try:
            blob = bytearray(4 * 1024 ** 3)
        except MemoryError:
            sys.exit(4)
        print("allocated", len(blob))
        """,
    )
    assert "allocated" not in result.stdout
    assert result.returncode == 4
    _harness_fault(result)
    assert before - watch.lowest_memory < 1024 * MIB  # 4 GiB never left the host
    assert before - _available_memory() < 1024 * MIB


def test_processes_under_the_address_space_limit_share_the_runs_memory_limit(tmp_path):
    """Four processes of 200 MiB each stay under RLIMIT_AS (per process); the run's cgroup
    holds them to 512 MiB together, and its counter says so."""
    if bounds.find_layout() is None:
        pytest.skip("no cgroup of ours on this host: memory is bounded per process only")
    result, _, _ = _run(
        tmp_path,
        """
        import os, sys, time
        kids = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                blob = bytearray(200 * 1024 * 1024)  # zero-filled: every page touched
                time.sleep(3)
                os._exit(0)
            kids.append(pid)
        print("children", [os.waitpid(pid, 0)[1] for pid in kids], flush=True)
        sys.exit(7)
        """,
    )
    assert result.returncode == 7, result.stderr
    assert any(h.startswith("memory limit:") for h in result.limit_hits), result.limit_hits
    assert "the harness hit the cage's limit: memory limit" in _harness_fault(result)
    killed = result.stdout.split("[", 1)[1].split("]")[0].split(", ")
    assert str(signal.SIGKILL) in killed, result.stdout  # the kernel's OOM killer, in the run


def test_a_1_gib_file_stops_at_the_file_size_limit(tmp_path):
    before = shutil.disk_usage(tmp_path).free
    result, _, workspace = _run(
        tmp_path,
        """
        chunk = b"x" * (1024 * 1024)
        with open("/workspace/big.bin", "wb") as handle:
            for _ in range(1024):
                handle.write(chunk)
        print("wrote 1 GiB")
        """,
    )
    assert "wrote 1 GiB" not in result.stdout
    assert result.returncode != 0
    assert (workspace / "big.bin").stat().st_size <= LIMITS.file_mb * MIB
    assert "file size limit" in _harness_fault(result)
    assert before - shutil.disk_usage(tmp_path).free < 256 * MIB


@pytest.mark.parametrize("folder", ["/dev/shm", "/tmp"])
def test_filling_dev_shm_or_tmp_stops_at_its_size(tmp_path, folder):
    before = _available_memory()
    result, watch, _ = _run(
        tmp_path,
        f"""
        import sys
        written = 0
        try:
            with open("{folder}/fill", "wb") as handle:
                while written < 256 * 1024 * 1024:
                    written += handle.write(b"x" * (1024 * 1024))
                    handle.flush()
        except OSError as exc:
            print("stopped after", written, exc, flush=True)
            sys.exit(5)
        print("wrote", written)
        """,
    )
    assert "No space left on device" in result.stdout, result.stdout + result.stderr
    assert int(result.stdout.split()[2]) <= 16 * MIB
    assert result.returncode == 5
    _harness_fault(result)
    assert before - watch.lowest_memory < 200 * MIB  # 256 MiB never filled the host's memory


def test_a_cpu_spin_stops_at_the_cpu_limit(tmp_path):
    result, _, _ = _run(tmp_path, "while True:\n    pass\n", replace(LIMITS, cpu_s=2))
    assert result.returncode == -signal.SIGXCPU  # as the launcher reaped it, not as it said
    assert "CPU time limit: killed by SIGXCPU" in _harness_fault(result)


def test_open_files_stop_at_their_limit(tmp_path):
    result, _, _ = _run(
        tmp_path,
        """
        import sys
        handles = []
        try:
            while len(handles) < 500:
                handles.append(open("/dev/null"))
        except OSError as exc:
            print("stopped at", len(handles), exc.errno, flush=True)
            sys.exit(6)
        """,
    )
    assert int(result.stdout.split()[2]) < LIMITS.open_files, result.stdout
    assert result.returncode == 6
    _harness_fault(result)


def test_the_program_runs_as_nobody_and_leaves_no_setuid_file_or_device(tmp_path):
    result, _, workspace = _run(
        tmp_path,
        """
        import os, shutil, socket
        print("uid", os.getuid(), os.getgid(), flush=True)
        shutil.copy("/bin/true", "/workspace/suid")
        os.chmod("/workspace/suid", 0o4755)
        os.mkdir("/workspace/sgid")
        os.chmod("/workspace/sgid", 0o2775)
        with open("/workspace/sgid/file", "w") as handle:
            handle.write("x")
        os.chmod("/workspace/sgid/file", 0o6755)
        os.mkfifo("/workspace/fifo")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("/workspace/sock")
        try:
            os.mknod("/workspace/null", 0o666 | 0o020000, os.makedev(1, 3))
        except OSError as exc:
            print("mknod refused", exc.errno, flush=True)
        print("modes", oct(os.stat("/workspace/suid").st_mode))
        """,
    )
    assert result.returncode == 0, result.stderr
    assert "uid 65534 65534" in result.stdout
    assert "modes 0o104755" in result.stdout  # it did set the bit, inside
    for path in [workspace, *workspace.rglob("*")]:
        info = path.lstat()
        assert stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode), path
        assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID), (path, oct(info.st_mode))
    assert sorted(p.name for p in workspace.iterdir()) == ["sgid", "suid"]
    assert (workspace / "sgid" / "file").read_text() == "x"
    assert "cleared setuid/setgid on suid" in result.scrubbed
    assert "removed fifo" in result.scrubbed and "removed sock" in result.scrubbed


def test_the_judge_follows_no_symlink_inside_the_workspace(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "answer.json").write_text('{"x": 1}')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "out").symlink_to(host)  # a directory symlink, as a program could leave
    (workspace / "link.json").symlink_to(host / "answer.json")
    (workspace / "real").mkdir()
    (workspace / "real" / "answer.json").write_text('{"x": 1}')
    os.mkfifo(workspace / "fifo.json")
    expect = {"expect_json": {"x": 1}}
    for name in ("out/answer.json", "link.json", "fifo.json", "../host/answer.json"):
        score, passed, details = judge({**expect, "answer_file": name}, workspace)
        assert (score, passed) == (0.0, False), name
        assert details["reason"].endswith("is missing"), details
    assert judge({**expect, "answer_file": "real/answer.json"}, workspace)[1] is True


def test_without_a_cgroup_of_ours_the_mechanism_says_rlimits_only(tmp_path, monkeypatch):
    monkeypatch.setattr(bounds, "CGROUP_ROOT", tmp_path)  # a host with no cgroup file system
    assert bounds.find_layout() is None and bounds.Scope.create(LIMITS) is None
    said = bounds.mechanism(LIMITS)
    assert said.startswith("rlimits only"), said
    assert ("as root the process limit does not bind" in said) == (os.geteuid() == 0)
