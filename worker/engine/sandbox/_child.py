"""The sandboxed child: one job on stdin, the model's code, one report line per check.

Runs as ``python -I -S -B -c <this file's text>`` inside the sandbox, where the project is not
in view, so it imports nothing of ours. It is trusted only until the model's code starts: it
sets the resource limits, loads the seccomp filter the parent built, and keeps its own
references to the report descriptor. After that the model may patch anything here; the
parent treats every report line as a claim to judge, never as a verdict.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import resource
import sys

# The report's descriptor in the child, whatever number it had in the parent (a long-lived
# worker may have hundreds open): the model's code meets the same layout on every run.
REPORT_FD = 3
EXIT_SETUP = 70  # the sandbox itself could not be set up; the parent says so, not "error"
VALUE_LIMIT = 64 * 1024
MAX_DEPTH = 40
MAX_ITEMS = 10_000


def _limits(limits: dict) -> None:
    cpu = limits["cpu_s"]
    memory = limits["memory_mb"] * 1024 * 1024
    for name, value in (
        ("RLIMIT_CPU", (cpu, cpu + 1)),
        ("RLIMIT_AS", (memory, memory)),
        ("RLIMIT_FSIZE", (limits["file_kb"] * 1024,) * 2),
        ("RLIMIT_NOFILE", (limits["open_files"],) * 2),
        ("RLIMIT_NPROC", (limits["processes"],) * 2),
        ("RLIMIT_CORE", (0, 0)),
    ):
        resource.setrlimit(getattr(resource, name), value)


def _reaper(status_fd: int) -> None:
    """Fork: the parent half waits for the child half (which goes on to run the model's code)
    and writes what the kernel says of it, its wait status, CPU time and peak memory, to
    ``status_fd``, which the child half closes. The host reads its verdict from that."""
    pid = os.fork()
    if pid == 0:
        os.close(status_fd)
        return
    os.close(REPORT_FD)
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    cpu = usage.ru_utime + usage.ru_stime
    os.write(status_fd, json.dumps([status, cpu, usage.ru_maxrss]).encode())
    os._exit(0)


def _seccomp(program: bytes) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    ulong = ctypes.c_ulong
    # PR_SET_NO_NEW_PRIVS = 38, then PR_SET_SECCOMP = 22 with SECCOMP_MODE_FILTER = 2.
    if libc.prctl(38, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(22, ulong(2), ctypes.byref(fprog), ulong(0), ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


class _Unencodable(Exception):
    pass


def _encode(value, depth, budget):
    """A value as ``[tag, payload]`` for exact built-in types only; anything else is "other".

    Exact types (``type(v) is int``), so an object whose ``__eq__`` always says yes, or a str
    subclass with a doctored ``__str__``, is reported as what it is.
    """
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise _Unencodable("value too large or too deeply nested")
    kind = type(value)
    if value is None:
        return ["none", None]
    if kind is bool:
        return ["bool", value]
    if kind is int:
        return ["int", str(value)]
    if kind is float:
        return ["float", value.hex()]
    if kind is str:
        return ["str", value]
    if kind is bytes:
        return ["bytes", value.hex()]
    if kind in (list, tuple, set, frozenset):
        return [kind.__name__, [_encode(item, depth + 1, budget) for item in value]]
    if kind is dict:
        items = value.items()
        return [
            "dict",
            [[_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)] for k, v in items],
        ]
    return ["other", str(kind.__name__)[:80]]


def _describe(exc):
    try:
        message = str(exc)[:200]
    except BaseException:
        message = "(unprintable)"
    try:
        names = [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__][:12]
    except BaseException:
        names = ["(unknown)"]
    return names, message


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    report_fd = job["report_fd"]
    if report_fd != REPORT_FD:
        os.dup2(report_fd, REPORT_FD, inheritable=False)
        os.close(report_fd)
        report_fd = REPORT_FD
    write = os.write
    dumps = json.dumps

    def emit(entry: dict) -> None:
        send(dumps(entry))

    def send(line: str) -> None:
        # A full report file loses lines; the parent counts missing lines as failures.
        with contextlib.suppress(OSError):
            write(report_fd, (line + "\n").encode())

    safe = frozenset(job["modules"])
    real_import = builtins.__import__
    for name in sorted(safe) + ["collections.abc", "_strptime"]:
        real_import(name)
    if job.get("status_fd") is not None:
        _reaper(job["status_fd"])
    try:
        _limits(job["limits"])
        if job["seccomp"]:
            _seccomp(bytes.fromhex(job["seccomp"]))
    except (OSError, ValueError, ImportError, AttributeError) as exc:
        sys.stderr.write(f"sandbox: could not set up the child: {exc}\n")
        sys.stderr.flush()
        os._exit(EXIT_SETUP)

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        # C modules import their helpers through the caller's builtins: datetime needs _strptime.
        if level or name.partition(".")[0] not in safe and name != "_strptime":
            raise ImportError(f"import of {name!r} is not allowed in the sandbox")
        return real_import(name, globals, locals, fromlist, level)

    env = {n: getattr(builtins, n) for n in job["builtins"] if hasattr(builtins, n)}
    env["__import__"] = guarded_import
    env["__build_class__"] = builtins.__build_class__
    namespace = {"__builtins__": env, "__name__": "__main__"}
    try:
        exec(compile(job["code"], "solution.py", "exec"), namespace)
    except BaseException as exc:
        names, message = _describe(exc)
        emit({"load": "error", "raised": names, "message": message})
        raise
    emit({"load": "ok"})
    for index, check in enumerate(job["checks"]):
        scope = dict(namespace)
        try:
            if check["setup"]:
                exec(compile(check["setup"], f"check_{index}", "exec"), scope)
        except BaseException as exc:
            names, message = _describe(exc)
            emit({"i": index, "setup_raised": names, "message": message})
            continue
        try:
            value = eval(compile(check["expr"], f"check_{index}", "eval"), scope)
        except BaseException as exc:
            names, message = _describe(exc)
            emit({"i": index, "raised": names, "message": message})
            continue
        try:
            encoded = dumps(_encode(value, 0, [MAX_ITEMS]))
            if len(encoded) > VALUE_LIMIT:
                raise _Unencodable("value too large")
        except BaseException as exc:  # includes RecursionError and the model's own exceptions
            emit({"i": index, "unreported": _describe(exc)[1]})
            continue
        send(f'{{"i": {index}, "value": {encoded}}}')


main()
