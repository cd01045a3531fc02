"""CLI exit codes and error messages: hints, JSON errors, and never a traceback for user errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker.cli import main
from worker.engine import __version__
from worker.engine.testing.xllama_launcher import free_port

REPO = Path(__file__).resolve().parents[2]


def test_a_server_that_is_down_exits_3_with_a_hint(bench_home, capsys):
    assert main(["run", "--url", f"http://127.0.0.1:{free_port()}"]) == 3
    err = capsys.readouterr().err
    assert "error:" in err and "hint:" in err and "Traceback" not in err
    assert not (bench_home / "runs").exists()  # nothing ran, nothing written


def test_errors_are_json_too_when_asked(bench_home, capsys):
    assert main(["run", "--url", f"http://127.0.0.1:{free_port()}", "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert data == {"ok": False, "exit_code": 3, "error": data["error"]}
    assert data["error"]["kind"] == "unreachable" and data["error"]["hint"]


@pytest.mark.llm
def test_an_unknown_model_exits_2_and_lists_what_is_served(llm_url, bench_home, capsys):
    assert main(["run", "--url", llm_url, "--model", "qwen3:8b"]) == 2
    err = capsys.readouterr().err
    assert "qwen3:8b" in err and "smollm2-135m" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--url", "ftp://example.com"],
        ["run", "--url", "http://127.0.0.1:9", "--suites", "no-such-suite"],
        ["run", "--url", "http://127.0.0.1:9", "--profile", "nope"],
        ["run", "--url", "http://127.0.0.1:9", "--trials", "0"],
        ["compare", "no-such-run", "other"],
        ["submit", "no-such-run", "--site", "http://127.0.0.1:9"],
        ["export", "no-such-run"],
    ],
)
def test_user_errors_exit_2_without_a_traceback(argv, bench_home, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


def test_bad_flags_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["run", "--provider", "bogus"])
    assert caught.value.code == 2


def test_no_runs_yet_is_a_user_error(bench_home, capsys):
    assert main(["compare", "latest", "latest"]) == 2
    assert "no runs yet" in capsys.readouterr().err


def test_python_dash_m_and_the_console_script_both_work(bench_home):
    env = {**os.environ, "BENCHLOOP_HOME": str(bench_home)}
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "--version"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    # Each version with its name: the CLI's, the benchmark's and the score schema's.
    expected = f"benchloop CLI {__version__} · benchmark 4.1.0 · score schema 3.1.0"
    assert done.returncode == 0 and done.stdout.strip() == expected
    script = Path(sys.executable).with_name("benchloop")
    if not script.exists():
        pytest.skip("console script not installed (pip install -e . --no-deps)")
    done = subprocess.run(
        [str(script), "info", "--json"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["suites"]["speed"]["task_count"] == 3
    assert info["profiles"]["speed"]["available"] is True
    assert info["profiles"]["core"]["missing_suites"] == []
    assert info["suites"]["toolcall"]["task_count"] == 15
    assert info["hardware"]["cpu_model"]
