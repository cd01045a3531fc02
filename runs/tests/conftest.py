"""Real bundles from the real engine, shared by the import tests that need one."""

from __future__ import annotations

import pytest

from worker.engine.bundle import upload_view
from worker.engine.orchestrator import run_benchmark
from worker.engine.plan import RunConfig


@pytest.fixture(scope="session")
def sweep_bundle(llm_url, tmp_path_factory) -> dict:
    """speed-deep (the sweeps alone) with one depth the server holds, one it cannot, and one
    stream: small cells, run once for every test that reads it."""
    home = tmp_path_factory.mktemp("sweep-home")
    config = RunConfig(
        url=llm_url,
        profile="speed-deep",
        trials=1,
        sweep_depths=[0, 65536],
        sweep_concurrency=[1],
        sweep_prompt_tokens=32,
        sweep_output_tokens=8,
        home=home,
    )
    outcome = run_benchmark(config)
    assert outcome.status == "complete"
    return upload_view(outcome.bundle)
