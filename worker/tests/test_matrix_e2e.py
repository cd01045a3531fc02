"""Issue 19, Must show 1: `benchloop matrix` against the real llama.cpp server runs every harness
(our baseline, a prompt format and each real program, caged) end to end on two tasks, and each
bundle records the harness, its overhead and its verdicts."""

from __future__ import annotations

import json

import pytest

from worker.cli import main
from worker.engine.bundle import list_runs, load_bundle
from worker.engine.matrix.programs import PROGRAMS

pytestmark = pytest.mark.llm

TASKS = "mx-fix-01,mx-tools-01"
HARNESSES = ["raw", "xml-tool-call", "aider:whole", "hermes-agent", "mini-swe-agent"]
# Each harness only has to reach the model and get an answer back; the answers' length is not
# what this proves, and on a loaded CPU every decoded token is the slow part (16: the fewest a
# harness's golden test runs with).
CAP = 16


def test_the_matrix_runs_every_harness_on_two_tasks(llm_server_8k, llm_model, bench_home, capsys):
    # 8K: Hermes Agent's own prompt is about 4,400 tokens.
    code = main(
        ["matrix", "--url", llm_server_8k.base_url, "--model", llm_model, "--tasks", TASKS]
        + ["--max-tokens", str(CAP), "--harnesses", ",".join(HARNESSES)]
    )
    shown = capsys.readouterr().out
    assert code == 0, shown
    bundles = {b["harness"]: b for b in (load_bundle(p) for p in list_runs())}
    assert sorted(bundles) == sorted(h.partition(":")[0] for h in HARNESSES)
    for name, bundle in bundles.items():
        tasks = [t for s in bundle["suites"].values() for t in s["tasks"]]
        assert sorted(t["task_id"] for t in tasks) == sorted(TASKS.split(",")), name
        spec = PROGRAMS.get(name)
        assert bundle["harness_version"] == (spec.version if spec else "v1")
        for suite in bundle["suites"].values():
            meta = suite["metadata"]
            assert meta["harness"]["name"] == name
            assert meta["overhead"]["n"] == len(suite["tasks"])
        for task in tasks:
            overhead, failure = task["metadata"]["overhead"], task["metadata"]["failure"]
            # Every harness reached the model through the proxy, and nothing went wrong in the
            # plumbing: a task fails for the model's sake (wrong, format) or passes.
            assert overhead["requests"] >= 1, (name, task["task_id"], task["metadata"])
            assert overhead["prompt_tokens"] > 0 and overhead["completion_tokens"] > 0
            assert overhead["wall_ms"] >= overhead["model_ms"] > 0
            assert failure in (None, "wrong", "format"), (name, task["metadata"])
            # The proxy's cap held: no request generated more than --max-tokens.
            assert overhead["completion_tokens"] <= CAP * overhead["requests"]
    assert "Harness matrix" in shown
    for name in bundles:
        assert name in shown
    # The raw row is the baseline the others are compared with.
    assert "×" in shown
    json.dumps(bundles)  # the bundles are plain JSON
