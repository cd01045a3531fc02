"""Start the child in its cage, feed it one job, bound what comes back, kill it on time."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import BinaryIO

from . import isolation as iso
from . import seccomp as filters
from .checks import REPORT_LIMIT, Check, Outcome, judge, read_report
from .policy import SAFE_BUILTINS, SAFE_MODULES, check_policy

OUTPUT_LIMIT = 64 * 1024
CHILD_SOURCE = Path(__file__).with_name("_child.py").read_text()
EXIT_SETUP = 70  # _child.EXIT_SETUP: the cage could not be built, nothing of the model ran
# A run failed "at" a limit when the kernel's own count reached this share of it: peak memory
# (an allocation refused by RLIMIT_AS leaves no other trace) and CPU time (the sampled account
# runs behind the limit the scheduler enforces; a process that signals itself has used none).
MEMORY_EVIDENCE = 0.5
CPU_EVIDENCE = 0.5


@dataclass
class Limits:
    """Resource limits for one sandboxed run."""

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 512
    file_kb: int = 1024
    open_files: int = 32
    processes: int = 16


@dataclass
class SandboxResult:
    """What happened: ``status`` is the one-word verdict the verifiers branch on.

    ``outcomes`` (one per check, judged by this process) is None when no checks were asked for
    or nothing ran; ``loaded`` says whether the model's code got through its own top level.
    """

    # ok | error | policy_rejected | timeout | cpu_limit | memory_limit | output_limit | killed
    # | sandbox_unavailable | sandbox_error
    status: str
    isolation: dict = field(default_factory=dict)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_ms: float = 0.0
    violations: list[str] = field(default_factory=list)
    loaded: bool | None = None
    outcomes: list[Outcome] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def passed(self) -> int:
        return sum(1 for o in self.outcomes or [] if o.passed)


def _probe(candidate: iso.Isolation) -> str:
    """Empty when ``candidate`` really runs a check end to end; else why not."""
    check = Check("6 * 7", expect=("int", 42))
    result = _execute(candidate, "", [check], Limits(wall_s=15, cpu_s=5))
    if result.outcomes and result.outcomes[0].passed:
        return ""
    return f"{result.status}: {(result.stderr.strip() or 'no output')[-200:]}"


@cache
def os_sandbox() -> iso.Isolation:
    """The best OS sandbox that works here (probed once per process), or why there is none."""
    program = filters.program()
    candidates, reasons = iso.os_candidates(seccomp=program is not None)
    for candidate in candidates:
        failure = _probe(candidate)
        if not failure:
            return candidate
        who = f"uid {candidate.user[0]}" if candidate.user else "this user"
        reasons.append(f"{candidate.python} as {who}: {failure}")
    reason = "; ".join(reasons) or "no way to build an OS sandbox"
    return iso.Isolation(iso.LEVEL_NONE, "no OS sandbox", reason=reason)


@cache
def _weak() -> iso.Isolation:
    with_filter = iso.weak(seccomp=filters.program() is not None)
    if with_filter.seccomp and not _probe(with_filter):
        return with_filter
    return iso.weak(seccomp=False)


def current_isolation() -> iso.Isolation:
    """What a run would get now: the OS sandbox, else the opted-in weak mode, else a refusal."""
    sandbox = os_sandbox()
    if sandbox.usable or not iso.opted_in():
        return sandbox
    return _weak()


def _read(path: Path, limit: int) -> bytes:
    with path.open("rb") as handle:
        return handle.read(limit)


def _kill_namespace(info_fd: int, bwrap_pid: int) -> bool:
    """SIGKILL the sandbox's PID-namespace init, which takes the whole namespace with it."""
    if info_fd < 0:
        return False
    os.set_blocking(info_fd, False)
    try:
        pid = json.loads(os.read(info_fd, 4096))["child-pid"]
        if type(pid) is not int or pid <= 1:
            return False
        # Only ever bwrap's own child: the pid comes through a pipe, and is checked as such.
        with open(f"/proc/{pid}/stat", "rb") as handle:
            parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False  # bwrap never got as far as starting the namespace
    if parent != bwrap_pid:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@dataclass(frozen=True)
class Usage:
    """How the caged process ended, as its reaper (our code, which runs nothing else) heard it
    from the kernel: ``code`` is the exit status, or -N for a death by signal N."""

    code: int
    cpu_s: float
    peak_rss_mb: float


def read_usage(fd: int) -> Usage | None:
    """The reaper's one message on ``fd`` (read once the cage is gone); None when there is none
    (the reaper was killed, or the cage never got that far)."""
    os.set_blocking(fd, False)
    try:
        status, cpu, peak_kb = json.loads(os.read(fd, 4096))
        return Usage(os.waitstatus_to_exitcode(int(status)), float(cpu), int(peak_kb) / 1024)
    except (OSError, ValueError, TypeError):
        return None


def wait_caged(proc: subprocess.Popen, info_fd: int, wall_s: float) -> bool:
    """Wait for the caged process up to ``wall_s``; on timeout kill its whole PID namespace.
    Whether it timed out. Its process group is killed either way (the weak mode's children)."""
    timed_out = False
    try:
        proc.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        if _kill_namespace(info_fd, proc.pid):
            # bwrap exits once it has reaped the init, and the kernel lets the init go only
            # after every other process in the namespace is gone.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    else:
        _await_namespace_end(info_fd)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return timed_out


def _await_namespace_end(info_fd: int, limit_s: float = 5.0) -> None:
    """bwrap exits as soon as its child has, while the namespace's init may still be killing
    the rest (a detached grandchild): wait until that init, a bwrap process, is gone."""
    if info_fd < 0:
        return
    os.set_blocking(info_fd, False)
    try:
        pid = json.loads(os.read(info_fd, 4096))["child-pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if type(pid) is not int or pid <= 1:
        return
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                name, _, rest = handle.read().partition(b") ")
            if not name.endswith(b"(bwrap") or rest[:1] in (b"Z", b"X"):
                return  # dead (a zombie has no processes left), or the number reused
        except OSError:
            return
        time.sleep(0.01)


def _status(usage: Usage | None, flooded: bool, limits: Limits) -> str:
    """The verdict from this process's own evidence: the reaper's report of what the kernel
    said (exit status or signal, CPU time, peak memory) and the size of the output files.
    Never the child's words: a child that prints "MemoryError" and exits 3 is an ``error``."""
    if usage is None:
        # No word from the reaper: the cage never got that far (an "error" if the model's code
        # had started, and killed the reaper: then nothing trustworthy is left to say).
        return "sandbox_error"
    if usage.code == 0:
        return "ok"
    if usage.code == EXIT_SETUP:
        return "sandbox_error"
    if usage.code == -signal.SIGXCPU and usage.cpu_s >= CPU_EVIDENCE * limits.cpu_s:
        return "cpu_limit"
    if flooded:
        # CPython ignores SIGXFSZ, so the file-size limit surfaces as EFBIG on write; a full
        # stderr cannot even say so, hence the size check.
        return "output_limit"
    if usage.code < 0:
        return "killed"
    if usage.peak_rss_mb >= MEMORY_EVIDENCE * limits.memory_mb:
        return "memory_limit"
    return "error"


def _spawn(cage: iso.Isolation, job: dict, files: dict, workdir: Path, wall_s: float) -> tuple:
    """Run the child to completion or to ``wall_s``; (returncode, timed out?, wall ms, the
    reaper's report)."""
    command = [*cage.prefix, cage.python, "-I", "-S", "-B", "-c", CHILD_SOURCE]
    info_read, info_write = os.pipe() if cage.prefix else (-1, -1)
    if cage.prefix:
        # bwrap reports its PID namespace's init here; killing that init on timeout takes
        # every process in the namespace with it before bwrap itself exits.
        command[1:1] = ["--info-fd", str(info_write)]
    status_read, status_write = os.pipe()
    job = {**job, "report_fd": files["report"].fileno(), "status_fd": status_write}
    files["job"].write(json.dumps(job).encode())
    files["job"].flush()
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            command,
            stdin=files["job_read"],  # read-only: the child cannot write back to the host
            stdout=files["stdout"],
            stderr=files["stderr"],
            pass_fds=tuple(fd for fd in (job["report_fd"], status_write, info_write) if fd >= 0),
            cwd="/" if cage.prefix else workdir,
            env={} if cage.prefix else {"LANG": "C.UTF-8", "HOME": str(workdir)},
            start_new_session=True,  # one process group to kill in every mode
            user=cage.user[0] if cage.user else None,
            group=cage.user[1] if cage.user else None,
            extra_groups=[] if cage.user else None,
        )
        for fd in (info_write, status_write):
            if fd >= 0:
                os.close(fd)
        info_write = status_write = -1
        timed_out = wait_caged(proc, info_read, wall_s)
        usage = read_usage(status_read)
    finally:
        for fd in (info_read, info_write, status_read, status_write):
            if fd >= 0:
                os.close(fd)
    return proc.returncode, timed_out, round((time.perf_counter() - started) * 1000, 1), usage


def _execute(
    cage: iso.Isolation, code: str, checks: list[Check] | None, limits: Limits
) -> SandboxResult:
    program = filters.program() if cage.seccomp else None
    job = {
        "code": code,
        "checks": [c.probe() for c in checks or []],
        "modules": sorted(SAFE_MODULES),
        "builtins": SAFE_BUILTINS,
        "limits": limits.__dict__,
        "seccomp": program.hex() if program else None,
    }
    with tempfile.TemporaryDirectory(prefix="benchloop-sbx-") as tmp:
        folder = Path(tmp)
        workdir = folder / "work"  # the weak mode's working directory; bwrap has its own tmpfs
        workdir.mkdir()
        with contextlib.ExitStack() as stack:
            files: dict[str, BinaryIO] = {
                name: stack.enter_context((folder / name).open("w+b"))
                for name in ("job", "stdout", "stderr", "report")
            }
            files["job_read"] = stack.enter_context((folder / "job").open("rb"))
            returncode, timed_out, wall_ms, usage = _spawn(cage, job, files, workdir, limits.wall_s)
            sizes = [os.fstat(files[name].fileno()).st_size for name in ("stdout", "stderr")]
        stdout = _read(folder / "stdout", OUTPUT_LIMIT).decode("utf-8", errors="replace")
        stderr = _read(folder / "stderr", OUTPUT_LIMIT).decode("utf-8", errors="replace")
        raw_report = _read(folder / "report", REPORT_LIMIT)
    load, entries = read_report(raw_report, len(checks or []))
    flooded = max(sizes) >= limits.file_kb * 1024
    status = "timeout" if timed_out else _status(usage, flooded, limits)
    if status == "sandbox_error" and load is not None:
        status = "error"  # the model's code had started: exit code 70 was its own
    result = SandboxResult(
        status,
        isolation=cage.as_dict(),
        returncode=usage.code if usage else returncode,  # the child's, not bwrap's
        stdout=stdout,
        stderr=stderr,
        wall_ms=wall_ms,
        loaded=bool(load and load.get("load") == "ok"),
    )
    if checks is not None and status != "sandbox_error":
        result.outcomes = [judge(check, entries.get(i)) for i, check in enumerate(checks)]
    return result


def run_python(
    code: str,
    *,
    checks: list[Check] | None = None,
    limits: Limits | None = None,
    enforce_policy: bool = True,
    seccomp: bool = True,
) -> SandboxResult:
    """Check ``code`` against the policy, run it caged, and judge ``checks`` against it.

    The child sees each check's code, never its expectation; ``result.outcomes`` is this
    process's judgement of what the child reported. Where no OS sandbox exists and the user has
    not opted in, nothing runs and the status is ``sandbox_unavailable``.
    ``enforce_policy=False`` and ``seccomp=False`` exist only so tests can prove that each
    remaining layer holds on its own.
    """
    limits = limits or Limits()
    cage = current_isolation()
    if enforce_policy:
        violations = check_policy(code)
        if violations:
            return SandboxResult("policy_rejected", isolation=cage.as_dict(), violations=violations)
    if not cage.usable:
        return SandboxResult("sandbox_unavailable", isolation=cage.as_dict())
    if not seccomp:
        cage = replace(cage, seccomp=False, detail=f"{cage.detail} (seccomp OFF for a test)")
    return _execute(cage, code, checks, limits)
