"""Runs that cannot be compared, end to end against the real llama.cpp server: a context too
small for a long-context task, and no code sandbox for a coding task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker.engine.bundle import validation_errors
from worker.engine.orchestrator import run_benchmark
from worker.engine.plan import RunConfig
from worker.engine.sandbox import OPT_IN_ENV
from worker.engine.suites import available_suites, load_profiles

REPO = Path(__file__).resolve().parents[2]


def _profile_tasks(name: str) -> int:
    suites = available_suites()
    return sum(len(suites[s].tasks) for s in load_profiles()["profiles"][name]["suites"])


@pytest.mark.llm
def test_a_long_context_task_the_server_cannot_hold_makes_the_run_non_comparable(
    spawn_llm_server, bench_home
):
    server = spawn_llm_server(n_ctx=1024)
    outcome = run_benchmark(
        RunConfig(url=server.base_url, profile="full", tasks=["lc-2k"], home=bench_home)
    )
    bundle = outcome.bundle
    assert validation_errors(bundle) == []
    (task,) = bundle["suites"]["longcontext"]["tasks"]
    assert task["metadata"]["skipped"] is True
    block = bundle["comparability"]
    assert bundle["comparable"] is False and block["comparable"] is False
    assert block["reasons"] == [
        "--tasks lc-2k ran a subset of the profile",
        "1 task skipped or cut off: the server's context (1024 tokens) is too small",
    ]
    assert block["not_scored"]["context"] == 1
    assert (block["tasks_expected"], block["tasks_scored"]) == (_profile_tasks("full"), 0)
    assert bundle["coverage_score"] == 0.0


@pytest.mark.llm
def test_coding_tasks_without_a_sandbox_are_recorded_as_not_run(llm_url, tmp_path):
    """bubblewrap out of reach (a PATH without it) and no opt-in: the task is refused before
    the model is asked, and the run says why it is not comparable."""
    env = {k: v for k, v in os.environ.items() if k != OPT_IN_ENV}
    env |= {"BENCHLOOP_HOME": str(tmp_path), "PATH": str(Path(sys.executable).parent)}
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run", "--url", llm_url, "--profile", "core"]
        + ["--tasks", "code-05-roman-to-int,speed-p128-n256", "--trials", "1"]
        + ["--max-tokens", "8", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    summary = json.loads(done.stdout)
    assert summary["status"] == "complete", done.stderr
    bundle = json.loads(Path(summary["path"]).read_text())
    assert validation_errors(bundle) == []
    (task,) = bundle["suites"]["coding"]["tasks"]
    assert task["metadata"]["error_kind"] == "sandbox_unavailable"
    assert task["tokens_generated"] == 0  # no inference was spent on it
    assert summary["comparability"]["reasons"] == [
        "--tasks code-05-roman-to-int,speed-p128-n256 ran a subset of the profile",
        "--max-tokens 8 caps the answers",
        "1 coding task not run: no code sandbox",
    ]
    block = summary["comparability"]
    assert block["not_scored"]["sandbox_unavailable"] == 1
    assert (block["tasks_scored"], block["tasks_expected"]) == (1, _profile_tasks("core"))
    assert bundle["coverage_score"] == round(100 / _profile_tasks("core"), 2)
