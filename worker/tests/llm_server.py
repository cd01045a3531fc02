"""Pytest fixtures that run a real llama.cpp server (xllamacpp + SmolLM2-135M) for engine tests."""

from __future__ import annotations

import fcntl
import shutil
import tempfile
from pathlib import Path

import pytest

from worker.engine.matrix.cage import HarnessNotInstalled, install_dir
from worker.engine.matrix.spec import HarnessSpec
from worker.engine.testing.xllama_launcher import MODEL_ALIAS, ServerHandle, start_server

__all__ = [
    "bench_home",
    "machine_to_itself",
    "llm_model",
    "llm_server_8k",
    "llm_own_template_url",
    "llm_server",
    "llm_url",
    "spawn_llm_server",
]


@pytest.fixture
def machine_to_itself():
    """Held by the tests that load the machine on purpose (a CPU hog) and by those that compare
    rates and would read that load as a difference: under xdist the other worker waits for the
    lock instead of running one beside the other. Other tests still run meanwhile."""
    path = Path(tempfile.gettempdir()) / "benchloop-tests-machine.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> ServerHandle:
    """One shared server for the whole session (n_ctx 4096, 1 thread, metrics on)."""
    handle = start_server(log_dir=tmp_path_factory.mktemp("llm-server"))
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def llm_server_8k(tmp_path_factory: pytest.TempPathFactory) -> ServerHandle:
    """A server with an 8K window, for harness programs whose own prompt outgrows 4K (Hermes
    Agent's is about 4,400 tokens); shared, so they reuse its cache of their prompt prefix."""
    handle = start_server(n_ctx=8192, log_dir=tmp_path_factory.mktemp("llm-8k"))
    try:
        yield handle
    finally:
        handle.stop()


def require_harness(spec: HarnessSpec) -> None:
    """Fail (never skip: CI installs them) when bubblewrap or the harness program is missing."""
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed (scripts/test.sh installs it)")
    try:
        install_dir(spec)
    except HarnessNotInstalled as exc:
        pytest.fail(f"{exc}; scripts/test.sh runs `benchloop harness install`")


@pytest.fixture(scope="session")
def llm_url(llm_server: ServerHandle) -> str:
    return llm_server.base_url


@pytest.fixture(scope="session")
def llm_own_template_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A server on the GGUF's own chat template, as a user of llama-server gets it: its default
    system prompt is a fixed prefix (about 25 tokens) that the server serves from its cache."""
    handle = start_server(log_dir=tmp_path_factory.mktemp("llm-own"), tools_template=False)
    try:
        yield handle.base_url
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def llm_model() -> str:
    return MODEL_ALIAS


@pytest.fixture
def spawn_llm_server(tmp_path):
    """Factory for extra servers a test may kill or configure (API key); all stopped afterwards."""
    handles: list[ServerHandle] = []

    def spawn(**kwargs) -> ServerHandle:
        kwargs.setdefault("log_dir", tmp_path)
        handle = start_server(**kwargs)
        handles.append(handle)
        return handle

    try:
        yield spawn
    finally:
        for handle in handles:
            handle.stop()


@pytest.fixture
def bench_home(tmp_path, monkeypatch):
    """A private $BENCHLOOP_HOME so tests never touch ~/.bench-loop."""
    home = tmp_path / "bench-home"
    monkeypatch.setenv("BENCHLOOP_HOME", str(home))
    for name in (
        "BENCHLOOP_API_KEY",
        "BENCHLOOP_SITE",
        "BENCHLOOP_ENDPOINT_API_KEY",
        "BENCHLOOP_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    return home
