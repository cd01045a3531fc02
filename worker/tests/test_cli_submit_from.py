"""`benchloop submit --from FILE` on this side of the wire: a file that cannot be sent is a
usage error naming it, options that do not go together are refused, this machine is described
by the engine's own detection, and an unreachable site exits 3. The CLI against a live site:
submissions/tests/test_cli_submit_from.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.cli import main
from worker.cli.submit_from import hardware_note, this_machine
from worker.engine.hardware import detect_hardware
from worker.engine.testing.xllama_launcher import free_port

LLAMA_BENCH_MD = (
    "| model | size | params | backend | threads | test | t/s |\n"
    "| --- | ---: | ---: | --- | ---: | ---: | ---: |\n"
)


def _unsendable(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Files that are not results text, each with the words its error must hold."""
    binary = tmp_path / "model.gguf"
    binary.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(64))
    latin = tmp_path / "latin1.md"
    latin.write_bytes(LLAMA_BENCH_MD.encode() + "| café |".encode("latin-1"))
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    folder = tmp_path / "results"
    folder.mkdir()
    return {
        "missing": (tmp_path / "nope.json", "no such file"),
        "folder": (folder, "is a folder"),
        "binary": (binary, "is not a text file"),
        "not utf-8": (latin, "is not UTF-8 text"),
        "empty": (empty, "is empty"),
    }


@pytest.mark.parametrize("case", ["missing", "folder", "binary", "not utf-8", "empty"])
def test_a_file_that_cannot_be_sent_is_named_and_exits_2(case, tmp_path, bench_home, capsys):
    path, words = _unsendable(tmp_path)[case]
    # The file is read before any site or key is looked for: no site is needed to be told.
    assert main(["submit", "--from", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {words}" if case == "missing" else f"error: {path.name} {words}")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["submit", "some-run", "--from", "x.json"], "not both"),
        (["submit", "--hardware", "RTX 4090 24 GB"], "--hardware names the machine"),
        (["submit", "--from", "x.json", "--allow-incomplete"], "for run bundles"),
    ],
)
def test_options_that_do_not_go_together_exit_2(argv, words, bench_home, capsys):
    assert main(argv) == 2
    assert words in capsys.readouterr().err


def test_an_unreachable_site_exits_3_after_naming_what_it_sends(tmp_path, bench_home, capsys):
    results = tmp_path / "llama-bench.md"
    results.write_text(LLAMA_BENCH_MD)
    site = f"http://127.0.0.1:{free_port()}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLOOP_API_KEY", "bl_not_needed_here")
        assert main(["submit", "--from", str(results), "--site", site]) == 3
    err = capsys.readouterr().err
    assert f"Sending llama-bench.md ({len(LLAMA_BENCH_MD)} bytes) to\n{site}\n" in err
    assert "error:" in err and "Traceback" not in err


def test_no_key_for_the_site_exits_4(tmp_path, bench_home, capsys):
    results = tmp_path / "llama-bench.md"
    results.write_text(LLAMA_BENCH_MD)
    assert main(["submit", "--from", str(results), "--site", "http://127.0.0.1:9"]) == 4


def test_this_machine_is_what_the_engine_detects():
    machine, label = this_machine()
    hw = detect_hardware()
    assert machine["cpu"] == hw["cpu_model"] and machine["ram_gb"] == hw["ram_gb"]
    assert machine["os"] == hw["os"] and machine["gpu_count"] == len(hw["gpus"])
    assert label == hw["label"]


def test_where_the_hardware_came_from_is_said_in_words():
    assert hardware_note("file", "x") == "hardware: from the file"
    assert hardware_note("override", "x") == "hardware: as given by --hardware"
    assert hardware_note("submitter", "Xeon 8GB RAM") == (
        "hardware: this machine's (Xeon 8GB RAM), since the file names none — "
        "pass --hardware to say otherwise"
    )
