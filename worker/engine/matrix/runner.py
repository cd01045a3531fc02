"""Run one real harness program on one task, caged, through the recording proxy.

``run_program`` is the only entry point: it asks the adapter for the command line, starts the
recording proxy in front of the endpoint, starts the program in its cage (``cage.py``) within its
bounds (``bounds.py``), kills the whole namespace on timeout, scrubs the workspace, and returns
what the parent saw: exit status, bounded output, the proxy's request records and transcript, the
files the program left in its HOME, what the cage stopped (``denials``), read from the kernel's
own error messages, and the limits the run hit (``limit_hits``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ..sandbox.runner import CPU_EVIDENCE, Usage, read_usage, wait_caged
from . import bounds, cage
from .cage import HarnessNotInstalled, harness_prefix
from .proxy import RecordingProxy, Rewrite, socket_dir
from .spec import Adapter, CageLimits, Endpoint, HarnessTask, ProgramResult

__all__ = ["HarnessNotInstalled", "find_denials", "harness_prefix", "run_program"]

OUTPUT_LIMIT = 64 * 1024  # of stdout and of stderr, the tail kept
HOME_FILE_LIMIT = 1024 * 1024  # one file read back from HOME
HOME_TOTAL_LIMIT = 4 * 1024 * 1024
MAX_DENIALS = 20

# The kernel's (and libc's, and the usual tools') words for what the cage stops.
_NETWORK = (
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "Could not resolve host",
    "Failed to resolve",
    "Connection refused",  # loopback is all there is: anything but the forwarder refuses
    "Failed to connect to",  # curl
    "Couldn't connect to server",
)
_READ_ONLY = ("Read-only file system",)
_PERMISSION = "Permission denied"
_PATH = re.compile(r"(?<![\w.])(/[\w.\-+@/]+)")
_INSIDE = (cage.WORKSPACE, cage.HOME, "/tmp")


def _message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def _lines(text: str) -> list[str]:
    # Tool outputs are sometimes fed back JSON-encoded: their newlines are literal "\n".
    return [line.strip() for line in re.split(r"\r?\n|\\n", text) if line.strip()]


def _denial(line: str) -> str:
    shown = line[:240]
    if any(word in line for word in _NETWORK):
        return f"network blocked: {shown}"
    if any(word in line for word in _READ_ONLY):
        return f"write outside the workspace blocked: {shown}"
    if _PERMISSION in line:
        paths = _PATH.findall(line)
        if paths and not any(
            p == root or p.startswith(root + "/") for p in paths for root in _INSIDE
        ):
            return f"access outside the workspace blocked: {shown}"
    return ""


def find_denials(stdout: str, stderr: str, transcript: list[dict]) -> list[str]:
    """What the cage stopped, in words, from the program's output and the tool outputs it fed
    back to the model (the model's own words are not evidence, so they are left out)."""
    said = {
        line
        for body in transcript
        for message in body.get("messages", [])
        if isinstance(message, dict) and message.get("role") == "assistant"
        for line in _lines(_message_text(message))
    }
    fed_back = [
        _message_text(message)
        for body in transcript
        for message in body.get("messages", [])
        if isinstance(message, dict) and message.get("role") in ("user", "tool", "function")
    ]
    found: list[str] = []
    for text in (stderr, stdout, *fed_back):
        for line in _lines(text):
            if line in said:
                continue
            denial = _denial(line)
            if denial and denial not in found:
                found.append(denial)
                if len(found) >= MAX_DENIALS:
                    return found
    return found


def _write_home(home: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = PurePosixPath(rel)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"home file outside HOME: {rel!r}")
        target = home / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def _read_home(home: Path) -> dict[str, str]:
    """The text files the program left in HOME (bounded), by HOME-relative path."""
    out: dict[str, str] = {}
    total = 0
    for path in sorted(home.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        if size > HOME_FILE_LIMIT or total + size > HOME_TOTAL_LIMIT:
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary (caches, databases): not evidence anyone reads
        out[str(path.relative_to(home))] = data.decode("utf-8", errors="replace")
        total += size
    return out


def _tail(path: Path) -> str:
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(max(0, size - OUTPUT_LIMIT))
        data = handle.read(OUTPUT_LIMIT)
    prefix = f"[... {size - OUTPUT_LIMIT} bytes left out ...]\n" if size > OUTPUT_LIMIT else ""
    return prefix + data.decode("utf-8", errors="replace")


def _spawn(
    command_for: Callable[[int, int], list[str]], stdout: Path, stderr: Path, wall_s: float
) -> tuple[int, bool, float, Usage | None]:
    """Run the cage to completion or to ``wall_s``, ``command_for(info_fd, status_fd)``: (the
    program's exit status, timed out?, wall ms, what the launcher heard from the kernel)."""
    info_read, info_write = os.pipe()
    status_read, status_write = os.pipe()
    started = time.perf_counter()
    try:
        with (
            stdout.open("wb") as out,
            stderr.open("wb") as err,
            open(os.devnull, "rb") as devnull,
        ):
            proc = subprocess.Popen(
                command_for(info_write, status_write),
                stdin=devnull,
                stdout=out,
                stderr=err,
                pass_fds=(info_write, status_write),
                start_new_session=True,
                env={"PATH": os.defpath, "LANG": "C.UTF-8"},
            )
        for fd in (info_write, status_write):
            os.close(fd)
        info_write = status_write = -1
        # Killing the PID namespace's init takes every process of the program with it.
        timed_out = wait_caged(proc, info_read, wall_s)
        usage = read_usage(status_read)
    finally:
        for fd in (info_read, info_write, status_read, status_write):
            if fd >= 0:
                os.close(fd)
    code = usage.code if usage else proc.returncode
    return code, timed_out, round((time.perf_counter() - started) * 1000, 1), usage


def _limit_hits(limits: CageLimits, usage: Usage | None, largest: int) -> list[str]:
    """The limits the run hit, from this process's evidence: the kernel's signal and CPU count
    as the launcher reaped the program, and the largest file the program left (its own words
    count for nothing)."""
    hits = []
    # SIGKILL comes a second later, at the hard limit, to a program that ignores SIGXCPU; a
    # program that signals itself has used no CPU to speak of.
    signals = (-signal.SIGXCPU, -signal.SIGKILL)
    if usage and usage.code in signals and usage.cpu_s >= CPU_EVIDENCE * limits.cpu_s:
        name = signal.Signals(-usage.code).name
        hits.append(f"CPU time limit: killed by {name} after {usage.cpu_s:.1f} s of CPU")
    if largest >= limits.file_mb * 1024 * 1024:
        hits.append(f"file size limit: a file reached {limits.file_mb} MiB")
    return hits


def run_program(
    adapter: Adapter,
    task: HarnessTask,
    workspace: Path,
    upstream_url: str,
    model: str,
    *,
    max_tokens_cap: int,
    timeout_s: float,
    rewrite: Rewrite | None = None,
    api_key: str | None = None,
    limits: CageLimits | None = None,
) -> ProgramResult:
    """Run ``adapter``'s program on ``task`` in ``workspace`` (edited in place), caged, with the
    endpoint ``upstream_url`` reachable only through the recording proxy.

    ``max_tokens_cap`` bounds every completion; ``rewrite`` changes each model request's body
    before it goes upstream (tests force the model's reply with a grammar); ``api_key`` is the
    endpoint's key, added by the proxy (the harness only holds a dummy); ``limits`` bound the
    run (default: the harness's own, ``spec.limits``). Raises ``HarnessNotInstalled`` when the
    pinned install is missing.
    """
    limits = limits or adapter.spec.limits
    install = cage.install_dir(adapter.spec)
    interpreter, interpreter_prefix = cage.base_interpreter(install)
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{cage.FORWARD_PORT}/v1", model=model)
    invocation = adapter.invocation(task, endpoint)
    workspace = Path(os.path.realpath(workspace))
    sockets = socket_dir()
    try:
        with tempfile.TemporaryDirectory(prefix="benchloop-mx-") as tmp:
            run = Path(tmp)
            plan = cage.CagePlan(
                install=install,
                interpreter=interpreter,
                interpreter_prefix=interpreter_prefix,
                workspace=workspace,
                home=run / "home",
                etc=run / "etc",
                sockets=sockets,
            )
            plan.home.mkdir()
            cage.write_etc(plan.etc)
            _write_home(plan.home, invocation.home_files)
            argv = [cage.program_path(install, invocation.argv[0]), *invocation.argv[1:]]
            env = cage.cage_env(install, invocation.env)
            proxy = RecordingProxy(
                upstream_url,
                unix_path=sockets / cage.SOCKET_NAME,
                max_tokens_cap=max_tokens_cap,
                rewrite=rewrite,
                api_key=api_key,
                read_timeout_s=timeout_s,
            )
            scope = bounds.Scope.create(limits)
            try:
                with proxy:
                    returncode, timed_out, wall_ms, usage = _spawn(
                        lambda info, status: bounds.enter_command(
                            scope, cage.bwrap_command(plan, argv, env, info, limits, status)
                        ),
                        run / "stdout",
                        run / "stderr",
                        min(timeout_s, invocation.timeout_s),
                    )
                hits = scope.hits() if scope else []
            finally:
                if scope:
                    scope.remove()
            # Nothing setuid, setgid or a device comes out of the cage into the host's view.
            scrubbed, largest = bounds.scrub(workspace)
            bounds.scrub(plan.home)
            hits += _limit_hits(limits, usage, largest)
            stdout, stderr = _tail(run / "stdout"), _tail(run / "stderr")
            transcript = proxy.transcript
            result = ProgramResult(
                returncode=returncode,
                timed_out=timed_out,
                wall_ms=wall_ms,
                stdout=stdout,
                stderr=stderr,
                requests=proxy.records,
                # What the proxy refused is the program's doing, as the cage's denials are.
                denials=(proxy.refused + find_denials(stdout, stderr, transcript))[:MAX_DENIALS],
                workspace=workspace,
                transcript=transcript,
                home_files=_read_home(plan.home),
                isolation=cage.DETAIL,
                limit_hits=hits,
                scrubbed=scrubbed,
            )
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    return result
