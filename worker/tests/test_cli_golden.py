"""Golden output at 80 columns: `run`'s summary and `compare`, from fixed bundles.

The bundles in data/cli/ were written by `benchloop run` against the llama.cpp fixture server
(data/cli/README.md). Set BENCHLOOP_UPDATE_GOLDEN=1 to rewrite the files after a deliberate
change, then read the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from worker.cli import main
from worker.cli_run import render_run
from worker.tests.cli_kit import console, fits, text_of

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
DATA = HERE / "data" / "cli"
IDS = {
    "speed-full": "20261201-173609-smollm2-135m-local-openai_compat-126d4e",
    "speed-p128": "20261201-173727-smollm2-135m-local-openai_compat-adb8f4",
    "smoke": "20261201-173906-smollm2-135m-local-openai_compat-0a2b5c",
}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("BENCHLOOP_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
    assert fits(text)


def bundle(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def install(home: Path, name: str, folder: str | None = None, **changes) -> Path:
    """Put a data bundle into ``home``'s runs folder, as `benchloop run` leaves it."""
    folder = folder or IDS[name]
    doc = bundle(name) | {"run_id": folder} | changes
    path = home / "runs" / folder / "run.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture
def wide(monkeypatch) -> Console:
    """The CLI's console, 80 columns wide, captured."""
    out = console()
    monkeypatch.setattr("worker.cli.out", out)
    return out


@pytest.mark.parametrize("name", ["speed-full", "smoke"])
def test_the_run_summary_matches_its_golden_file(name):
    out = console()
    render_run(out, bundle(name), f"/home/ada/.bench-loop/runs/{IDS[name]}/run.json")
    check_golden(f"run-{name}.txt", text_of(out))


def test_the_summary_names_every_task_and_version_in_full():
    out = console()
    render_run(out, bundle("smoke"), "run.json")
    text = text_of(out)
    for task in bundle("smoke")["suites"]["speed"]["tasks"]:
        assert f"\n{task['task_id']} " in text
    assert "measured with CLI 0.4.0 · benchmark 4.0.0 · score schema 3.1.0" in text
    # One format per unit: thousands separated, the same decimals in every row.
    assert "17,921" in text and "2,051" in text and " 0.0\n" in text


def test_compare_matches_its_golden_file(bench_home, wide):
    install(bench_home, "speed-full")
    install(bench_home, "speed-p128")
    # The short ids that `list` shows are what the user types.
    assert main(["compare", "126d4e", "adb8f4"]) == 0
    text = text_of(wide)
    check_golden("compare-speed-full-vs-p128.txt", text)
    # Human labels, never field names; intervals read "low to high", never with a minus.
    assert "_score" not in text and "decode_tps" not in text
    assert "0.802 to 1.018" in text and "–0." not in text and "-0." not in text


def test_compare_a_run_with_itself_finds_no_difference(bench_home, wide):
    install(bench_home, "smoke")
    assert main(["compare", "0a2b5c", "0a2b5c"]) == 0
    text = text_of(wide)
    assert "faster" not in text and text.count("1.000×") == 3 + 9
    assert fits(text)
