"""`benchloop list`: short ids that resolve, the site's answer per run, and where hints point."""

from __future__ import annotations

import json

from worker.cli import main
from worker.cli.listing import short_refs
from worker.tests.cli_kit import console, text_of
from worker.tests.test_cli_golden import install, submitted


def test_a_short_id_is_given_only_where_it_names_one_run():
    names = [
        "20261201-173609-a-local-openai_compat-126d4e",
        # Its tail is also in the next name, so it could open either.
        "20261201-173610-b-local-openai_compat-abc123",
        "20261201-173611-abc123-local-ollama-ffee01",
        # A tail a name starts with would be read as that prefix.
        "20261201-173612-c-local-ollama-202612",
        "20261130-050515-example-model-8b-local-fake",
    ]
    assert short_refs(names) == {
        names[0]: "126d4e",
        names[1]: names[1],
        names[2]: "ffee01",
        names[3]: names[3],
        names[4]: names[4],
    }


def test_no_runs_says_where_it_looked(bench_home, monkeypatch):
    out = console()
    monkeypatch.setattr("worker.cli.out", out)
    assert main(["list"]) == 0
    assert text_of(out).splitlines() == [
        "No runs yet. Start one with `benchloop run` (see `benchloop run --help`).",
        "bundles in:",
        str(bench_home / "runs"),
    ]


def test_json_lists_each_run_with_what_the_site_answered(bench_home, capsys):
    first = install(bench_home, "speed-full")
    submitted(first, "rejected", False)
    install(bench_home, "speed-p128")
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runs_dir"] == str(bench_home / "runs") and data["count"] == 2
    newest, oldest = data["runs"]
    assert newest["ref"] == "adb8f4" and newest["uploaded"] is False
    assert newest["site_answer"] == "no" and newest["url"] is None
    assert (newest["tasks_scored"], newest["tasks_expected"]) == (3, 9)
    # No site recorded to ask: what it answered then, said to be that.
    assert oldest["uploaded"] is True and oldest["site_answer"] == "last known: rejected"
    assert oldest["url"] == "https://x.test/r/1" and oldest["path"] == str(first)
    assert newest["model"] == "smollm2-135m" and newest["engine"] == "llama.cpp"


def test_an_unknown_run_points_to_list(bench_home, capsys):
    install(bench_home, "speed-full")
    install(bench_home, "speed-p128")
    assert main(["submit", "no-such-run", "--site", "http://127.0.0.1:9"]) == 2
    assert "hint: `benchloop list` shows the run ids." in capsys.readouterr().err
    assert main(["compare", "smollm2", "adb8f4"]) == 2
    err = capsys.readouterr().err
    assert "'smollm2' matches 2 runs" in err and "`benchloop list`" in err
    assert "export" not in err
