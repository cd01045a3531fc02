"""The run's cost before it starts (issue 35): the budget against the real suite data, and the
two-request probe against the real llama.cpp server."""

from __future__ import annotations

import json
import time

import pytest

from worker.engine.adaptive import ADAPTIVE_FLOOR
from worker.engine.cost import Rates, budget, probe
from worker.engine.metrics import request_metrics
from worker.engine.orchestrator import prepare_run
from worker.engine.plan import RunConfig
from worker.engine.preflight import select
from worker.engine.providers.base import ChatRequest
from worker.engine.suites import DATA_DIR
from worker.engine.suites.prompts import new_nonce, speed_messages
from worker.engine.sweeps import sweep_token_budget


def _selected(profile: str, trials: int | None = None):
    config = RunConfig(url="http://127.0.0.1:9", profile=profile, trials=trials)
    return select(config).tasks, config.trials


def _data(suite: str) -> dict:
    return json.loads((DATA_DIR / f"{suite}.suite.json").read_text())


def test_each_speed_trial_costs_its_task_lengths_from_the_data():
    """Two more trials cost two more of every speed task's prompt and output, as written in
    speed.suite.json; nothing else in the budget moves."""
    tasks_3, _ = _selected("speed", trials=3)
    tasks_5, _ = _selected("speed", trials=5)
    three, five = budget(tasks_3, 3), budget(tasks_5, 5)
    data = _data("speed")["tasks"]
    assert five.prompt_tokens - three.prompt_tokens == 2 * sum(
        t["speed"]["prompt_tokens"] for t in data
    )
    assert five.generated_tokens - three.generated_tokens == 2 * sum(
        t["config"]["max_tokens"] for t in data
    )
    assert five.requests - three.requests == 2 * len(data)
    # Speed outputs have fixed lengths (ignore_eos): none of them is only a ceiling.
    assert five.generated_ceiling == 0


def test_adaptive_speed_cells_count_at_their_floor():
    """No --trials and no profile count: speed cells adapt, and the budget counts the fewest
    trials they run (a quiet server's), saying so."""
    tasks, trials = _selected("core")
    assert trials is None  # core names no speed_trials: adaptive
    adaptive = budget(tasks, None)
    assert adaptive.adaptive
    floor = budget(tasks, ADAPTIVE_FLOOR)
    assert adaptive.by_suite["speed"] == floor.by_suite["speed"]
    assert not floor.adaptive


def test_sweep_cells_the_context_cannot_hold_cost_nothing():
    """At an 8K context the depth cells whose depth + prompt + output exceed it are skipped by
    the suite, and the budget leaves out exactly their priming and measured requests; the rest
    is the sweep's own plan (sweeps.sweep_token_budget) plus its calibrations."""
    tasks, trials = _selected("speed-deep")
    every = budget(tasks, trials).by_suite["speed_sweep"]
    at_8k = budget(tasks, trials, context_length=8192).by_suite["speed_sweep"]
    skipped = [
        t["sweep"]
        for t in _data("speed_sweep")["tasks"]
        if t["sweep"]["kind"] == "depth"
        and t["sweep"]["depth"] + t["sweep"]["prompt_tokens"] + t["sweep"]["output_tokens"] > 8192
    ]
    assert skipped, "the data has depth cells beyond 8K"
    # A depth cell primes its context once (one token decoded), then measures every trial.
    assert every.prompt_tokens - at_8k.prompt_tokens == sum(
        s["depth"] + trials * s["prompt_tokens"] for s in skipped
    )
    assert every.generated_tokens - at_8k.generated_tokens == sum(
        1 + trials * s["output_tokens"] for s in skipped
    )
    assert every.requests - at_8k.requests == len(skipped) * (1 + trials)
    # Every other request is a calibration that decodes one token: two, and two per instruction.
    plan = sweep_token_budget(tasks["speed_sweep"], trials)
    cells = [t["sweep"] for t in _data("speed_sweep")["tasks"]]
    calibrations = every.requests - plan["requests"]
    assert calibrations == 2 + 2 * len({c["instruction"] for c in cells})
    assert every.generated_tokens == plan["generated_tokens"] + calibrations


def test_quality_answers_count_as_their_limit_and_agents_as_every_turn():
    """A quality answer may stop early, so its tokens are a ceiling: the core profile's ceiling
    is every quality task's answer limit from the data (after suite defaults)."""
    tasks, trials = _selected("core")
    plan = budget(tasks, trials)
    quality = {name: t for name, t in tasks.items() if name != "speed"}
    assert plan.generated_ceiling == sum(
        t["config"]["max_tokens"] for selected in quality.values() for t in selected
    )
    full_tasks, full_trials = _selected("full")
    agent = budget(full_tasks, full_trials).by_suite["agent"]
    assert agent.requests == sum(t["validation"]["max_turns"] for t in full_tasks["agent"])
    assert agent.generated_ceiling == sum(
        t["validation"]["max_turns"] * t["config"]["max_tokens"] for t in full_tasks["agent"]
    )


def test_a_longer_prompt_costs_more_and_a_probe_rate_prices_it():
    tasks, trials = _selected("core")
    plain = budget(tasks, trials)
    dense = budget(tasks, trials, chars_per_token=2.0)  # a tokenizer twice as fine
    assert dense.prompt_tokens > plain.prompt_tokens
    assert dense.generated_tokens == plain.generated_tokens
    rates = Rates(prefill_tps=1000.0, decode_tps=50.0, overhead_s=0.1)
    expected = plain.prompt_tokens / 1000 + plain.generated_tokens / 50 + plain.requests * 0.1
    assert rates.seconds(plain) == pytest.approx(expected)


@pytest.mark.llm
def test_the_probe_predicts_a_request_on_the_real_server(llm_url, bench_home):
    """The probe's rates price a request it never saw (a longer prompt, more output) to within
    a factor of two of its measured time on the same server, moments later."""
    prep = prepare_run(RunConfig(url=llm_url, profile="speed", hash_weights=False))
    try:
        rates = probe(prep.provider)
        assert rates.prefill_tps > 0 and rates.decode_tps > 0 and rates.overhead_s >= 0
        # SmolLM2's tokenizer on English prose: a few characters per token.
        assert rates.chars_per_token is not None and 2.5 < rates.chars_per_token < 7
        started = time.perf_counter()
        response = prep.provider.chat_stream(
            ChatRequest(
                messages=speed_messages(new_nonce(), "Describe the week.", 700),
                max_tokens=96,
                ignore_eos=True,
            )
        )
        measured = time.perf_counter() - started
        metrics = request_metrics(response)
        predicted = (
            metrics["prompt_tokens"] / rates.prefill_tps
            + metrics["completion_tokens"] / rates.decode_tps
            + rates.overhead_s
        )
        assert metrics["completion_tokens"] == 96
        assert 0.5 < predicted / measured < 2.0, (predicted, measured, rates)
    finally:
        prep.provider.close()
