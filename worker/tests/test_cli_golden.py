"""Golden output at 80 columns: `run`'s summary, `compare` and `list`, from fixed bundles.

The bundles in data/cli/ were written by `benchloop run` against the llama.cpp fixture server
(data/cli/README.md). Set BENCHLOOP_UPDATE_GOLDEN=1 to rewrite the files after a deliberate
change, then read the diff.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from worker.cli import main
from worker.cli.run import render_run
from worker.engine.bundle import find_run
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


def submitted(path: Path, review: str, published: bool) -> None:
    record = {"ok": True, "review": review, "published": published, "url": "https://x.test/r/1"}
    (path.parent / "submission.json").write_text(json.dumps(record))


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


def list_home(home: Path, fixtures_dir: Path) -> None:
    """Seven runs: uploaded or not, complete, cut short, unreadable, and the earlier CLI's."""
    submitted(install(home, "speed-full"), "pending", False)
    install(home, "speed-p128")
    submitted(install(home, "smoke"), "approved", True)
    full = bundle("speed-full")
    comparability = full["comparability"] | {"tasks_scored": 4, "comparable": False}
    install(
        home,
        "speed-full",
        "20261201-180211-smollm2-135m-local-openai_compat-9f3e21",
        status="incomplete",
        timestamp="2026-12-01T18:02:11.004211+00:00",
        comparability=comparability,
    )
    broken = home / "runs" / "20261201-190000-qwen3-8b-local-ollama-c0ffee" / "run.json"
    broken.parent.mkdir()
    broken.write_text("{ not json")
    for name, folder in (
        ("v3-full-local", "20261130-050515-example-model-8b-local-fake"),
        ("v2-0.2.3-local", "20261130-050554-example-model-8b"),
    ):
        target = home / "runs" / folder
        shutil.copytree(fixtures_dir / "generated" / name, target)


def test_list_matches_its_golden_file(bench_home, wide, fixtures_dir):
    list_home(bench_home, fixtures_dir)
    assert main(["list"]) == 0
    text = text_of(wide).replace(str(bench_home), "~/.bench-loop")
    check_golden("list.txt", text)


def test_every_id_list_shows_opens_its_run(bench_home, capsys, fixtures_dir):
    list_home(bench_home, fixtures_dir)
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["runs"]
    assert len(rows) == 7
    assert [row["ref"] for row in rows[:4]] == ["c0ffee", "9f3e21", "0a2b5c", "adb8f4"]
    for row in rows:
        assert find_run(row["ref"]) == Path(row["path"])
        assert find_run(row["id"]) == Path(row["path"])
