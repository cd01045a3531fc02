"""The depth and concurrency sweeps (suite speed_sweep) against a real llama.cpp server with two
slots, run once through the CLI: cells, the bundle's sweeps block, its schemas and the display.

The server has n_ctx 4096 over 2 slots (2048 tokens each, what /props reports), so the 8192-token
cell is beyond it. Requests are small (64 new prompt tokens, 24 decoded) to keep the module near
a minute on two cores; timings are noisy here, so the tests assert relations with slack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from worker.engine.bundle import validation_errors
from worker.engine.testing.xllama_launcher import ServerHandle, start_server

pytestmark = pytest.mark.llm

REPO = Path(__file__).resolve().parents[2]
N_NEW, N_OUT, TRIALS = 64, 24, 3
DEPTHS, STREAMS = (0, 512, 8192), (1, 2, 4)
# Noise allowance for "not faster": the machine is shared, and one slow trial moves a median.
SLACK = 1.15


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory: pytest.TempPathFactory) -> ServerHandle:
    # The model's own chat template, as users run it (SmolLM2's adds a default system prompt).
    handle = start_server(
        n_ctx=4096,
        parallel=2,
        tools_template=False,
        log_dir=tmp_path_factory.mktemp("sweep-server"),
    )
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def sweep_run(
    sweep_server: ServerHandle, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess, dict[str, Any]]:
    """`benchloop run --profile speed-deep` with small cells, as a user would type it."""
    home = tmp_path_factory.mktemp("sweep-home")
    command = [sys.executable, "-m", "worker.cli", "run", "--url", sweep_server.base_url]
    command += ["--profile", "speed-deep", "--trials", str(TRIALS)]
    command += ["--depths", ",".join(map(str, DEPTHS))]
    command += ["--concurrency", ",".join(map(str, STREAMS))]
    command += ["--sweep-prompt-tokens", str(N_NEW), "--sweep-output-tokens", str(N_OUT)]
    env = {**os.environ, "BENCHLOOP_HOME": str(home), "COLUMNS": "110"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        command, env=env, cwd=REPO, capture_output=True, text=True, timeout=900, check=False
    )
    bundles = list(home.glob("runs/*/run.json"))
    assert len(bundles) == 1, done.stdout + done.stderr
    return done, json.loads(bundles[0].read_text())


def _cells(bundle: dict[str, Any], kind: str, key: str) -> dict[int, dict[str, Any]]:
    return {cell[key]: cell for cell in bundle["sweeps"][kind]["cells"]}


def test_the_cli_shows_the_sweep_s_progress_and_tables(sweep_run) -> None:
    done, _ = sweep_run
    assert done.returncode == 0, done.stdout + done.stderr
    # 6 cells × 3 trials (rounds): the skipped cell's trials count as done when it ends.
    assert "18/18" in done.stdout
    assert "Speed at depth" in done.stdout and "Concurrent streams (server slots: 2)" in done.stdout
    assert "exceeds the server's context (2048 tokens)" in done.stdout


def test_depth_cells_hold_their_context_and_keep_the_servers_clock(sweep_run) -> None:
    _, bundle = sweep_run
    block = bundle["sweeps"]["depth"]
    assert (block["prompt_tokens"], block["output_tokens"], block["trials"]) == (N_NEW, N_OUT, 3)
    cells = _cells(bundle, "depth", "depth")
    shallow, deep = cells[0], cells[512]
    assert shallow["status"] == deep["status"] == "measured"
    assert shallow["n"] == deep["n"] == TRIALS
    # The context request put ~512 tokens in; the measured request found them all cached.
    assert 0.8 * 512 <= deep["context_tokens"] <= 1.2 * 512
    assert 0.9 * deep["context_tokens"] <= deep["depth_tokens"] <= deep["context_tokens"]
    assert deep["cache_held"] is True
    # At depth 0 only the chat template's fixed prefix (its default system prompt) is cached:
    # the nonce opens the prompt.
    assert shallow["depth_tokens"] < 40 and shallow["cache_held"] is None
    for cell in (shallow, deep):
        assert cell["token_count_source"] == "server"
        # The new tokens the server evaluated, near the p asked for.
        assert 0.7 * N_NEW <= cell["prompt_tokens"] <= 1.3 * N_NEW + 40
    # Cells run minutes apart on a shared machine, so rates are held against the server's own
    # clock for the same request rather than against another cell's.
    for trial in bundle["suites"]["speed_sweep"]["tasks"][1]["metadata"]["trials"]:
        assert trial["server"]["cache_n"] == trial["depth_tokens"]
        assert trial["server"]["prompt_n"] == trial["prefill_tokens"]
        assert trial["completion_tokens"] == N_OUT  # ignore_eos: every trial decodes n
        assert 0.8 < trial["decode_ratio_vs_server"] < 1.25
        assert 0.8 < trial["prefill_ratio_vs_server"] < 1.25


def test_a_depth_beyond_the_server_s_context_is_skipped(sweep_run, sweep_server) -> None:
    _, bundle = sweep_run
    props = httpx.get(f"{sweep_server.base_url}/props", timeout=5).json()
    per_slot = props["default_generation_settings"]["n_ctx"]
    assert bundle["sweeps"]["depth"]["server_context"] == per_slot == 2048
    assert bundle["sweeps"]["depth"]["context_source"] == "server"
    cell = _cells(bundle, "depth", "depth")[8192]
    assert cell == {
        "depth": 8192,
        "status": "skipped",
        "reason": "exceeds the server's context (2048 tokens)",
    }
    record = bundle["suites"]["speed_sweep"]["tasks"][2]
    assert record["metadata"]["trials"] == [] and record["execution_ok"]


def test_concurrent_streams_share_the_server_s_two_slots(sweep_run) -> None:
    _, bundle = sweep_run
    block = bundle["sweeps"]["concurrency"]
    assert (block["server_slots"], block["slots_source"]) == (2, "llama.cpp /props total_slots")
    cells = _cells(bundle, "concurrency", "streams")
    for streams, cell in cells.items():
        assert cell["status"] == "measured"
        # Warm-up round excluded: trials rounds of `streams` requests each.
        assert (cell["requests"], cell["rounds"]) == (streams * TRIALS, TRIALS)
        assert cell["ttft_tail_label"] == "max"  # n < 20
        assert cell["ttft_tail_ms"] == max_ttft(bundle, streams)
        assert cell["ttft_p50_ms"] <= cell["ttft_tail_ms"]
    two, four = cells[2], cells[4]
    # Relations below hold within one cell (one round's streams at once): cells run minutes
    # apart on a shared machine, where the load can change tenfold between them.
    # Two slots decode two streams at once: together faster than one of them alone ...
    assert two["aggregate_decode_tps"] > 1.2 * two["per_stream_tps"]["median"]
    # ... but never more than two streams' worth, however many are sent.
    assert four["aggregate_decode_tps"] <= 2 * SLACK * four["per_stream_tps"]["peak"]
    # With 4 streams on 2 slots, half the requests wait for a whole answer before their first
    # token: the TTFT tail grows by at least half an answer's decode time.
    answer_ms = 1000 * (N_OUT - 1) / four["per_stream_tps"]["median"]
    assert four["ttft_tail_ms"] - two["ttft_p50_ms"] > 0.5 * answer_ms
    # Aggregate over the whole window (sends to last token) is below the decode-only figure.
    for cell in cells.values():
        assert cell["aggregate_tps"] < cell["aggregate_decode_tps"] * 1.05


def max_ttft(bundle: dict[str, Any], streams: int) -> float:
    task = next(
        t
        for t in bundle["suites"]["speed_sweep"]["tasks"]
        if t["task_id"] == f"sweep-concurrency-{streams}"
    )
    return round(max(t["ttft_ms"] for t in task["metadata"]["trials"] if t["ok"]), 3)


def test_each_concurrent_request_has_its_own_nonce_and_no_cached_prompt(sweep_run) -> None:
    _, bundle = sweep_run
    trials = [
        trial
        for task in bundle["suites"]["speed_sweep"]["tasks"]
        for trial in task["metadata"]["trials"]
    ]
    nonces = [t["nonce"] for t in trials]
    assert len(nonces) == len(set(nonces))
    for trial in trials:
        if "stream" in trial:
            assert trial["server"]["cache_n"] < 40  # the template's prefix, never a prompt


def test_the_bundle_validates_and_the_sweep_changes_no_score(sweep_run) -> None:
    _, bundle = sweep_run
    assert validation_errors(bundle) == []
    upload = json.loads((REPO / "runs/schemas/upload-1.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(upload).iter_errors(bundle)) == []
    assert bundle["status"] == "complete"
    # speed-deep is speed-only: no quality, overall or value, and the sweep adds no speed score.
    assert (bundle["quality_score"], bundle["overall_score"], bundle["value_score"]) == (
        None,
        None,
        None,
    )
    assert bundle["speed_score"] is None  # not scored (issue 32), never 0.0
    # Measured, never scored: the suite and its cells carry no score (not a 100 for "ran").
    sweep = bundle["suites"]["speed_sweep"]
    assert sweep["score"] is None
    assert {t["score"] for t in sweep["tasks"]} == {None}
    assert bundle["comparability"]["reasons"] == [
        "--depths 0,512,8192 --concurrency 1,2,4 --sweep-prompt-tokens 64 "
        "--sweep-output-tokens 24 changes the sweep's cells"
    ]
