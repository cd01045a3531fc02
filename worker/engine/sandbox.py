"""Run untrusted (model-written) Python in a locked-down child process.

Layers, each of which must fail on its own for harm to happen:

1. An AST policy rejects imports outside a small safe list, dangerous builtins (``__import__``,
   ``eval``, ``exec``, ``open``, ``getattr``…) and private or dunder attribute access.
2. The child runs ``python -I -S -B`` in an empty temp dir with a cleared environment, reduced
   builtins and a guarded ``__import__`` (the same safe list), so a policy gap still cannot
   import ``os`` or ``socket``. Before the model's code runs, an audit hook (PEP 578, which
   cannot be removed once added) refuses new imports outside the safe list, file access outside
   the temp dir and the standard library, and the process, socket and ctypes events, so even an
   object-graph escape (``().__class__.__base__.__subclasses__()`` back to ``os``) reaches
   nothing it can use.
3. POSIX rlimits on CPU, address space, file size, open files and processes, a wall-clock
   timeout that kills the whole process group, and, where the OS allows it, a fresh network
   namespace (``unshare -n``) with no interfaces but a down loopback. Run as root, the child also
   drops to ``nobody`` because root ignores the process-count limit.

This is defence in depth for a single-user worker; a public multi-tenant worker should also run
the engine in a disposable VM or container.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import pwd
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SAFE_MODULES = frozenset(
    {
        "collections",
        "csv",
        "dataclasses",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "json",
        "math",
        "re",
        "statistics",
        "string",
        "typing",
        "bisect",
        "datetime",
        "textwrap",
        "operator",
        "copy",
        "random",
    }
)

FORBIDDEN_NAMES = frozenset(
    {
        "__import__",
        "__builtins__",
        "__loader__",
        "__spec__",
        "breakpoint",
        "compile",
        "delattr",
        "dir",
        "eval",
        "exec",
        "getattr",
        "globals",
        "help",
        "input",
        "locals",
        "memoryview",
        "open",
        "os",
        "pathlib",
        "setattr",
        "socket",
        "subprocess",
        "sys",
        "vars",
        "importlib",
        "ctypes",
        "builtins",
    }
)
FORBIDDEN_ATTRS = frozenset(
    {"builtins", "ctypes", "modules", "os", "pathlib", "socket", "subprocess", "sys", "system"}
    # Frame and code objects lead back to the trusted wrapper's globals and the real builtins.
    | {"gi_frame", "cr_frame", "ag_frame", "tb_frame", "f_back", "f_globals", "f_locals"}
    | {"f_builtins", "gi_code", "f_code", "co_consts"}
)
# Dunder names a normal program reads; everything else starting with "__" is a likely escape.
ALLOWED_DUNDER_NAMES = frozenset({"__name__", "__doc__"})

_SAFE_BUILTIN_WORDS = (
    "abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict divmod "
    "enumerate filter float format frozenset hash hex id int isinstance issubclass iter len list "
    "map max min next object oct ord pow print property range repr reversed round set slice "
    "sorted staticmethod str sum super tuple type zip NotImplemented Ellipsis None True False "
    "Exception BaseException ArithmeticError AssertionError AttributeError IndexError KeyError "
    "LookupError NameError NotImplementedError OverflowError RecursionError RuntimeError "
    "StopIteration TypeError ValueError ZeroDivisionError ImportError MemoryError"
)
SAFE_BUILTINS = _SAFE_BUILTIN_WORDS.split()

MAX_VIOLATIONS = 5
OUTPUT_LIMIT = 64 * 1024


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
    """What happened: ``status`` is the one-word verdict the verifiers branch on."""

    # ok | error | policy_rejected | timeout | cpu_limit | memory_limit | output_limit | killed
    status: str
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_ms: float = 0.0
    violations: list[str] = field(default_factory=list)
    network_isolated: bool = False
    isolation: str = ""
    tests: dict | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Policy(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[str] = []

    def _flag(self, node: ast.AST, message: str) -> None:
        self.violations.append(f"line {getattr(node, 'lineno', '?')}: {message}")

    def _check_module(self, node: ast.AST, name: str | None, level: int = 0) -> None:
        if level:
            self._flag(node, "relative imports are not allowed")
        elif not name or name.split(".")[0] not in SAFE_MODULES:
            self._flag(node, f"import of {name!r} is not allowed")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._check_module(node, node.module, node.level)
        for alias in node.names:
            if alias.name.startswith("_") or alias.name == "*":
                self._flag(node, f"importing {alias.name!r} is not allowed")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in FORBIDDEN_NAMES:
            self._flag(node, f"use of {name!r} is not allowed")
        elif name.startswith("__") and name not in ALLOWED_DUNDER_NAMES:
            self._flag(node, f"use of dunder name {name!r} is not allowed")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        own = isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}
        if attr in FORBIDDEN_ATTRS:
            self._flag(node, f"attribute {attr!r} is not allowed")
        elif attr.startswith("__") or (attr.startswith("_") and not own):
            # Dunder attributes (__class__, __subclasses__, __globals__) are the classic way
            # from any object back to the real builtins.
            self._flag(node, f"private attribute {attr!r} is not allowed")
        self.generic_visit(node)


def check_policy(code: str) -> list[str]:
    """Policy violations in ``code`` (the first few), or a syntax error; empty means allowed."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"syntax error: line {exc.lineno}: {exc.msg}"]
    policy = _Policy()
    policy.visit(tree)
    return policy.violations[:MAX_VIOLATIONS]


_WRAPPER = """\
import builtins as _b
import json as _json
import os as _os
import sys as _sys

_write = _sys.stdout.write
_flush = _sys.stdout.flush
_SAFE = frozenset({modules!r})
_real_import = _b.__import__

# Load the safe modules (and what they import lazily) now, so the audit hook below can refuse
# every later import that is not a submodule of one of them.
for _name in sorted(_SAFE) + ["collections.abc", "_strptime", "encodings.latin_1"]:
    _real_import(_name)
_STDLIB = tuple(
    _os.path.realpath(p) + _os.sep
    for p in {{_sys.prefix, _sys.base_prefix, _sys.exec_prefix, _os.path.dirname(_os.__file__)}}
)
_WORKDIR = _os.path.realpath(_os.getcwd()) + _os.sep
_BLOCKED = (
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
    "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.symlink",
    "os.link", "os.truncate", "os.putenv", "os.unsetenv", "os.chdir", "os.listdir",
    "os.scandir", "os.startfile", "subprocess.", "_posixsubprocess.", "socket.", "ctypes.",
    "shutil.", "sys._getframe", "sys.settrace", "sys.setprofile", "pty.", "fcntl.", "mmap.",
    "resource.", "signal.", "gc.", "urllib.", "http.", "ftplib.", "smtplib.",
    "webbrowser.", "glob.", "pathlib.", "tempfile.", "code.", "cpython.remote",
)


def _audit(event, args):
    # The runtime layer that holds when the AST policy has a gap: the C implementations of
    # os.system, fork, exec, socket, open and import all raise these events first.
    if event == "import":
        top = args[0].partition(".")[0]
        if top not in _SAFE and top != "encodings":
            raise ImportError("sandbox: import of %r blocked" % (args[0],))
    elif event == "open":
        path, mode, flags = args
        if isinstance(path, int):
            return
        real = _os.path.realpath(path if isinstance(path, str) else _os.fsdecode(path))
        if mode is None:  # os.open: only flags
            writes = bool(flags & (_os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_TRUNC))
        else:
            writes = any(c in mode for c in "wax+")
        inside = real.startswith(_WORKDIR)
        if writes and not inside or not writes and not (inside or real.startswith(_STDLIB)):
            raise PermissionError("sandbox: open(%r) blocked" % (path,))
    elif event.startswith(_BLOCKED):
        raise PermissionError("sandbox: %s blocked" % event)


_sys.addaudithook(_audit)
del _name


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    # C modules import their helpers through the caller's builtins: datetime needs _strptime.
    if level or name.split(".")[0] not in _SAFE and name != "_strptime":
        raise ImportError("import of %r is not allowed in the sandbox" % (name,))
    return _real_import(name, globals, locals, fromlist, level)


_env = {{n: getattr(_b, n) for n in {builtins!r} if hasattr(_b, n)}}
_env["__import__"] = _guarded_import
_env["__build_class__"] = _b.__build_class__
_ns = {{"__builtins__": _env, "__name__": "__main__"}}
_TESTS = {tests!r}
if _TESTS is None:
    exec(compile({code!r}, "solution.py", "exec"), _ns)
else:
    _report = {{"loaded": True, "passed": 0, "total": len(_TESTS), "failures": []}}
    try:
        exec(compile({code!r}, "solution.py", "exec"), _ns)
    except BaseException as exc:
        _report["loaded"] = False
        _report["failures"].append("load: %s: %s" % (type(exc).__name__, str(exc)[:200]))
    else:
        for _i, _test in enumerate(_TESTS):
            try:
                exec(compile(_test, "test_%d" % _i, "exec"), dict(_ns))
                _report["passed"] += 1
            except BaseException as exc:
                _report["failures"].append("%d: %s: %s" % (_i, type(exc).__name__, str(exc)[:200]))
    _flush()
    _write("\\n" + {marker!r} + _json.dumps(_report) + "\\n")
    _flush()
"""


def _drop_user() -> tuple[int, int] | None:
    """(uid, gid) of ``nobody`` when running as root, else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _interpreters() -> list[str]:
    found = [os.path.realpath(sys.executable)]
    for name in ("python3", f"python3.{sys.version_info.minor}"):
        path = shutil.which(name, path=os.defpath)
        if path and os.path.realpath(path) not in found:
            found.append(os.path.realpath(path))
    return found


def _probe(command: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(command, capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    return done.returncode == 0, done.stderr.decode(errors="replace").strip()[:200]


@cache
def sandbox_setup() -> tuple[list[str], str, bool, str]:
    """(command prefix, interpreter, network isolated?, note), probed once per process.

    Prefers dropping to ``nobody`` in a fresh network namespace; the interpreter must then be
    one ``nobody`` can execute (a pyenv build under /root is not), so the system python3 is
    tried next. Each fallback is named in the note, which every result carries.
    """
    pythons = _interpreters()
    unshare = shutil.which("unshare")
    if not unshare:
        return [], pythons[0], False, "no unshare binary: network NOT isolated"
    drop = _drop_user()
    if drop:
        prefix = [unshare, "-n", "--setuid", str(drop[0]), "--setgid", str(drop[1])]
        for python in pythons:
            if _probe([*prefix, python, "-I", "-S", "-c", "pass"])[0]:
                return prefix, python, True, "own network namespace (unshare -n), as nobody"
        prefix = [unshare, "-n"]
        note = "own network namespace (unshare -n), as root: process limit NOT enforced"
    else:
        prefix = [unshare, "-r", "-n"]
        note = "own network namespace (unshare -r -n, user namespace)"
    ok, reason = _probe([*prefix, pythons[0], "-I", "-S", "-c", "pass"])
    if ok:
        return prefix, pythons[0], True, note
    return (
        [],
        pythons[0],
        False,
        f"network namespaces not permitted ({reason}): network NOT isolated",
    )


def _limiter(limits: Limits):
    def apply() -> None:
        os.setsid()  # own process group: the timeout kills every descendant at once
        mb = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (mb, mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_kb * 1024,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _read(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(OUTPUT_LIMIT).decode("utf-8", errors="replace")


def _split_report(stdout: str, marker: str) -> tuple[dict | None, str]:
    """The test report (if the wrapper got to print it) and the solution's own output."""
    at = stdout.rfind(marker)
    if at < 0:
        return None, stdout
    line = stdout[at + len(marker) :].splitlines()[0] if stdout[at + len(marker) :] else ""
    try:
        report = json.loads(line)
    except ValueError:
        return None, stdout
    return report, stdout[:at].rstrip("\n")


def _status(returncode: int, stderr: str) -> str:
    if returncode == 0:
        return "ok"
    if returncode == -signal.SIGXCPU:
        return "cpu_limit"
    if returncode == -signal.SIGXFSZ:
        return "output_limit"
    if returncode < 0:
        return "killed"
    if "MemoryError" in stderr:
        return "memory_limit"
    if "File too large" in stderr:
        # CPython ignores SIGXFSZ, so the file-size limit surfaces as EFBIG on write.
        return "output_limit"
    return "error"


def run_python(
    code: str,
    *,
    tests: list[str] | None = None,
    limits: Limits | None = None,
    enforce_policy: bool = True,
) -> SandboxResult:
    """Check ``code`` against the policy, then run it in the sandbox and report what happened.

    With ``tests`` (trusted source snippets, typically ``assert`` lines), the solution is loaded
    into a namespace and each snippet runs against a copy of it; ``result.tests`` then holds
    ``{"loaded", "passed", "total", "failures"}``, reported on a line tagged with a random marker
    the solution cannot know, so printed output cannot fake a pass.
    ``enforce_policy=False`` exists only so tests can prove the runtime layers hold on their own.
    """
    limits = limits or Limits()
    marker = f"@@benchloop-{secrets.token_hex(16)}@@"
    prefix, python, isolated, note = sandbox_setup()
    if enforce_policy:
        violations = check_policy(code)
        if violations:
            return SandboxResult(
                "policy_rejected", violations=violations, network_isolated=isolated, isolation=note
            )
    workdir = Path(tempfile.mkdtemp(prefix="benchloop-sbx-"))
    outdir = Path(tempfile.mkdtemp(prefix="benchloop-sbx-out-"))
    try:
        script = workdir / "main.py"
        script.write_text(
            _WRAPPER.format(
                modules=sorted(SAFE_MODULES),
                builtins=SAFE_BUILTINS,
                code=code,
                tests=tests,
                marker=marker,
            )
        )
        drop = _drop_user() if "--setuid" in prefix else None
        if drop:
            os.chown(workdir, *drop)
            os.chown(script, *drop)
        env = {"PATH": os.defpath, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        out_path, err_path = outdir / "stdout", outdir / "stderr"
        started = time.perf_counter()
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [*prefix, python, "-I", "-S", "-B", str(script)],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                preexec_fn=_limiter(limits),  # noqa: PLW1509 - rlimits must be set in the child
                close_fds=True,
            )
            try:
                proc.wait(timeout=limits.wall_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            # Leftover descendants (a fork that escaped the limits) die with the group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        wall_ms = round((time.perf_counter() - started) * 1000, 1)
        stdout, stderr = _read(out_path), _read(err_path)
        status = "timeout" if timed_out else _status(proc.returncode, stderr)
        report, stdout = _split_report(stdout, marker)
        return SandboxResult(
            status,
            tests=report,
            returncode=proc.returncode,
            stdout=stdout,
            stderr=stderr,
            wall_ms=wall_ms,
            network_isolated=isolated,
            isolation=note,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(outdir, ignore_errors=True)
