"""Issue 32, the CLI's rough edges, against the real llama.cpp server: compare with nothing in
common, an interruption said once, a short `info`, a sweep-only run's speed "not scored", and
`list` marking a run in progress. The site's side is submissions/tests/test_cli_states.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.cli import main
from worker.cli.listing import RUNNING_FILE, list_rows
from worker.tests.cli_kit import run_cli

REPO = Path(__file__).resolve().parents[2]
WIDTH = 80
QUICK = ["--trials", "1", "--max-tokens", "8"]


def _cli(args: list[str], home: Path) -> subprocess.CompletedProcess:
    return run_cli(args, home, WIDTH)


@pytest.fixture(scope="module")
def two_runs(llm_url, tmp_path_factory):
    """A speed run of one task, and a run of the depth sweep alone: no speed task in common."""
    home = tmp_path_factory.mktemp("rough-home")
    speed = _cli(["run", "--url", llm_url, "--tasks", "speed-p128-n256", *QUICK, "--json"], home)
    assert speed.returncode == 0, speed.stderr
    sweep_args = ["run", "--url", llm_url, "--suites", "speed_sweep", "--trials", "1"]
    sweep_args += ["--depths", "0", "--concurrency", "1"]
    sweep_args += ["--sweep-prompt-tokens", "32", "--sweep-output-tokens", "8"]
    sweep = _cli(sweep_args, home)
    assert sweep.returncode == 0, sweep.stderr
    (sweep_bundle,) = [
        json.loads(p.read_text())
        for p in home.glob("runs/*/run.json")
        if p.parent.name != json.loads(speed.stdout)["run_id"]
    ]
    return {
        "home": home,
        "speed": json.loads(speed.stdout),
        "sweep_out": sweep.stdout,
        "sweep": sweep_bundle,
    }


@pytest.mark.llm
def test_compare_with_no_shared_task_says_so_and_fails(two_runs):
    a, b = two_runs["speed"]["run_id"], two_runs["sweep"]["run_id"]
    done = _cli(["compare", a, b], two_runs["home"])
    assert done.returncode == 2, done.stdout
    assert "no speed task in common: nothing to compare" in " ".join(done.stderr.split())
    assert done.stdout == ""  # no tables of dashes
    as_json = _cli(["compare", a, b, "--json"], two_runs["home"])
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"]["kind"] == "usage"


@pytest.mark.llm
def test_a_sweep_only_run_prints_its_speed_as_not_scored(two_runs):
    lines = two_runs["sweep_out"].splitlines()
    (header,) = [i for i, line in enumerate(lines) if line.split()[:2] == ["overall", "quality"]]
    scores = dict(zip(lines[header].split(), lines[header + 2].split(), strict=True))
    assert scores["speed"] == "–" and scores["reliability"] != "–"
    assert "speed 0.0" not in two_runs["sweep_out"]


@pytest.mark.llm
def test_an_interruption_is_said_once(llm_url, bench_home):
    env = {**os.environ, "BENCHLOOP_HOME": str(bench_home), "COLUMNS": str(WIDTH)}
    cmd = [sys.executable, "-m", "worker.cli", "run", "--url", llm_url, "--profile", "smoke"]
    proc = subprocess.Popen(
        [*cmd, *QUICK], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not list((bench_home / "runs").glob(f"*/{RUNNING_FILE}")):
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.1)
        (folder,) = [p.parent for p in (bench_home / "runs").glob(f"*/{RUNNING_FILE}")]
        # While it runs, `list` says so (not "incomplete").
        (row,) = list_rows(bench_home / "runs")
        assert row["status"] == "running"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, stderr
    text = stdout.decode()
    assert text.count("interrupted after ") == 1, text
    assert "of 33 tasks" in text
    # The marker went with the process: the run is "incomplete" now, not "running".
    assert not (folder / RUNNING_FILE).exists()
    (row,) = list_rows(bench_home / "runs")
    assert row["status"] == "incomplete"


def test_info_is_short_unless_asked_for_all(bench_home, capsys):
    assert main(["info"]) == 0
    short = capsys.readouterr().out
    assert len(short.splitlines()) <= 20, short
    assert "benchloop info --all" in short and "Harnesses" not in short
    assert "speed (3)" in short and "smoke: 33 tasks" in short
    assert main(["info", "--all"]) == 0
    full = capsys.readouterr().out
    assert "Harnesses (--harness)" in full and "Reasoning models" in full
    assert len(full.splitlines()) > 3 * len(short.splitlines())


def test_a_long_bundle_path_is_never_wider_than_the_terminal(monkeypatch, tmp_path):
    """A path the terminal would wrap is shown as ~/…, else as its folder: whole on its line."""
    from worker.cli.formatting import whole_path

    monkeypatch.setenv("HOME", str(tmp_path))
    run_id = "20261204-222731-smollm2-135m-local-openai_compat-c21325"
    path = f"{tmp_path}/.bench-loop/runs/{run_id}/run.json"
    assert whole_path("bundle", "/r/run.json", WIDTH) == "bundle: /r/run.json"
    label, shown = whole_path("bundle", path, WIDTH).split("\n")
    assert len(shown) <= WIDTH and label in ("bundle:", "bundle folder:")
    assert Path(shown.replace("~", str(tmp_path), 1)) in (Path(path), Path(path).parent)
