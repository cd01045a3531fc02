"""How the child is caged: a bubblewrap command line, or the explicit opt-in to run it weakly.

bubblewrap (``bwrap``) gives the child its own user, PID, mount, network, IPC and UTS
namespaces, works unprivileged (it needs no setuid bit where user namespaces are allowed) and as
root, and is packaged everywhere. The child's file system is a read-only view of the system's
shared libraries and the interpreter's standard library only (site-packages hidden, no project
tree, no /etc beyond the loader cache, no /proc, no /home or /root), a minimal /dev and a small
private tmpfs as its working directory. Run as root, the worker starts bwrap as ``nobody`` when
that user can run the interpreter, so even a kernel escape from the namespaces lands
unprivileged; otherwise the sandbox's uid maps to root, with every capability dropped.

Without bwrap or user namespaces (macOS, a locked-down container) there is no OS sandbox, and
model code is refused unless ``BENCHLOOP_ALLOW_WEAK_SANDBOX=1`` says to run it anyway with only
the Python policy, the seccomp filter (where Linux has one) and resource limits.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

OPT_IN_ENV = "BENCHLOOP_ALLOW_WEAK_SANDBOX"
LEVEL_OS = "os"
LEVEL_WEAK = "weak"
LEVEL_NONE = "unavailable"
SANDBOX_UID = 65534
TMP_BYTES = 16 * 1024 * 1024

_SYSTEM_LIBS = (
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
)
_LOADER_CACHE = "/etc/ld.so.cache"
# What the interpreter says about itself, asked outside the sandbox (trusted code, trusted binary).
_LAYOUT_CODE = (
    "import json, site, sys, sysconfig\n"
    "paths = sysconfig.get_paths()\n"
    "shared = sysconfig.get_config_var('Py_ENABLE_SHARED')\n"
    "print(json.dumps({'executable': sys.executable, 'version': list(sys.version_info[:2]),\n"
    "    'stdlib': paths['stdlib'], 'platstdlib': paths['platstdlib'],\n"
    "    'site': site.getsitepackages() + [paths['purelib'], paths['platlib']],\n"
    "    'libpython': shared and sysconfig.get_config_var('LIBDIR') + '/'\n"
    "        + sysconfig.get_config_var('INSTSONAME')}))\n"
)
# The project itself (and with it the suites' expected answers) must never be in view.
_PROJECT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Isolation:
    """One way to start the child, and what it amounts to (recorded with every result)."""

    level: str
    detail: str
    python: str = ""
    prefix: tuple[str, ...] = ()
    user: tuple[int, int] | None = None
    seccomp: bool = False
    reason: str = ""

    @property
    def usable(self) -> bool:
        return self.level in (LEVEL_OS, LEVEL_WEAK)

    def as_dict(self) -> dict:
        out = {"level": self.level, "detail": self.detail}
        if self.reason:
            out["reason"] = self.reason
        return out


def opted_in() -> bool:
    """Whether the user explicitly accepts running model code without an OS sandbox."""
    return os.environ.get(OPT_IN_ENV, "").strip().casefold() in {"1", "true", "yes"}


def interpreters() -> list[str]:
    """Candidate interpreters, the worker's own first, then the system's of the same version."""
    found = [os.path.realpath(sys.executable)]
    minor = f"python3.{sys.version_info.minor}"
    for name in (minor, "python3"):
        path = shutil.which(name, path=os.defpath)
        if path and os.path.realpath(path) not in found:
            found.append(os.path.realpath(path))
    return found


def layout(python: str) -> dict | None:
    """Where ``python`` keeps its stdlib, site-packages and libpython; None if it will not say."""
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", _LAYOUT_CODE], capture_output=True, timeout=15, check=False
        )
        found = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return found if done.returncode == 0 and isinstance(found, dict) else None


def _within(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def bwrap_prefix(bwrap: str, info: dict, features: frozenset[str]) -> list[str]:
    """The bubblewrap command line (up to the interpreter) for the interpreter ``info``."""
    args = [bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net"]
    args += ["--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    args += ["--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    args += ["--hostname", "sandbox", "--clearenv", "--setenv", "LANG", "C.UTF-8"]
    args += ["--setenv", "HOME", "/tmp"]
    if "--disable-userns" in features:
        args.append("--disable-userns")
    bound: list[str] = []
    for path in _SYSTEM_LIBS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            bound.append(os.path.realpath(path))
    if os.path.isfile(_LOADER_CACHE):
        args += ["--ro-bind", _LOADER_CACHE, _LOADER_CACHE]
    executable = os.path.realpath(info["executable"])
    args += ["--ro-bind", executable, executable]
    for key in ("stdlib", "platstdlib", "libpython"):
        path = os.path.realpath(info[key]) if info.get(key) else ""
        if path and os.path.exists(path) and not _within(path, bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    # Hide every site-packages in view, and the project if it happens to sit inside one.
    hidden: list[str] = []
    for root in bound:
        for pattern in ("python*/site-packages", "python*/dist-packages"):
            hidden += [str(p) for p in Path(root).glob(pattern) if p.is_dir()]
    hidden += [os.path.realpath(p) for p in info.get("site", []) if os.path.isdir(p)]
    if os.path.isdir(_PROJECT):
        hidden.append(str(_PROJECT))
    for path in sorted(set(hidden)):
        if _within(path, bound):
            args += ["--tmpfs", path]
    # bwrap's own root and /dev are writable tmpfs without a size: make them read-only, so the
    # small /tmp is the only place the child can write (device nodes stay usable).
    args += ["--dev", "/dev", "--remount-ro", "/dev"]
    if "--size" in features:
        args += ["--size", str(TMP_BYTES)]
    args += ["--tmpfs", "/tmp", "--remount-ro", "/", "--chdir", "/tmp"]
    return args


@cache
def bwrap_features(bwrap: str) -> frozenset[str]:
    """The options this bwrap knows (``--size`` came in 0.5), from its own ``--help``."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(w for w in done.stdout.decode(errors="replace").split() if w.startswith("--"))


def _unprivileged_user() -> tuple[int, int] | None:
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def os_candidates(seccomp: bool) -> tuple[list[Isolation], list[str]]:
    """Ways to build the OS sandbox here, best first, and why others were not possible."""
    if not sys.platform.startswith("linux"):
        return [], [f"no OS sandbox on {sys.platform}: bubblewrap needs Linux namespaces"]
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return [], ["bubblewrap is not installed (apt-get install bubblewrap)"]
    if not seccomp:
        return [], ["no seccomp filter for this machine's architecture"]
    features = bwrap_features(bwrap)
    # As root, run bwrap as nobody where nobody can run the interpreter; else as root, mapped.
    users = [_unprivileged_user(), None] if os.geteuid() == 0 else [None]
    found, notes = [], []
    for user in users:
        for python in interpreters():
            info = layout(python)
            if info is None:
                notes.append(f"{python}: cannot read its layout")
                continue
            who = (
                f"as uid {user[0]}"
                if user
                else ("sandbox uid mapped to root" if os.geteuid() == 0 else "as this user")
            )
            version = ".".join(map(str, info["version"]))
            detail = (
                f"bubblewrap: own user, PID, mount, network, IPC and UTS namespaces; "
                f"read-only system libraries and stdlib only; seccomp filter; {who}; "
                f"python {version}"
            )
            found.append(
                Isolation(
                    LEVEL_OS,
                    detail,
                    python=os.path.realpath(info["executable"]),
                    prefix=tuple(bwrap_prefix(bwrap, info, features)),
                    user=user,
                    seccomp=True,
                )
            )
    return found, notes


def weak(seccomp: bool) -> Isolation:
    """The opted-in fallback: the worker's interpreter with the policy and rlimits only."""
    layers = "seccomp filter, resource limits" if seccomp else "resource limits only"
    return Isolation(
        LEVEL_WEAK,
        f"NO OS sandbox ({OPT_IN_ENV}=1): AST policy, {layers}; "
        "the child can read every file this user can",
        python=os.path.realpath(sys.executable),
        seccomp=seccomp,
    )
