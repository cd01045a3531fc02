"""The harness program's cage: a bubblewrap command line, and the forwarder that runs inside it.

Unlike the model-code sandbox (``engine.sandbox``) this cage has no seccomp filter and no AST
policy: a harness needs exec, sockets and threads. What it gets instead is a file system view and
a network namespace: read-only system directories, a minimal /etc, the harness install and its
base interpreter at their real paths (so shebangs work), a writable workspace (its working
directory) and a private HOME; nothing else is writable, and /work, /root, the project and other
installs are not there. Its network namespace has only a loopback, where our forwarder listens on
``FORWARD_PORT`` and relays each connection to the recording proxy's Unix socket, bound in.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..sandbox.isolation import bwrap_features
from .bounds import rlimit_pairs
from .spec import CageLimits, HarnessSpec

HARNESS_DIR_ENV = "BENCHLOOP_HARNESS_DIR"
WORKSPACE = "/workspace"
HOME = "/home/benchloop"
SOCKET_DIR = "/run/benchloop"
SOCKET_NAME = "proxy.sock"
FORWARD_PORT = 8771
UID = 65534  # the program's uid and gid inside the namespace: nobody, never root
HOSTNAME = "benchloop-harness"
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Host files a program needs from /etc (all read-only); the rest of /etc is ours (stubs).
_ETC_KEEP = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/ssl/certs", "/etc/ca-certificates")
_ETC_STUBS = {
    "passwd": f"root:x:0:0:root:/root:/bin/sh\nbenchloop:x:{UID}:{UID}:benchloop:{HOME}:/bin/sh\n",
    "group": f"root:x:0:\nbenchloop:x:{UID}:\n",
    "hosts": f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n",
    "hostname": f"{HOSTNAME}\n",
    # No name server: every name outside /etc/hosts fails to resolve, and says so.
    "resolv.conf": "# benchloop harness cage: no name server\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
}

# The forwarder, run inside the cage by the harness's base interpreter with -I -S (our own code,
# stdlib only): it sets the run's rlimits on itself first (the program inherits them), listens,
# then starts the program, so the endpoint is up before the program's first request. It reaps the
# program and writes what the kernel said (wait status, CPU time, peak memory) to the status
# descriptor, which the program never holds; it exits with the program's status.
LAUNCHER = r"""
import json, os, resource, socket, subprocess, sys, threading
import ctypes
# Not dumpable: the program (same uid) cannot ptrace us to write a status of its choosing.
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
for number, soft, hard in json.loads(sys.argv[3]):
    resource.setrlimit(number, (soft, hard))
port, target, status_fd, argv = int(sys.argv[1]), sys.argv[2], int(sys.argv[4]), sys.argv[5:]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)

def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

def serve(conn):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
    back.start()
    pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()

def accept():
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve, args=(conn,), daemon=True).start()

threading.Thread(target=accept, daemon=True).start()
try:
    proc = subprocess.Popen(argv)  # close_fds: the program never holds the status descriptor
except OSError as exc:
    print(f"benchloop cage: cannot start {argv[0]}: {exc}", file=sys.stderr)
    sys.exit(127)
while True:
    try:
        _, status, usage = os.wait4(proc.pid, 0)
        break
    except InterruptedError:
        continue
if status_fd >= 0:
    account = [status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss]
    os.write(status_fd, json.dumps(account).encode())
code = os.waitstatus_to_exitcode(status)
sys.exit(128 - code if code < 0 else code)
"""


class HarnessNotInstalled(FileNotFoundError):
    """The pinned harness install is missing; the message says how to install it."""


def harness_root() -> Path:
    """Where pinned harness installs live: ``$BENCHLOOP_HARNESS_DIR`` or the user's cache."""
    configured = os.environ.get(HARNESS_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "benchloop" / "harnesses"


def harness_prefix(spec: HarnessSpec) -> Path:
    """The install directory (a venv) of one pinned harness: ``<root>/<package>-<version>``."""
    return harness_root() / f"{spec.package}-{spec.version}"


def install_dir(spec: HarnessSpec) -> Path:
    """The install that holds ``spec``'s program: its isolated venv, else the CLI's own
    environment (where the CLI's extra installed it); raises ``HarnessNotInstalled``."""
    for prefix in (harness_prefix(spec), Path(sys.prefix)):
        program = prefix / "bin" / spec.program
        if program.is_file() and os.access(program, os.X_OK):
            return Path(os.path.realpath(prefix))
    raise HarnessNotInstalled(
        f"{spec.package}=={spec.version} is not installed at {harness_prefix(spec)} "
        f"(install the CLI's extra '{spec.extra}')"
    )


def base_interpreter(prefix: Path) -> tuple[str, str]:
    """(interpreter, its installation prefix) that the venv at ``prefix`` runs on."""
    python = prefix / "bin" / "python3"
    if not python.exists():
        python = prefix / "bin" / "python"
    real = os.path.realpath(python)
    home = ""
    cfg = prefix / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                home = value.strip()
    base = os.path.realpath(Path(home).parent) if home else str(Path(real).parents[1])
    return real, base


@dataclass
class CagePlan:
    """Host paths for one run: what is bound where."""

    install: Path  # the harness install, resolved (bound at this same path)
    interpreter: str  # the base interpreter the forwarder runs on
    interpreter_prefix: str
    workspace: Path
    home: Path  # host folder bound as HOME
    etc: Path  # host folder holding our /etc stubs
    sockets: Path  # host folder holding the proxy's socket


def write_etc(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in _ETC_STUBS.items():
        (folder / name).write_text(text)


def _within(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _size(sized: bool, mib: int) -> list[str]:
    return ["--size", str(mib * 1024 * 1024)] if sized else []


def bwrap_command(
    plan: CagePlan,
    argv: list[str],
    env: dict[str, str],
    info_fd: int | None = None,
    limits: CageLimits | None = None,
    status_fd: int = -1,
) -> list[str]:
    """The full command line: bwrap, its mounts, the forwarder, then the program's ``argv``."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        raise FileNotFoundError("bubblewrap is not installed (apt-get install bubblewrap)")
    limits = limits or CageLimits()
    args = [bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net"]
    args += ["--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    args += ["--cap-drop", "ALL", "--uid", str(UID), "--gid", str(UID)]
    args += ["--hostname", HOSTNAME, "--clearenv"]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    for key, value in env.items():
        args += ["--setenv", key, value]
    bound: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            bound.append(path)
    # bwrap's /dev is a writable tmpfs: read-only, but for a private /dev/shm (POSIX semaphores
    # and shared memory, which multiprocessing needs), sized, gone with the namespace.
    sized = "--size" in bwrap_features(bwrap)  # bwrap 0.5 and later
    args += ["--dev", "/dev", *_size(sized, limits.shm_mb), "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/dev", "--proc", "/proc"]
    args += ["--dir", "/etc"]
    for name in _ETC_STUBS:
        args += ["--ro-bind", str(plan.etc / name), f"/etc/{name}"]
    for path in _ETC_KEEP:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    # The install and its interpreter at their real paths, read-only (shebangs name them).
    for path in (str(plan.install), plan.interpreter_prefix):
        if not _within(path, bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    args += ["--bind", str(plan.workspace), WORKSPACE]
    args += ["--bind", str(plan.home), HOME]
    args += [*_size(sized, limits.tmp_mb), "--tmpfs", "/tmp"]
    args += ["--ro-bind", str(plan.sockets), SOCKET_DIR]
    # bwrap's own root is a writable tmpfs: read-only, so the binds above are all that is writable.
    args += ["--remount-ro", "/", "--chdir", WORKSPACE]
    args += [plan.interpreter, "-I", "-S", "-c", LAUNCHER]
    args += [str(FORWARD_PORT), f"{SOCKET_DIR}/{SOCKET_NAME}", json.dumps(rlimit_pairs(limits))]
    return [*args, str(status_fd), *argv]


def program_path(install: Path, name: str) -> str:
    """``name`` resolved in the install's ``bin/`` (absolute paths are taken as they are)."""
    if os.path.isabs(name):
        return name
    return str(install / "bin" / name)


def cage_env(install: Path, extra: dict[str, str]) -> dict[str, str]:
    """The program's whole environment: the adapter's variables, HOME, PATH and LANG."""
    env = dict(extra)
    env["HOME"] = HOME
    env["PATH"] = f"{install}/bin:/usr/local/bin:/usr/bin:/bin"
    env.setdefault("LANG", "C.UTF-8")
    return env


DETAIL = (
    f"bubblewrap: own user, PID, network, IPC and UTS namespaces, uid {UID}, capabilities "
    "dropped; read-only system, harness install and interpreter; writable workspace and private "
    "HOME only, private sized /tmp and /dev/shm; network: loopback, and the endpoint through the "
    "recording proxy"
)
