"""The real `benchloop submit --from FILE` (a subprocess, at 80 columns) against the real site
(pytest-django's live_server), with the real llama-bench and llama-benchy outputs in
runs/tests/data/external: what it says before and after, what the site stored, repeats and
refusals. The CLI's side alone: worker/tests/test_cli_submit_from.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runs import normalize
from runs.models import Run
from submissions.models import Submission
from worker.engine.hardware import detect_hardware

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "runs/tests/data/external"
FILES = [entry["file"] for entry in json.loads((DATA / "manifest.json").read_text())["files"]]
LLAMA_BENCH = "llama-bench.json"
LLAMA_BENCHY = "llama-benchy.json"


def _submit(*args: str, key: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHLOOP_HOME": str(home), "BENCHLOOP_API_KEY": key, "COLUMNS": "80"}
    env.pop("BENCHLOOP_SITE", None)
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", "submit", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _said(output: str) -> str:
    """The output as one text: Rich breaks long sentences at the terminal's width."""
    return " ".join(output.split())


def _lines(output: str) -> list[str]:
    return [line.rstrip() for line in output.splitlines()]


def test_a_llama_bench_file_is_sent_and_each_run_is_named_with_its_link(
    live_server, alice, alice_key, tmp_path, settings
) -> None:
    settings.SITE_URL = live_server.url
    path = DATA / LLAMA_BENCH
    sent = _submit("--from", str(path), "--site", live_server.url, key=alice_key, home=tmp_path)
    assert sent.returncode == 0, sent.stderr
    # Before sending: the file, its size, and the site (a URL, whole on its own line).
    size = len(path.read_text().encode())
    assert _lines(sent.stderr)[:2] == [
        f"Sending {LLAMA_BENCH} ({size:,} bytes) to",
        live_server.url,
    ]

    run = Run.objects.select_related("stack", "hardware_class").get()
    assert run.method == "llama-bench" and run.submission.submitter == alice
    said = _said(sent.stdout)
    assert said.startswith(f"Stored 1 run from {LLAMA_BENCH}: ")
    assert (
        f"run {run.pk}, llama-bench: {run.stack.label}, on {run.hardware_class.label} "
        "— pending review"
    ) in said
    assert " hardware: from the file " in said
    assert "cells: pp64, tg16, pp64+tg16, sweep-depth-0, sweep-depth-256" in said
    # The link is whole, on a line of its own, at 80 columns.
    assert f"{live_server.url}/runs/{run.pk}/" in _lines(sent.stdout)
    assert said.endswith("once a moderator approves them.")

    again = _submit("--from", str(path), "--site", live_server.url, key=alice_key, home=tmp_path)
    assert again.returncode == 0, again.stderr
    assert _said(again.stdout).startswith(f"{LLAMA_BENCH} is on the site already (1 run): ")
    assert "pending review (already on the site)" in _said(again.stdout)
    assert Run.objects.count() == 1


def test_a_llama_benchy_file_takes_this_machines_hardware_and_says_so(
    live_server, alice_key, tmp_path, settings
) -> None:
    settings.SITE_URL = live_server.url
    path = DATA / LLAMA_BENCHY
    sent = _submit("--from", str(path), "--site", live_server.url, key=alice_key, home=tmp_path)
    assert sent.returncode == 0, sent.stderr
    machine = detect_hardware()
    said = _said(sent.stdout)
    assert (
        f"hardware: this machine's ({machine['label']}), since the file names none — "
        "pass --hardware to say otherwise"
    ) in said
    runs = Run.objects.select_related("hardware", "stack").order_by("id")
    assert runs and all(run.method == "llama-benchy" for run in runs)
    for run in runs:
        assert run.provenance["hardware_source"] == "submitter"
        assert run.hardware.cpu_model == normalize.canonical_cpu(machine["cpu_model"])
        assert run.hardware.ram_gb == round(machine["ram_gb"])
        assert f"run {run.pk}, llama-benchy: {run.stack.label}, on " in said
        assert f"{live_server.url}/runs/{run.pk}/" in _lines(sent.stdout)


@pytest.mark.parametrize("name", FILES)
def test_every_format_goes_through_submit_from(
    live_server, alice_key, tmp_path, name, settings
) -> None:
    """Must show 1: each real output, in every format of both tools, through the CLI; each
    stored run is named with its method and linked."""
    settings.SITE_URL = live_server.url
    sent = _submit(
        "--from", str(DATA / name), "--site", live_server.url, key=alice_key, home=tmp_path
    )
    assert sent.returncode == 0, sent.stderr
    runs = list(Run.objects.select_related("stack").order_by("id"))
    method = "llama-benchy" if name.startswith("llama-benchy") else "llama-bench"
    assert runs and all(run.method == method for run in runs)
    assert _said(sent.stdout).startswith(f"Stored {len(runs)} run")
    for run in runs:
        assert f"run {run.pk}, {method}: {run.stack.label}" in _said(sent.stdout)
        assert f"{live_server.url}/runs/{run.pk}/" in _lines(sent.stdout)


def test_hardware_named_with_the_option_is_used_and_said(
    live_server, alice_key, tmp_path, settings
) -> None:
    settings.SITE_URL = live_server.url
    sent = _submit(
        "--from",
        str(DATA / LLAMA_BENCHY),
        "--hardware",
        "RTX 4090 24 GB",
        "--site",
        live_server.url,
        key=alice_key,
        home=tmp_path,
    )
    assert sent.returncode == 0, sent.stderr
    assert "hardware: as given by --hardware" in _said(sent.stdout)
    for run in Run.objects.select_related("hardware"):
        assert (run.hardware.gpu_model, run.hardware.vram_gb) == ("RTX 4090", 24.0)
        assert run.provenance["hardware_source"] == "override"


def test_a_file_the_site_cannot_read_is_one_sentence_with_its_position(
    live_server, alice_key, tmp_path
) -> None:
    truncated = tmp_path / LLAMA_BENCH
    text = (DATA / LLAMA_BENCH).read_text()
    truncated.write_text(text[: len(text) // 2])
    sent = _submit(
        "--from", str(truncated), "--site", live_server.url, key=alice_key, home=tmp_path
    )
    assert sent.returncode == 5
    said = _said(sent.stderr)
    assert f"error: the site could not read {LLAMA_BENCH}: line " in said
    assert "column" in said and "invalid JSON" in said and "Traceback" not in said
    assert not Submission.objects.exists() and not Run.objects.exists()
