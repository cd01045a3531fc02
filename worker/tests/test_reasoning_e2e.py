"""A model that thinks first, on a real llama.cpp server (issue 17, Must show 3).

The server's grammar (data/reasoning/think-first.gbnf) makes every answer open with ten lines of
thinking inside <think> tags, a couple of hundred tokens, before one ANSWER line whose digits the
model picks itself. Its chat template shows llama.cpp where reasoning goes, so with the
"deepseek" parser the thinking arrives as reasoning_content; with "none" it stays inline in the
content. Both paths run the same original task through the CLI: with the task's own answer cap
the answer is cut off inside the thinking; with the automatic thinking budget (the warm-up
answer reasoned) it passes, and the bundle counts the reasoning tokens apart from the answer's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker.engine.bundle import validation_errors
from worker.engine.testing.xllama_launcher import start_server
from worker.rules.reasoning import DEFAULT_THINKING_BUDGET

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("data") / "reasoning"
ANSWER_CAP = 64  # thinkcheck.suite.json's max_tokens, far below the thinking's length


@pytest.fixture(scope="module", params=["deepseek", "none"], ids=["reasoning_content", "inline"])
def thinking_server(request, tmp_path_factory):
    """One server at a time: llama.cpp's reasoning parser on ("deepseek") or off ("none")."""
    handle = start_server(
        log_dir=tmp_path_factory.mktemp("think-server"),
        grammar_file=DATA / "think-first.gbnf",
        chat_template_file=DATA / "think-template.jinja",
        reasoning_format=request.param,
    )
    try:
        yield request.param, handle.base_url
    finally:
        handle.stop()


def _run(url: str, home: Path, *flags: str) -> tuple[dict, str]:
    """`benchloop run --suites thinkcheck` in a process of its own: (bundle, printed summary)."""
    env = {
        **os.environ,
        "BENCHLOOP_HOME": str(home),
        "BENCHLOOP_SUITES_PATH": str(DATA),
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run", "--url", url, "--suites", "thinkcheck", *flags],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    bundles = sorted(home.glob("runs/*/run.json"), key=lambda p: p.stat().st_mtime)
    assert bundles, done.stderr
    return json.loads(bundles[-1].read_text()), done.stdout + done.stderr


@pytest.fixture(scope="module")
def runs(thinking_server, tmp_path_factory):
    parser, url = thinking_server
    home = tmp_path_factory.mktemp(f"think-home-{parser}")
    capped, _ = _run(url, home, "--thinking-budget", "0")
    budgeted, text = _run(url, home)
    return {"parser": parser, "capped": capped, "budgeted": budgeted, "text": text}


def _task(bundle: dict) -> dict:
    return bundle["suites"]["thinkcheck"]["tasks"][0]


@pytest.mark.llm
def test_with_the_answer_cap_alone_the_answer_is_cut_off_inside_the_thinking(runs):
    bundle = runs["capped"]
    task = _task(bundle)
    meta = task["metadata"]
    assert validation_errors(bundle) == []
    assert bundle["settings"]["reasoning_detected"] is True
    assert (
        bundle["settings"]["thinking_budget"],
        bundle["settings"]["thinking_budget_source"],
    ) == (
        0,
        "option",
    )
    assert task["finish_reason"] == "length" and task["tokens_generated"] == ANSWER_CAP
    assert task["passed"] is False
    assert meta["truncated_in_reasoning"] is True
    assert meta["verdict"]["evaluation_status"] == "truncated_in_reasoning"
    assert "--thinking-budget" in meta["verdict"]["hint"]
    assert task["output"] == ""  # no answer came
    assert meta["answer_tokens"] == 0 and meta["ttft_answer_ms"] is None
    # Every token was thinking; a parser may swallow the few tokens of the opening tag.
    assert ANSWER_CAP - 10 <= meta["reasoning_tokens"] <= ANSWER_CAP
    assert meta["reasoning_token_source"] == "stream"
    # Zero is not the automatic budget of a model that reasons: the run says so.
    assert "--thinking-budget 0 sets the thinking allowed" in bundle["comparability"]["reasons"]


@pytest.mark.llm
def test_with_the_automatic_budget_the_answer_after_the_thinking_passes(runs):
    bundle, capped = runs["budgeted"], runs["capped"]
    task = _task(bundle)
    meta = task["metadata"]
    assert validation_errors(bundle) == []
    settings = bundle["settings"]
    assert settings["reasoning_detected"] is True
    assert settings["thinking_budget"] == DEFAULT_THINKING_BUDGET
    assert settings["thinking_budget_source"] == "detected"
    assert task["passed"] is True, meta["verdict"]
    assert task["finish_reason"] == "stop"
    assert task["output"] == "ANSWER: 9"
    assert meta["truncated_in_reasoning"] is False
    # The budget is in the manifest: the two runs are never taken for the same benchmark.
    assert bundle["manifest_hash"] != capped["manifest_hash"]
    assert not any("thinking-budget" in r for r in bundle["comparability"]["reasons"])


@pytest.mark.llm
def test_the_bundle_counts_reasoning_tokens_apart_from_the_answer(runs):
    task = _task(runs["budgeted"])
    meta = task["metadata"]
    completion = task["tokens_generated"]  # the server's usage.completion_tokens
    reasoning, answer = meta["reasoning_tokens"], meta["answer_tokens"]
    assert meta["reasoning_token_source"] == "stream"
    assert reasoning >= 100  # ten lines of thinking
    assert 2 <= answer <= 10  # "\n\nANSWER: 9" and nothing else
    # One token per event: the split adds up to the server's own count, but for the tokens of
    # the two tags, which llama.cpp's reasoning parser keeps out of every event (the grammar
    # forces them, so they come as several small tokens each).
    # The server's count also holds the end-of-generation token, which no event carries.
    missing = 1 if runs["parser"] == "none" else 24
    assert completion - missing <= reasoning + answer <= completion
    assert meta["reasoning_chars"] > 200


@pytest.mark.llm
def test_the_first_answer_token_comes_after_the_thinking_and_the_summary_shows_it(runs):
    meta = _task(runs["budgeted"])["metadata"]
    assert 0 < meta["ttft_ms"] < meta["ttft_answer_ms"]
    text = runs["text"]
    assert f"thinking budget: {DEFAULT_THINKING_BUDGET} tokens per task" in text
    assert f"reasoning: {meta['reasoning_tokens']} tokens, answers: {meta['answer_tokens']}" in text
    assert "first answer token:" in text and "(TTFT" in text
