"""`benchloop info`: every suite with its task count, the profiles with totals, the harnesses."""

from __future__ import annotations

import json

from rich.console import Console

from worker.cli import main
from worker.engine.matrix.bounds import find_layout

SUITE_COUNTS = {
    "speed": 3,
    "speed_sweep": 8,
    "toolcall": 15,
    "coding": 12,
    "dataextract": 15,
    "instructfollow": 15,
    "reasonmath": 15,
    "longcontext": 4,
    "agent": 8,
    "loop_code_fix": 12,
    "loop_schema": 12,
    "matrix_bugfix": 2,
    "matrix_tools": 2,
    "matrix_long": 1,
}


def test_info_json_lists_suites_profiles_and_harnesses(bench_home, capsys):
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {name: s["task_count"] for name, s in info["suites"].items()} == SUITE_COUNTS
    totals = {name: p["task_count"] for name, p in info["profiles"].items()}
    assert totals == {
        "speed": 3,
        "smoke": 33,
        "core": 75,
        "full": 119,
        "speed-deep": 8,
        "matrix": 5,
    }
    assert all(p["available"] for p in info["profiles"].values())
    # None: adaptive, 3 to 10 trials a cell until its figures are narrow enough.
    assert {name: p["speed_trials"] for name, p in info["profiles"].items()} == {
        "speed": None,
        "smoke": 3,
        "core": None,
        "full": None,
        "speed-deep": 3,
        "matrix": None,
    }
    rules = {name: p["speed_trial_rule"] for name, p in info["profiles"].items()}
    assert (rules["speed"]["mode"], rules["speed"]["floor"], rules["speed"]["ceiling"]) == (
        "adaptive",
        3,
        10,
    )
    assert rules["smoke"]["mode"] == "fixed" and rules["smoke"]["ceiling"] == 3
    assert list(info["harnesses"]) == [
        "raw",
        "xml-tool-call",
        "xml-function-call",
        "think-xml-tool-call",
        "aider",
        "hermes-agent",
        "mini-swe-agent",
    ]
    assert "<function_call>" in info["harnesses"]["xml-function-call"]
    assert "aider-chat==0.86.2" in info["harnesses"]["aider"]


def test_info_table_shows_the_same(bench_home, capsys, monkeypatch):
    # Wide enough that no table cell wraps (capture is not a terminal, so Rich assumes 80).
    monkeypatch.setattr("worker.cli.info.out", Console(width=220, highlight=False))
    assert main(["info", "--all"]) == 0
    text = capsys.readouterr().out
    for name, count in SUITE_COUNTS.items():
        assert any(name in line and f" {count} " in line for line in text.splitlines()), name
    for profile, total in (("smoke", "33"), ("core", "75"), ("full", "119"), ("speed-deep", "8")):
        assert any(profile in line and total in line for line in text.splitlines()), profile
    assert "Harnesses (--harness)" in text
    # Every figure of the depth and concurrency sweeps is described.
    assert "Depth and concurrency sweeps" in text
    for figure in ("depth_tokens", "aggregate_tps", "per_stream_tps", "ttft_tail_ms"):
        assert figure in text, figure
    for harness in ("raw (default)", "xml-tool-call", "think-xml-tool-call", "mini-swe-agent"):
        assert harness in text


def test_info_reports_the_code_sandbox(bench_home, capsys, monkeypatch):
    assert main(["info", "--json"]) == 0
    sandbox = json.loads(capsys.readouterr().out)["sandbox"]
    assert sandbox["level"] == "os" and "seccomp" in sandbox["detail"]
    monkeypatch.setattr("worker.cli.info.out", Console(width=400, highlight=False))
    assert main(["info"]) == 0
    assert f"Code sandbox: os · {sandbox['detail']}" in capsys.readouterr().out


def test_info_describes_the_thinking_budget_the_token_split_and_the_first_answer_token(
    bench_home, capsys, monkeypatch
):
    assert main(["info", "--json"]) == 0
    reasoning = json.loads(capsys.readouterr().out)["reasoning"]
    assert (reasoning["default_thinking_budget"], reasoning["max_tokens_ceiling"]) == (2048, 32768)
    monkeypatch.setattr("worker.cli.info.out", Console(width=220, highlight=False))
    assert main(["info", "--all"]) == 0
    text = capsys.readouterr().out
    assert "Reasoning models" in text
    for phrase in ("--thinking-budget N", "reasoning_token_source", "ttft_answer_ms"):
        assert phrase in text, phrase


def test_info_all_says_which_mechanism_bounds_the_harness_cage(bench_home, capsys, monkeypatch):
    assert main(["info", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)["harness_cage"]
    layout = find_layout()
    expected = f"cgroup v{layout.version} per run" if layout else "rlimits only"
    assert said.startswith(expected), said
    assert "rlimits per process: address space 4096 MiB" in said
    assert "private /tmp 256 MiB and /dev/shm 64 MiB" in said
    monkeypatch.setattr("worker.cli.info.out", Console(width=400, highlight=False))
    assert main(["info", "--all"]) == 0
    assert f"Harness cage bounds: {said}" in capsys.readouterr().out
