"""The CLI at the terminal's width: the live progress line, $COLUMNS, and a real run at 80."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from worker.cli import main
from worker.cli.display import RunDisplay
from worker.cli.run import render_run
from worker.engine.adaptive import adaptive_rule
from worker.engine.suites import available_suites
from worker.tests.cli_kit import WIDTH, console, fits, run_cli, text_of
from worker.tests.test_cli_golden import GOLDEN, install

REPO = Path(__file__).resolve().parents[2]
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _frames(raw: str) -> list[str]:
    """Every line a live terminal was sent, redraws included."""
    return [line for line in _CONTROL.sub("\n", raw).replace("\r", "\n").split("\n") if line]


def _play(
    display: RunDisplay, tasks: dict[str, list[dict]], trials: int, ceiling: int | None = None
) -> None:
    """The events of a run, as the orchestrator sends them, redrawing after each; with a
    ``ceiling``, the speed cells may take up to that many trials and each stops at ``trials``."""
    counts = {suite: len(task_list) for suite, task_list in tasks.items()}
    started = {"type": "run_started", "speed_trials": trials, "suite_task_counts": counts}
    most = {"trials": ceiling or trials}
    if ceiling:
        started["speed_trial_rule"] = adaptive_rule(trials, ceiling)
        most["trials_floor"] = trials
    events = [started]
    for suite, task_list in tasks.items():
        for task in task_list:
            events.append({"type": "task_started", "task_id": task["id"], "suite": suite})
            for trial in range(1, trials + 1 if suite == "speed" else 1):
                live = {"type": "task_progress", "live_tps": 1234.56, "trial": trial}
                done = {"type": "trial_completed", "task_id": task["id"], "decode_tps": 98.7}
                events += [live | most | {"task_id": task["id"]}, done]
            events.append({"type": "task_completed", "task_id": task["id"], "suite": suite})
    events.append({"type": "run_completed", "status": "complete"})
    for event in events:
        display.on_event(event)
        display.progress.refresh()


@pytest.mark.parametrize(("width", "ceiling"), [(80, None), (120, None), (80, 10)])
def test_the_progress_line_names_each_task_in_full_within_the_width(width, ceiling):
    suites = available_suites()
    tasks = {name: suites[name].tasks for name in ("speed", "coding")}
    out = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    with RunDisplay(out, tasks) as display:
        _play(display, tasks, trials=3, ceiling=ceiling)
    frames = _frames(out.file.getvalue())
    assert max(len(line) for line in frames) <= width
    shown = " ".join(frames)
    for task in (t for task_list in tasks.values() for t in task_list):
        assert f" {task['id']} " in shown, task["id"]
    # Three speed cells of three trials and twelve coding tasks. An adaptive cell may take up
    # to its ceiling: the count says "up to", shows trial k of up to N, and the trials a cell
    # did not need leave the total when it ends (42 at the start, 21 at the end).
    most = "≤" if ceiling else ""
    assert re.search(
        rf" complete +━+ 21/{most}21 +0:00:0\d ETA 0:00 +98\.7 tok/s$", frames[-1].rstrip()
    )
    assert "1,234.6 tok/s" in shown  # the live rate, with its thousands separator
    assert f" speed-p2048-n256 2/{most}{ceiling or 3} " in shown
    if ceiling:
        assert "/≤42 " in shown


def test_compare_follows_columns(bench_home):
    install(bench_home, "speed-full")
    install(bench_home, "speed-p128")
    at_80 = run_cli(["compare", "126d4e", "adb8f4"], bench_home, 80)
    assert at_80.returncode == 0, at_80.stderr
    golden = (GOLDEN / "compare-speed-full-vs-p128.txt").read_text(encoding="utf-8")
    assert "".join(line.rstrip() + "\n" for line in at_80.stdout.splitlines()) == golden
    at_120 = run_cli(["compare", "126d4e", "adb8f4"], bench_home, 120)
    assert max(len(line) for line in at_120.stdout.splitlines()) > WIDTH
    assert fits(at_120.stdout, 120)
    # The closing note wraps at the width it is given: three lines at 80, two at 120.
    notes = [done.stdout.rstrip().split("\n\n")[-1].splitlines() for done in (at_80, at_120)]
    assert [len(note) for note in notes] == [3, 2]


@pytest.mark.llm
def test_a_real_run_prints_the_summary_within_80_columns(llm_url, bench_home):
    args = ["run", "--url", llm_url, "--tasks", "speed-p128-*", "--trials", "3"]
    done = run_cli([*args, "--max-tokens", "16"], bench_home, WIDTH)
    assert done.returncode == 0, done.stderr
    assert fits(done.stdout), done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == "benchloop CLI 0.4.0 · benchmark 4.1.0 · score schema 3.1.0"
    # The server line wraps at a word where it is long: xllamacpp reports no build.
    progress = next(i for i, line in enumerate(lines) if line.startswith("  complete "))
    server = " ".join(line.strip() for line in lines[1 : progress - 1])
    assert server.startswith("llama.cpp (build not reported by the server) · model smollm2-135m")
    assert lines[progress - 1] == "  profile speed · 1 tasks · 3 trials per speed task"
    assert re.fullmatch(
        r"  complete +━+ 3/3 +\d:\d\d:\d\d ETA 0:00 +[\d,.]+ tok/s *", lines[progress]
    )
    (path,) = (bench_home / "runs").glob("*/run.json")
    bundle = json.loads(path.read_text())
    # What follows the progress line is the golden-tested summary of the bundle it wrote.
    expected = console()
    render_run(expected, bundle, str(path))
    assert "".join(line.rstrip() + "\n" for line in lines[progress + 1 :]) == text_of(expected)
    assert any(line.startswith("speed-p128-n256 ") for line in lines)


@pytest.mark.parametrize(
    "command", [[], ["run"], ["list"], ["compare"], ["submit"], ["info"], ["matrix"], ["harness"]]
)
def test_help_fits_80_columns(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    assert "usage: benchloop" in text and fits(text)
