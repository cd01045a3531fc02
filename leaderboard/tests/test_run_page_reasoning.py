"""The run page's reasoning section (issue 17): a real bundle from a model that thinks first, on
a real llama.cpp server, shows its thinking budget, the thinking and answer tokens apart, the
time to the first answer token beside TTFT, and the tasks cut off while thinking; a run that
never reasoned shows no section, and stored values of the wrong type never break the page."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from leaderboard.tests.factories import add_runs, record
from runs.importers import parse_run_payload
from runs.models import Run
from submissions.intake import import_records
from worker.engine.bundle import upload_view
from worker.engine.orchestrator import run_benchmark
from worker.engine.plan import RunConfig
from worker.engine.testing.xllama_launcher import start_server
from worker.rules.reasoning import DEFAULT_THINKING_BUDGET

DATA = Path(__file__).resolve().parents[2] / "worker/tests/data/reasoning"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, dict]:
    """The thinkcheck task through the engine, with its answer cap alone (cut off while thinking)
    and with the automatic budget (it answers), on a server whose grammar thinks first."""
    server = start_server(
        log_dir=tmp_path_factory.mktemp("think-server"),
        grammar_file=DATA / "think-first.gbnf",
        chat_template_file=DATA / "think-template.jinja",
        reasoning_format="deepseek",
    )
    out = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("BENCHLOOP_SUITES_PATH", str(DATA))
        try:
            for name, budget in (("capped", 0), ("budgeted", None)):
                config = RunConfig(
                    url=server.base_url,
                    suites=["thinkcheck"],
                    thinking_budget=budget,
                    home=tmp_path_factory.mktemp(f"think-{name}"),
                )
                outcome = run_benchmark(config)
                assert outcome.status == "complete"
                out[name] = upload_view(outcome.bundle)
        finally:
            server.stop()
    return out


def _stored(bundle: dict) -> Run:
    (run,) = import_records([parse_run_payload(copy.deepcopy(bundle))]).created
    return run


def _section(html: str) -> str:
    start = html.index('id="reasoning"')
    return re.sub(r"\s+", " ", html[start : html.index("</section>", start)])


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def _dd(section: str, dd_id: str) -> str:
    match = re.search(rf'<dd id="{dd_id}">(.*?)</dd>', section)
    assert match, dd_id
    return _text(match.group(1))


@pytest.mark.llm
@pytest.mark.django_db
def test_a_thinking_model_s_run_shows_its_split_and_first_answer_token(bundles, client) -> None:
    bundle = bundles["budgeted"]
    meta = bundle["suites"]["thinkcheck"]["tasks"][0]["metadata"]
    assert meta["reasoning_tokens"] > 100 and meta["answer_tokens"] > 0  # the real run thought
    run = _stored(bundle)
    html = client.get(f"/runs/{run.id}/").content.decode()
    section = _section(html)
    assert _dd(section, "thinking-budget") == (
        f"{DEFAULT_THINKING_BUDGET:,} tokens per task (the warm-up answer reasoned)"
    )
    caption = _text(section[section.index("<figcaption") : section.index("</figcaption>")])
    total = meta["reasoning_tokens"] + meta["answer_tokens"]
    share = round(100 * meta["reasoning_tokens"] / total)
    assert caption == (
        f"thinking {meta['reasoning_tokens']:,} tokens ({share}%) · answers "
        f"{meta['answer_tokens']} tokens, over 1 quality task (counted by stream)"
    )
    assert _dd(section, "first-answer") == (
        f"{round(meta['ttft_answer_ms']):,} ms · TTFT {round(meta['ttft_ms']):,} ms · medians, "
        "1 task answered"
    )
    assert meta["ttft_answer_ms"] > meta["ttft_ms"]  # the thinking came first
    assert 'id="truncated-thinking">none<' in section
    # The task's own row counts its thinking apart.
    assert f'<span class="ci">{meta["reasoning_tokens"]} of them thinking</span>' in html


@pytest.mark.llm
@pytest.mark.django_db
def test_a_run_cut_off_while_thinking_says_so(bundles, client) -> None:
    run = _stored(bundles["capped"])
    section = _section(client.get(f"/runs/{run.id}/").content.decode())
    assert _dd(section, "thinking-budget") == "0 tokens per task (--thinking-budget)"
    assert _dd(section, "first-answer").startswith("no answer came · TTFT")
    assert _dd(section, "truncated-thinking").startswith("1 of 1 task ·")


@pytest.mark.django_db
def test_no_section_without_reasoning_and_hostile_values_never_break_the_page(client) -> None:
    (plain,) = add_runs(record(with_tasks=True))
    assert 'id="reasoning"' not in client.get(f"/runs/{plain.id}/").content.decode()
    hostile = {
        "settings": {"thinking_budget": "2048<script>", "thinking_budget_source": "<b>x</b>"},
        "suites": {
            "toolcall": {
                "tasks": [
                    {"metadata": {"reasoning_tokens": 40, "answer_tokens": "NaN"}},
                    {"metadata": {"reasoning_tokens": True, "ttft_answer_ms": "soon"}},
                    {"metadata": {"reasoning_tokens": -5, "ttft_ms": 1e300}},
                    {"metadata": "not an object"},
                    "not a task",
                ]
            },
            "speed": "not a suite",
        },
    }
    Run.objects.filter(id=plain.id).update(raw_payload=hostile)
    page = client.get(f"/runs/{plain.id}/")
    assert page.status_code == 200
    section = _section(page.content.decode())
    assert "<script>" not in section and "<b>x</b>" not in section
    # Only the one real count is taken: 40 thinking tokens over the 3 tasks that carry the key.
    assert "thinking 40 tokens (100%) · answers 0 tokens, over 3 quality tasks" in _text(section)
    assert "(none set)" in section and "no answer came" in section
