"""`benchloop run --suites speed` end to end against the real server, then compare and export."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.cli import main
from worker.engine.bundle import validation_errors
from worker.engine.metrics import speed_samples, speed_summary
from worker.engine.testing.xllama_launcher import model_path
from worker.rules.stats import summarize
from worker.tests.cli_kit import run_cli

REPO = Path(__file__).resolve().parents[2]
# Tokens out per trial: enough for a decode rate over several intervals; each one is a decode
# step on a shared two-core machine, and the module's runs make eleven trials.
MAX_TOKENS = 8


def _cli(args: list[str], home: Path) -> subprocess.CompletedProcess:
    return run_cli(args, home)


@pytest.fixture(scope="module")
def runs(llm_url, tmp_path_factory):
    """Run A: the whole speed suite, 3 trials a cell. Run B: the 128-token cell only, 2 trials
    (too few for a median). Both through the CLI."""
    home = tmp_path_factory.mktemp("cli-home")
    common = ["--url", llm_url, "--max-tokens", str(MAX_TOKENS), "--json"]
    done_a = _cli(["run", "--suites", "speed", "--trials", "3", *common], home)
    assert done_a.returncode == 0, done_a.stderr
    done_b = _cli(["run", "--tasks", "speed-p128-*", "--trials", "2", *common], home)
    assert done_b.returncode == 0, done_b.stderr
    a, b = json.loads(done_a.stdout), json.loads(done_b.stdout)
    return {
        "home": home,
        "a": a,
        "b": b,
        "bundle_a": json.loads(Path(a["path"]).read_text()),
        "bundle_b": json.loads(Path(b["path"]).read_text()),
    }


@pytest.mark.llm
def test_the_speed_run_writes_a_bundle_that_matches_the_schema(runs):
    bundle = runs["bundle_a"]
    assert validation_errors(bundle) == []
    assert bundle["status"] == "complete"
    assert bundle["benchmark_id"] == "benchloop"
    assert bundle["score_schema_version"] == "3.1.0"
    assert bundle["manifest_hash"].startswith("sha256:")
    assert bundle["engine"]["name"] == "llama.cpp"
    assert bundle["launch"]["context_length"] == 4096
    assert bundle["machine"]["backend"] == "llama.cpp"
    assert bundle["hardware"]["attributed"] is True
    assert bundle["scoring_mode"] == "local" and bundle["is_remote"] is False
    assert bundle["comparable"] is False  # --max-tokens changed the tasks
    assert bundle["comparability"]["reasons"] == [f"--max-tokens {MAX_TOKENS} caps the answers"]
    # Coverage counts tasks: all three of the speed profile's were scored.
    assert (bundle["comparability"]["tasks_scored"], bundle["coverage_score"]) == (3, 100.0)
    assert bundle["speed_method_version"] == "2"
    assert bundle["settings"]["speed_trial_rule"]["mode"] == "fixed"
    assert bundle["speed_score"] > 0
    # A speed-only run has no quality and no overall score (issue 15: it had quality 0).
    assert bundle["quality_score"] is bundle["overall_score"] is bundle["value_score"] is None
    assert bundle["bundle_schema_version"] == "1.1"


@pytest.mark.llm
def test_the_stack_is_named_from_the_server_and_its_weights_file(runs):
    bundle = runs["bundle_a"]
    weights = model_path()
    assert bundle["model"]["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert bundle["model"]["sha256_source"] == "gguf-file"
    assert bundle["model"]["file"] == weights.name  # the name, never the directory
    assert str(weights.parent) not in json.dumps(bundle)
    # The fixture server is a Python process: its command line is the launch command.
    assert bundle["launch"]["command_source"] == "process"
    assert "worker.engine.testing.xllama_launcher" in bundle["launch"]["command"]
    # The second run found the digest in the cache (keyed by path, size and mtime).
    cache = json.loads((runs["home"] / "weights-sha256.json").read_text())
    assert cache[str(weights.resolve())]["sha256"] == bundle["model"]["sha256"]
    assert runs["bundle_b"]["model"]["sha256"] == bundle["model"]["sha256"]
    block = bundle["contention"]
    assert block["status"] in ("clear", "contended", "unknown")
    assert block["gpu"]["status"] == "unknown" or block["gpu"]["source"] == "nvml"
    assert block["host"]["intervals"] >= 1


@pytest.mark.llm
def test_the_bundle_holds_every_sample_with_raw_timings(runs):
    tasks = runs["bundle_a"]["suites"]["speed"]["tasks"]
    assert len(tasks) == 3
    for task in tasks:
        trials = task["metadata"]["trials"]
        assert len(trials) == 3 and all(t["ok"] for t in trials), task["error"]
        assert len({t["nonce"] for t in trials}) == 3
        stopping = task["metadata"]["stopping"]
        assert (stopping["reason"], stopping["trials_run"]) == ("fixed", 3)
        target = task["metadata"]["prompt_tokens_target"]
        for trial in trials:
            assert trial["completion_tokens"] == MAX_TOKENS
            assert len(trial["timings"]["chunk_ms"]) == trial["completion_tokens"]
            assert trial["server"]["predicted_n"] == MAX_TOKENS
            assert trial["server"]["cache_n"] <= 8  # the nonce defeats the prompt cache
            assert abs(trial["prompt_tokens"] - target) / target < 0.1
    # The headline decode is the short-prompt cell's: its three trials, not all nine.
    assert runs["bundle_a"]["speed_summary"]["decode_tps"]["n"] == 3


@pytest.mark.llm
def test_the_summary_is_what_json_output_and_compare_print(runs):
    bundle = runs["bundle_a"]
    recomputed = speed_summary(bundle["suites"]["speed"]["tasks"])
    assert recomputed == bundle["speed_summary"]
    assert runs["a"]["speed_summary"] == bundle["speed_summary"]
    assert runs["a"]["client_run_id"] == bundle["client_run_id"]
    done = _cli(["compare", bundle["run_id"], runs["bundle_b"]["run_id"], "--json"], runs["home"])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    shared = ["speed-p128-n256"]
    assert result["shared_tasks"] == shared and len(result["only_a"]) == 2
    by_metric = {row["metric"]: row for row in result["metrics"]}
    a_shared = [s for s in speed_samples(bundle) if s["task_id"] in shared]
    for key, higher in (("decode_tps", True), ("prefill_tps", True), ("ttft_ms", False)):
        row = by_metric[key]
        # Like for like: A's figure is over the cell B also ran, not all three.
        assert row["a"] == summarize([s[key] for s in a_shared], higher_is_better=higher)
        assert (row["a"]["n"], row["b"]["n"]) == (3, 2)
        assert 0 < row["ratio_ci95_low"] <= row["ratio"] <= row["ratio_ci95_high"]
        assert row["tasks"] == 1 and 0 <= row["p_value"] <= 1
    # That cell is the one each run's headline decode comes from.
    assert by_metric["decode_tps"]["a"] == bundle["speed_summary"]["decode_tps"]
    assert by_metric["decode_tps"]["b"] == runs["bundle_b"]["speed_summary"]["decode_tps"]
    assert [t["task_id"] for t in result["tasks"]] == shared
    assert "2 speed task(s) only in A are left out" in result["warnings"]
    assert any(w.startswith("A is not comparable: ") for w in result["warnings"])
    assert "Welch" in result["method"] and "ratio" in result["method"]
    text = _cli(["compare", bundle["run_id"], runs["bundle_b"]["run_id"]], runs["home"]).stdout
    assert "decode tok/s" in text and "verdict" in text and "B ÷ A" in text
    decode = by_metric["decode_tps"]
    words = " ".join(text.split())  # the columns' spacing aside
    a = decode["a"]
    assert f"A {a['median']:,.1f} {a['ci95_low']:,.1f} to {a['ci95_high']:,.1f} 3" in words
    assert f"{decode['ratio']:.3f}× {decode['ratio_ci95_low']:.3f} to " in words
    # B's two trials: its figure is "n<3", never a median of two.
    assert result["tasks"][0]["b"]["median"] is None and "n<3: too few samples" in text


@pytest.mark.llm
def test_a_run_compared_with_itself_shows_no_significant_difference(runs):
    run_id = runs["bundle_a"]["run_id"]
    result = json.loads(_cli(["compare", run_id, run_id, "--json"], runs["home"]).stdout)
    assert all(not row["significant"] and row["delta"] == 0 for row in result["metrics"])


@pytest.mark.llm
def test_export_lists_both_runs_as_json_and_csv(runs):
    data = json.loads(_cli(["export", "--json"], runs["home"]).stdout)
    assert data["count"] == 2
    rows = {row["run_id"]: row for row in data["runs"]}
    row = rows[runs["bundle_a"]["run_id"]]
    assert row["decode_tps_median"] == runs["bundle_a"]["speed_summary"]["decode_tps"]["median"]
    assert row["speed_samples"] == 3
    text = _cli(["export", "--format", "csv"], runs["home"]).stdout
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert {r["run_id"] for r in parsed} == set(rows)


@pytest.mark.llm
def test_the_human_output_shows_tables_after_the_bundle_is_written(llm_url, bench_home, capsys):
    code = main(
        [
            "run",
            "--url",
            llm_url,
            "--tasks",
            "speed-p128-n256",
            "--trials",
            "1",
            "--max-tokens",
            "8",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    # Rich wraps cells to the terminal width (80 columns without a terminal), which may split
    # "decode tok/s" over two lines; look for the words, not the line.
    assert "llama.cpp" in printed and "Run summary" in printed
    assert re.search(r"decode\s.*tok/s", printed, re.DOTALL)
    (path,) = (bench_home / "runs").glob("*/run.json")
    assert str(path) in printed.splitlines()[-1]
    assert json.loads(path.read_text())["status"] == "complete"


@pytest.mark.llm
def test_ctrl_c_stops_cleanly_and_keeps_a_partial_bundle(llm_url, bench_home):
    env = {**os.environ, "BENCHLOOP_HOME": str(bench_home)}
    cmd = [sys.executable, "-m", "worker.cli", "run", "--url", llm_url, "--suites", "speed"]
    cmd += ["--trials", "1", "--max-tokens", "8", "--json"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = list((bench_home / "runs").glob("*/run.json"))
            if found:
                doc = json.loads(found[0].read_text())
                if doc["suites"].get("speed", {}).get("tasks"):
                    break
            time.sleep(0.1)
        else:
            pytest.fail("the run never finished a task")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, stderr
    assert b"Traceback" not in stderr
    summary = json.loads(stdout)
    assert summary["status"] == "incomplete"
    bundle = json.loads(Path(summary["path"]).read_text())
    assert bundle["status"] == "incomplete"
    assert bundle["error"]["kind"] == "interrupted"
    done = len(bundle["suites"]["speed"]["tasks"])
    assert 1 <= done < 3
    assert validation_errors(bundle) == []
    # Not comparable, with the reason; coverage is the share of the profile's tasks scored.
    block = bundle["comparability"]
    assert bundle["comparable"] is False
    assert block["reasons"][0] == f"interrupted after {done} of 3 tasks"
    assert block["tasks_scored"] == done and block["tasks_expected"] == 3
    assert bundle["coverage_score"] == round(100 * done / 3, 2)
