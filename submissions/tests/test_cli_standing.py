"""Issue 29, Must show 5: the real `benchloop` CLI, as a process, against a running site. `submit`
prints where the run stands (for a run waiting for review: where it would stand), and
`benchloop compare RUN --site URL` prints the standing for a local run id or a site run id."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from runs.models import Run
from submissions.models import Channel, Status, Submission
from submissions.services import moderate_submission
from worker.tests.cli_kit import REPO, WIDTH, run_cli

pytestmark = pytest.mark.django_db(transaction=True)
BUNDLES = REPO / "worker" / "tests" / "data" / "cli"


def _place(home: Path, name: str) -> str:
    """Put one of the CLI's recorded bundles (data/cli/README.md) in home's runs; its id."""
    bundle = json.loads((BUNDLES / f"{name}.json").read_text(encoding="utf-8"))
    folder = home / "runs" / bundle["run_id"]
    folder.mkdir(parents=True)
    shutil.copy(BUNDLES / f"{name}.json", folder / "run.json")
    return bundle["run_id"]


def _peers(run: Run, decodes: list[float]) -> None:
    """Published runs of the same stack on the same class: copies of `run`'s row with other
    decode speeds, each with its approved submission."""
    for n, decode in enumerate(decodes):
        copy = Run.objects.get(pk=run.pk)
        copy.pk = copy.id = None
        copy.fingerprint = f"peer-{n}-{run.fingerprint}"[:64]
        copy.client_run_id = f"peer-{n}"
        copy.decode_tps_median = decode
        copy.published = True
        copy.save()
        Submission.objects.create(
            run=copy, channel=Channel.IMPORT, status=Status.APPROVED, submitter_name="peer"
        )


def _said(result) -> str:
    """stdout as one line of text (sentences are wrapped to the terminal)."""
    return " ".join(line.strip() for line in result.stdout.splitlines())


def _fits(result, url: str) -> None:
    lines = result.stdout.splitlines()
    assert url in lines, result.stdout  # the link is a line of its own, whole
    assert all(len(line) <= WIDTH for line in lines if line != url), result.stdout


def test_submit_prints_the_standing_and_compare_asks_the_site(
    live_server, alice_key, bob, tmp_path, monkeypatch, settings
) -> None:
    settings.SITE_URL = live_server.url
    monkeypatch.setenv("BENCHLOOP_API_KEY", alice_key)
    home = tmp_path / "home"
    full = _place(home, "speed-full")

    sent = run_cli(["submit", full, "--site", live_server.url], home, columns=WIDTH)
    assert sent.returncode == 0, sent.stderr
    run = Submission.objects.get().run
    where = run.hardware_class.label
    url = f"{live_server.url}/runs/{run.id}/"
    _fits(sent, url)
    said = _said(sent)
    # Sent for review, alone in its lane: says so, and gives no percentile.
    assert "Where it stands:" in said and "This run waits for review" in said
    assert f"No other run of this stack on {where}" in said
    assert "No other stack of similar size" in said and not re.search(r"\bp\d", said)

    # Eight more published runs of the stack on the class; three slower than this one.
    decode = run.decode_tps
    _peers(run, [decode * f for f in (0.7, 0.8, 0.9, 1.1, 1.2, 1.3, 1.4, 1.5)])
    moderate_submission(submission=run.submission, status=Status.APPROVED, moderator=bob)

    # `compare RUN --site` with the local run's id: the 4th slowest of nine is p40.
    local = run_cli(["compare", full, "--site", live_server.url], home, columns=WIDTH)
    assert local.returncode == 0, local.stderr
    _fits(local, url)
    said = _said(local)
    assert f"This run is p40 of 9 runs of this stack on {where} by decode speed" in said
    assert "waits for review" not in said

    # By the site's run id, from another home with no key: a published run's standing is public.
    monkeypatch.delenv("BENCHLOOP_API_KEY")
    other = tmp_path / "elsewhere"
    by_id = run_cli(["compare", str(run.id), "--site", live_server.url], other, columns=WIDTH)
    assert by_id.returncode == 0, by_id.stderr
    assert f"This run is p40 of 9 runs of this stack on {where}" in _said(by_id)
    as_json = run_cli(["compare", url, "--json"], other)
    assert as_json.returncode == 0, as_json.stderr
    body = json.loads(as_json.stdout)
    assert (body["lane"]["n"], body["lane"]["percentile"], body["figure"]) == (9, 40, "decode")

    # A second run of the stack, sent for review: where it would stand among the nine.
    monkeypatch.setenv("BENCHLOOP_API_KEY", alice_key)
    p128 = _place(home, "speed-p128")
    second = run_cli(["submit", p128, "--site", live_server.url], home, columns=WIDTH)
    assert second.returncode == 0, second.stderr
    pending = Submission.objects.get(client_run_id=_client_id(home, p128)).run
    assert pending.stack_id == run.stack_id and not pending.published
    published = Run.objects.published().filter(stack=run.stack)
    slower = sum(1 for r in published if r.decode_tps < pending.decode_tps)
    said = _said(second)
    assert "This run waits for review" in said
    # Its rank among ten (the nine published and itself) ÷ 11.
    percentile = round(100 * (slower + 1) / 11)
    assert f"would be p{percentile} of 10 runs of this stack on {where}" in said
    # --json carries the same standing (here for the resend of the same run).
    again = run_cli(["submit", p128, "--site", live_server.url, "--json"], home)
    assert again.returncode == 0, again.stderr
    standing = json.loads(again.stdout)["standing"]
    assert standing["published"] is False and standing["lane"]["percentile"] == percentile


def _client_id(home: Path, run_id: str) -> str:
    return json.loads((home / "runs" / run_id / "run.json").read_text())["client_run_id"]


def test_compare_site_refuses_what_it_cannot_answer(live_server, alice_key, tmp_path, monkeypatch):
    """A local run never sent, a site run that is not there, two runs with --site: clear errors."""
    monkeypatch.setenv("BENCHLOOP_API_KEY", alice_key)
    home = tmp_path / "home"
    full = _place(home, "speed-full")
    never = run_cli(["compare", full, "--site", live_server.url], home)
    assert never.returncode == 2 and "was never sent to a site" in never.stderr
    missing = run_cli(["compare", "999999", "--site", live_server.url], home)
    assert missing.returncode == 2 and "shows no run 999999" in missing.stderr
    both = run_cli(["compare", full, full, "--site", live_server.url], home)
    assert both.returncode == 2 and "--site takes one run" in both.stderr
    alone = run_cli(["compare", full], home)
    assert alone.returncode == 2 and "one run and --site" in alone.stderr
