"""The depth sweep on Ollama measures up to the model's own context, not the run's num_ctx.

Ollama cannot run here, so worker.tests.ollama_replay stands in for it: its /api/show says the
model holds 8192 tokens, its /api/chat keeps Ollama's num_ctx rules (a reload whenever num_ctx
changes, silent truncation beyond it) and logs every request, and the real llama.cpp test server
(8K context) generates. One `benchloop run` of the speed suite's shortest task and the sweep,
at small request sizes and one trial, as a user would type it; the tests read its bundle and the
log. The engine gives every Ollama request of a run with speed tasks num_ctx 4096, so the depth
cell that shows the point is the data file's 4096 (priming it, ~4,100 prompt tokens, is most of
the module's work): it fits the model's 8192 and not the run's num_ctx.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from worker.engine.bundle import validation_errors
from worker.engine.providers.ollama import OllamaProvider
from worker.engine.suites import RunContext, available_suites
from worker.engine.suites.sweep import FIRST_LEVEL
from worker.engine.testing.xllama_launcher import ServerHandle, free_port
from worker.engine.transport import Transport
from worker.tests import ollama_replay
from worker.tests.ollama_replay import MODEL

pytestmark = pytest.mark.llm

REPO = Path(__file__).resolve().parents[2]
# One trial and 8 decoded tokens a request: the counts are not the point here, the num_ctx of
# each request is (every cell still runs, the first concurrency level's warm-up round too).
N_NEW, N_OUT, TRIALS = 64, 8, 1
# The run's num_ctx, and the depth cells' one: room for the deepest cell the model's 8192 hold,
# (4096 + 64 + 8) × 1.1 = 4585, rounded up to 1024s.
RUN_CTX, DEPTH_CTX = 4096, 5120
# The speed suite's cheapest task here (16 tokens decoded).
SPEED_TASK = "speed-p512-n16"


@contextlib.contextmanager
def _standin(
    upstream: ServerHandle, log: Path, standin_flags: tuple[str, ...] = ()
) -> Iterator[str]:
    """The stand-in Ollama, in its own process, generating with ``upstream``: its base URL."""
    port = free_port()
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    standin = [sys.executable, "-m", "worker.tests.ollama_replay", str(port)]
    standin += ["--upstream", upstream.base_url, "--log", str(log), *standin_flags]
    server = subprocess.Popen(standin, cwd=REPO, env=env, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"listening"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait(timeout=10)
        assert server.stdout is not None
        server.stdout.close()


def _run_against_standin(
    upstream: ServerHandle, home: Path, flags: list[str], *, standin_flags: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess, dict[str, Any], list[dict[str, Any]]]:
    """`benchloop run` against the stand-in: the CLI's result, the bundle and the chat log."""
    log = home / "chat.jsonl"
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    with _standin(upstream, log, standin_flags) as url:
        command = [sys.executable, "-m", "worker.cli", "run", "--url", url]
        command += ["--sweep-prompt-tokens", str(N_NEW), "--sweep-output-tokens", str(N_OUT)]
        done = subprocess.run(
            command + flags,
            env={**env, "BENCHLOOP_HOME": str(home), "COLUMNS": "110"},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    bundles = list(home.glob("runs/*/run.json"))
    assert len(bundles) == 1, done.stdout + done.stderr
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    return done, json.loads(bundles[0].read_text()), requests


@pytest.fixture(scope="module")
def ollama_run(
    llm_server_8k: ServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess, dict[str, Any], list[dict[str, Any]]]:
    """The speed suite's shortest task and the sweep, as a user would type it."""
    flags = ["--suites", "speed,speed_sweep", "--tasks", f"{SPEED_TASK},sweep-*"]
    flags += ["--trials", str(TRIALS), "--concurrency", "1,2"]
    return _run_against_standin(llm_server_8k, tmp_path_factory.mktemp("ollama-sweep"), flags)


def _cells(bundle: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {cell["depth"]: cell for cell in bundle["sweeps"]["depth"]["cells"]}


def _measured(bundle: dict[str, Any], suite: str) -> list[dict[str, Any]]:
    """The suite's measured trials (warm-up rounds and requests left out)."""
    return [
        trial
        for task in bundle["suites"][suite]["tasks"]
        for trial in task["metadata"]["trials"]
        if trial.get("ok") and not trial.get("warmup")
    ]


def _request(requests: list[dict[str, Any]], bundle: dict[str, Any], trial: dict) -> int:
    """The log index of a trial's request. Speed and concurrency prompts open with the trial's
    nonce; a depth trial's opens with its cell's context nonce (its own is in the reply after
    it): it is the k-th request of the cell that decodes more than the priming token."""
    nonce = trial.get("context_nonce", trial["nonce"])
    found = [
        i
        for i, r in enumerate(requests)
        if r["first_message"].startswith(f"Request {nonce}.") and r["num_predict"] != 1
    ]
    if "context_nonce" not in trial:
        (index,) = found
        return index
    (cell,) = [
        task["metadata"]["trials"]
        for task in bundle["suites"]["speed_sweep"]["tasks"]
        if trial in task["metadata"]["trials"]
    ]
    assert len(found) == len(cell)
    return found[cell.index(trial)]


def test_the_run_completes_and_its_bundle_validates(ollama_run) -> None:
    done, bundle, _ = ollama_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert bundle["status"] == "complete"
    assert bundle["engine"]["name"] == "ollama"
    assert validation_errors(bundle) == []
    upload = json.loads((REPO / "runs/schemas/upload-1.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(upload).iter_errors(bundle)) == []
    # --suites names no profile: the CLI counts the selection, not the default profile's tasks
    # (the speed task and 4 depth and 2 concurrency cells; the 2 deepest skipped).
    assert bundle["benchmark_profile"] == "custom"
    said = " ".join(done.stdout.split())
    assert "suites speed,speed_sweep (a custom selection) · 7 tasks" in said
    assert "5 of 7 selected tasks scored or measured (a custom selection)" in said


def test_depth_cells_run_up_to_the_model_s_context(ollama_run) -> None:
    done, bundle, _ = ollama_run
    block = bundle["sweeps"]["depth"]
    assert block["server_context"] == DEPTH_CTX
    assert block["context_source"] == "ollama num_ctx (model context 8192)"
    # The CLI's depth table says so too (its caption may wrap: compare the words).
    said = " ".join(done.stdout.split())
    assert "context of 5,120 tokens (ollama num_ctx (model context 8192))" in said
    cells = _cells(bundle)
    assert cells[0]["status"] == cells[4096]["status"] == "measured"
    assert cells[0]["n"] == cells[4096]["n"] == TRIALS
    reason = f"exceeds the model's context ({ollama_replay.MODEL_CONTEXT} tokens)"
    for depth in (16384, 32768):
        assert cells[depth] == {"depth": depth, "status": "skipped", "reason": reason}
    assert reason in done.stdout
    # The suite's own record of the facts: the run's num_ctx beside the depth cells'.
    server = bundle["suites"]["speed_sweep"]["metadata"]["server"]
    assert (server["context_length"], server["depth_context"]) == (RUN_CTX, DEPTH_CTX)
    assert server["model_context"] == ollama_replay.MODEL_CONTEXT


def test_the_deep_cell_holds_its_context_and_counts_only_the_new_tokens(ollama_run) -> None:
    _, bundle, _ = ollama_run
    deep = _cells(bundle)[4096]
    assert 0.8 * 4096 <= deep["context_tokens"] <= 1.2 * 4096
    # Ollama's prompt_eval_count is the whole prompt; its cached count is taken off it.
    assert 0.9 * deep["context_tokens"] <= deep["depth_tokens"] <= deep["context_tokens"] + 2
    assert deep["cache_held"] is True
    assert deep["token_count_source"] == "server"
    assert 0.7 * N_NEW <= deep["prompt_tokens"] <= 1.3 * N_NEW + 40


def test_no_request_was_truncated(ollama_run) -> None:
    _, _, requests = ollama_run
    assert requests
    assert [r for r in requests if r["truncated"] or r["dropped_messages"]] == []


def test_the_depth_cells_share_one_num_ctx_and_the_rest_keep_4096(ollama_run) -> None:
    _, bundle, requests = ollama_run
    sizes = [r["num_ctx"] for r in requests]
    assert set(sizes) == {RUN_CTX, DEPTH_CTX}
    # One stretch at the depth cells' num_ctx: the model is loaded, reloaded once for the depth
    # cells and once back, and never again.
    deep = [i for i, size in enumerate(sizes) if size == DEPTH_CTX]
    assert deep == list(range(deep[0], deep[-1] + 1))
    assert [i for i, r in enumerate(requests) if r["reload"]] == [0, deep[0], deep[-1] + 1]
    for trial in _measured(bundle, "speed_sweep"):
        index = _request(requests, bundle, trial)
        wanted = DEPTH_CTX if "depth_target" in trial else RUN_CTX
        assert requests[index]["num_ctx"] == wanted, trial["nonce"]
    for trial in _measured(bundle, "speed"):
        assert requests[_request(requests, bundle, trial)]["num_ctx"] == RUN_CTX


def test_no_measured_request_waits_for_a_reload(ollama_run) -> None:
    _, bundle, requests = ollama_run
    measured = _measured(bundle, "speed") + _measured(bundle, "speed_sweep")
    # The speed task; depths 0 and 4096; 1 and 2 streams a round.
    assert len(measured) == TRIALS * (1 + 2 + 1 + 2)
    for trial in measured:
        index = _request(requests, bundle, trial)
        assert not requests[index]["reload"], trial["nonce"]
        assert index > 0 and requests[index - 1]["num_ctx"] == requests[index]["num_ctx"]


def test_without_a_cached_count_the_deep_cell_reports_no_prefill(
    llm_server_8k: ServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An Ollama that counts no cached tokens: the deep cell's prompt count holds the cached
    context, so its prefill is not measured (with the reason) rather than read ~9× too high
    ((512 + 64) / 64); decode and TTFT are still measured. The rule holds at any depth: 512
    keeps the priming cheap (the module's run covers the 4096 beyond the run's num_ctx)."""
    flags = ["--profile", "speed-deep", "--depths", "512", "--concurrency", "1", "--trials", "1"]
    _, bundle, _ = _run_against_standin(
        llm_server_8k,
        tmp_path_factory.mktemp("ollama-old"),
        flags,
        standin_flags=("--no-cached-count",),
    )
    deep = _cells(bundle)[512]
    assert deep["status"] == "measured" and deep["depth_tokens"] is None
    assert deep["prefill_tps"]["n"] == 0 and deep["decode_tps"]["n"] == 1
    (trial,) = [t for t in _measured(bundle, "speed_sweep") if "depth_target" in t]
    assert trial["prefill_tps"] is None
    assert trial["prefill_note"].startswith("not measured: the server reports no cached-token")


def test_a_reload_between_rounds_turns_the_next_round_into_a_warm_up(
    llm_server_8k: ServerHandle, tmp_path: Path
) -> None:
    """Another client loads the model with another num_ctx after the 2-stream level's first
    round: Ollama reloads it for our next round, whose requests say so (load_duration). That
    round is a warm-up, not a measurement, and one more round is measured; the first level had
    the sweep's only other warm-up."""
    suite = available_suites()["speed_sweep"]
    options = {"depths": [0], "concurrency": [1, 2], "prompt_tokens": N_NEW, "output_tokens": 8}
    tasks = [t for t in suite.effective_tasks(None, options) if "streams" in t["sweep"]]
    with _standin(llm_server_8k, tmp_path / "chat.jsonl") as url:
        opened: list[OllamaProvider] = []

        def provider() -> OllamaProvider:
            opened.append(OllamaProvider(Transport(url, timeout=300), MODEL, num_ctx=RUN_CTX))
            return opened[-1]

        def emit(event) -> None:
            if event["type"] != "trial_completed" or event["task_id"] != tasks[1]["id"]:
                return
            if event["trial"] == 1:
                other = {"model": MODEL, "stream": False, "messages": [{"role": "user"}]}
                other["options"] = {"num_ctx": 2048, "num_predict": 1}
                other["messages"][0]["content"] = "Hello."
                httpx.post(f"{url}/api/chat", json=other, timeout=300).raise_for_status()

        ctx = RunContext(
            provider=provider(),
            trials=2,
            server={"context_length": RUN_CTX},
            new_provider=provider,
            emit=emit,
        )
        try:
            suite.prepare(ctx)
            one, two = (suite.run_task(task, ctx)["metadata"] for task in tasks)
        finally:
            ctx.provider.close()
    (warmup,) = one["warmups"]
    assert warmup["warmup_reason"] == FIRST_LEVEL and one["cell"]["rounds"] == 2
    assert len(two["warmups"]) == 2 and two["cell"]["rounds"] == 2
    for request in two["warmups"]:
        assert request["warmup_reason"].startswith("the server loaded the model during")
        assert request["round"] == 2  # it stood where the second measured round now is
    assert max(r["server_load_ms"] for r in two["warmups"]) >= 1000 * ollama_replay.RELOAD_S
    assert [(t["round"], t["warmup"]) for t in two["trials"]] == [(1, False)] * 2 + [(2, False)] * 2
    assert all(r["server_load_ms"] < 200 for r in two["trials"])
    assert [w["reason"] for w in ctx.suite_metadata["warmups"]] == [
        FIRST_LEVEL,
        two["warmups"][0]["warmup_reason"],
    ]
