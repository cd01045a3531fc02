"""`benchloop run` says what a long run costs and asks first (issue 35), through the real CLI
against the real llama.cpp server: answered on a terminal, skipped with --yes, and never
blocking a script."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.engine.cost import budget
from worker.engine.orchestrator import prepare_run
from worker.engine.plan import RunConfig
from worker.tests.cli_kit import REPO

# A profile that is long on any machine this runs on: `full`, hours of tokens.
LONG = ["--profile", "full", "--no-model-hash"]
SENDS = re.compile(
    r"profile full sends about ([\d,]+) prompt tokens and generates at most ([\d,]+) "
    r"in ([\d,]+) requests"
)


class Cli:
    """The CLI as a process: stdin a terminal (a pty) or a pipe, stderr read as it comes."""

    def __init__(self, args: list[str], home: Path, *, terminal: bool):
        env = {**os.environ, "BENCHLOOP_HOME": str(home), "COLUMNS": "200"}
        self.home = home
        self.master = None
        stdin = subprocess.PIPE
        if terminal:
            self.master, slave = pty.openpty()
            stdin = slave
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "run", *args],
            cwd=REPO,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if terminal:
            os.close(slave)
        self.err = ""

    def wait_for(self, text: str, timeout: float = 600) -> str:
        """stderr until ``text`` appears (or the process ends)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stderr.fileno()
        while text not in self.err and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self.err += chunk.decode()
        return self.err

    def answer(self, line: str) -> None:
        os.write(self.master, line.encode())

    def started(self, timeout: float = 600) -> bool:
        """Whether the run's bundle appeared (the run started) within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if list((self.home / "runs").glob("*/run.json")):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.1)
        return False

    @property
    def said(self) -> str:
        """stderr with its line breaks undone (the CLI wraps long lines to the terminal)."""
        return " ".join(self.err.split())

    def finish(self, interrupt: bool = False) -> int:
        if interrupt:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, rest = self.proc.communicate(timeout=600)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
            if self.master is not None:
                os.close(self.master)
        self.err += rest.decode()
        return self.proc.returncode


def _expected(llm_url: str):
    """The budget of the same prepared run, computed here from the same suite data."""
    prep = prepare_run(RunConfig(url=llm_url, profile="full", hash_weights=False))
    try:
        return budget(prep.tasks, prep.config.trials, context_length=prep.limits.context_length)
    finally:
        prep.provider.close()


@pytest.mark.llm
def test_no_on_a_terminal_runs_nothing(llm_url, bench_home):
    cli = Cli(["--url", llm_url, *LONG], bench_home, terminal=True)
    err = cli.wait_for("Continue? [y/N]")
    assert "Continue? [y/N]" in err, err
    cli.answer("n\n")
    assert cli.finish() == 130, cli.err
    match = SENDS.search(cli.said)
    assert match, cli.err
    plan = _expected(llm_url)
    # Generated tokens do not depend on the probe's tokenizer reading: exactly the budget's.
    assert int(match[2].replace(",", "")) == plan.generated_tokens
    assert int(match[3].replace(",", "")) == plan.requests
    assert re.search(r"on this server that is at most about [\d.]+ (s|min|h) \(probe:", cli.said)
    assert "not started" in cli.said
    assert not (bench_home / "runs").exists() or not list((bench_home / "runs").iterdir())


@pytest.mark.llm
def test_yes_on_a_terminal_is_the_answer_and_the_run_starts(llm_url, bench_home):
    cli = Cli(["--url", llm_url, *LONG], bench_home, terminal=True)
    assert "Continue? [y/N]" in cli.wait_for("Continue? [y/N]")
    cli.answer("y\n")
    assert cli.started(), cli.wait_for("never", 5)
    cli.finish(interrupt=True)  # stopped at once, as Ctrl-C
    assert "not started" not in cli.err


@pytest.mark.llm
def test_the_yes_flag_skips_the_probe_and_the_question(llm_url, bench_home):
    cli = Cli(["--url", llm_url, *LONG, "--yes"], bench_home, terminal=True)
    assert cli.started(), cli.wait_for("never", 5)
    cli.finish(interrupt=True)
    assert SENDS.search(cli.said), cli.err  # the budget is still said
    assert "Continue?" not in cli.err
    assert "on this server" not in cli.said  # no probe: no time


@pytest.mark.llm
def test_a_script_without_a_terminal_is_told_and_never_blocked(llm_url, bench_home):
    cli = Cli(["--url", llm_url, *LONG, "--json"], bench_home, terminal=False)
    assert cli.started(), cli.wait_for("never", 5)
    cli.finish(interrupt=True)
    assert SENDS.search(cli.said), cli.err
    assert "on this server that is" in cli.said
    assert "not a terminal" in cli.said and "going ahead" in cli.said
    assert "Continue?" not in cli.err


@pytest.mark.llm
def test_a_short_run_is_not_asked_about(llm_url, bench_home):
    cli = Cli(
        # The speed suite's cheapest cell (one trial of 16 tokens out, cut to 8): far too short
        # a run to ask about.
        ["--url", llm_url, "--tasks", "speed-p512-n16", "--trials", "1", "--max-tokens", "8"],
        bench_home,
        terminal=True,
    )
    assert cli.finish() == 0, cli.err
    assert "sends about" not in cli.said and "Continue?" not in cli.said
