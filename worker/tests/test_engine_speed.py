"""Speed measurement: client clocks vs the server's own timings, nonces, prompt sizing, stats."""

from __future__ import annotations

import fnmatch
import math
import os
import subprocess
import sys
import time

import pytest

from worker.engine.adaptive import (
    adaptive_rule,
    decide,
    describe,
    fixed_rule,
    relative_half_width,
    speed_rule,
)
from worker.engine.metrics import request_metrics, speed_metrics_v3, speed_summary
from worker.engine.providers import ChatRequest, OpenAIProvider
from worker.engine.suites import RunContext, available_suites
from worker.engine.suites.prompts import new_nonce, speed_messages
from worker.engine.suites.speed import decode_only_next
from worker.engine.transport import Transport
from worker.rules.reasoning import OutputLimits
from worker.rules.stats import percentile, summarize, t_cdf, t_ppf, welch_test

INSTRUCTION = "From the notes above, name one detail."


@pytest.fixture
def provider(llm_own_template_url, llm_model):
    """On the GGUF's own chat template, whose default system prompt the server caches."""
    transport = Transport(llm_own_template_url, timeout=120)
    prov = OpenAIProvider(transport, llm_model, supports_ignore_eos=True)
    yield prov
    prov.close()


def _stream(provider, messages, max_tokens=24):
    return provider.chat_stream(
        ChatRequest(messages=messages, max_tokens=max_tokens, ignore_eos=True, temperature=0.0)
    )


@pytest.mark.llm
def test_client_decode_rate_tracks_the_servers_own_timing(provider):
    response = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 60), max_tokens=48)
    m = request_metrics(response)
    assert m["completion_tokens"] == 48
    assert m["token_count_source"] == "server"
    # TPOT is defined over N-1 intervals, exactly like llama.cpp's predicted_per_second.
    assert m["tpot_ms"] == pytest.approx((m["e2e_ms"] - m["ttft_ms"]) / 47, rel=1e-3)
    assert m["decode_tps"] == pytest.approx(1000 / m["tpot_ms"], rel=1e-3)
    # Same quantity measured at two ends of a socket: close, on a noisy 2-core machine too.
    assert 0.8 < m["decode_ratio_vs_server"] < 1.25
    # The first token cannot arrive before the server finished the prompt.
    assert m["ttft_ms"] >= m["server"]["prompt_ms"]
    assert m["itl_ms"]["n"] == len(m["timings"]["chunk_ms"]) - 1
    assert m["timings"]["chunk_ms"][0] == m["ttft_ms"]


@pytest.mark.llm
def test_prefill_counts_only_the_tokens_the_server_evaluated(provider):
    """The template's system prompt is served from the cache: dividing all prompt tokens by the
    prefill time read ~25% high at 128-token prompts (issue 17)."""
    response = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 60), max_tokens=8)
    m = request_metrics(response)
    assert m["cached_tokens"] >= 20  # the GGUF template's fixed prefix
    assert m["prefill_tokens"] == m["server"]["prompt_n"] == m["prompt_tokens"] - m["cached_tokens"]
    assert m["prefill_tokens_source"] == "server"
    # llama.cpp sends the headers when the slot starts on the prompt: the window is the rest.
    assert m["prefill_window_source"] == "headers"
    assert m["prefill_window_ms"] == pytest.approx(
        m["ttft_ms"] - m["timings"]["headers_ms"], abs=0.01
    )
    assert m["prefill_tps"] == pytest.approx(
        m["prefill_tokens"] / (m["prefill_window_ms"] / 1000), rel=1e-3
    )
    assert 0.9 < m["prefill_ratio_vs_server"] < 1.1


@pytest.mark.llm
def test_ttft_splits_into_the_servers_share_and_the_clients(provider):
    _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 20), max_tokens=2)
    m = request_metrics(_stream(provider, speed_messages(new_nonce(), INSTRUCTION, 60)))
    # On a loaded machine the headers may be read after the prompt began: said so, and capped.
    assert m["ttft_split_source"].startswith("llama.cpp timings + response headers")
    assert m["ttft_server_prompt_ms"] == m["server"]["prompt_ms"]
    assert m["ttft_server_setup_ms"] >= 0
    assert m["ttft_server_ms"] == pytest.approx(
        m["ttft_server_setup_ms"] + m["ttft_server_prompt_ms"], abs=0.01
    )
    assert m["ttft_server_ms"] + m["ttft_client_ms"] == pytest.approx(m["ttft_ms"], abs=0.01)
    # The client's share is milliseconds, not the prompt's hundreds: under a tenth of the TTFT
    # (at least 50 ms). Wide bounds: beside the whole suite on a 2-core machine the prompt took
    # ~1 s and one stall gave the client 58 ms; bench/engine_fidelity.py measures it properly.
    assert m["timings"]["written_ms"] - 0.01 <= m["ttft_client_ms"] < max(50, m["ttft_ms"] / 10)


@pytest.mark.llm
def test_timed_streams_start_on_an_open_connection(provider):
    """llama.cpp closes a stream's connection; once the transport has seen that, it opens the next
    one before the clock starts, so TTFT holds no TCP connect and no stale-connection retry."""
    first = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 10), max_tokens=2)
    second = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 10), max_tokens=2)
    assert first.timing.new_connection and second.timing.new_connection
    assert provider.transport.warm_before_streams
    for _ in range(2):
        timed = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 10), max_tokens=2)
        assert not timed.timing.new_connection
        assert not timed.timing.retried
        assert 0 <= timed.timing.written_ms < timed.timing.headers_ms


@pytest.mark.llm
def test_a_stream_readied_before_a_barrier_sends_its_prompt_without_warming_again(provider):
    """A concurrency round readies every stream before its barrier: the warm-up request goes
    then, and the prompt, sent after the barrier, is the stream's only request."""
    seen: list[tuple[str, float]] = []
    hooks = provider.transport.client.event_hooks["request"]
    hooks.append(lambda request: seen.append((request.method, time.perf_counter())))
    for _ in range(2):
        provider.ready()
        provider.ready()  # a second call warms nothing more
        barrier = time.perf_counter()
        timed = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 10), max_tokens=2)
        assert [method for method, _ in seen] == ["GET", "POST"]
        assert seen[0][1] < barrier < seen[1][1]
        assert not timed.timing.new_connection and not timed.timing.retried
        seen.clear()
    # Not readied: the first such stream finds llama.cpp closed the last one's connection, and
    # from then on each stream warms one itself, inside the request but before its clock.
    unready = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 10), max_tokens=2)
    assert [method for method, _ in seen] == ["POST"] and unready.timing.new_connection
    seen.clear()
    _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 10), max_tokens=2)
    assert [method for method, _ in seen] == ["GET", "POST"]


@pytest.mark.llm
def test_the_nonce_keeps_the_prompt_cache_from_faking_prefill(provider):
    """Repeating one prompt lets llama.cpp reuse its cache; a fresh nonce per request does not."""
    same = speed_messages("fixed-nonce-0001", INSTRUCTION, 120)
    first = _stream(provider, same, max_tokens=4)
    repeat = _stream(provider, same, max_tokens=4)
    assert repeat.server.cache_n >= first.prompt_tokens - 2  # control: the cache really works
    for _ in range(2):
        fresh = _stream(provider, speed_messages(new_nonce(), INSTRUCTION, 120), max_tokens=4)
        # Only the chat template's fixed prefix (its system prompt, before the nonce) is reused.
        assert 20 <= fresh.server.cache_n <= 32
        assert fresh.server.prompt_n == fresh.prompt_tokens - fresh.server.cache_n


@pytest.mark.llm
def test_prompts_are_calibrated_to_the_servers_token_count(provider):
    suite = available_suites()["speed"]
    ctx = RunContext(provider=provider, trials=1)
    suite.prepare(ctx)
    calibration = ctx.suite_metadata["calibration"]
    assert calibration["calibrated"]
    assert 0.5 < calibration["tokens_per_word"] < 3
    assert all(w["warmup"] for w in ctx.suite_metadata["warmup"])
    tasks = suite.effective_tasks(OutputLimits(max_tokens=8))
    task = next(t for t in tasks if t["id"] == "speed-p512-n16")
    record = suite.run_task(task, ctx)
    trial = record["metadata"]["trials"][0]
    assert abs(trial["prompt_tokens"] - 512) / 512 < 0.08
    assert trial["prompt_tokens_deviation"] == pytest.approx(
        (trial["prompt_tokens"] - 512) / 512, abs=1e-4
    )


def test_the_speed_grid_measures_each_figure_once():
    suite = available_suites()["speed"]
    shape = {
        t["id"]: (t["speed"]["prompt_tokens"], t["config"]["max_tokens"], t["speed"]["measures"])
        for t in suite.tasks
    }
    assert shape == {
        "speed-p128-n256": (128, 256, ["decode"]),
        "speed-p512-n16": (512, 16, ["prefill"]),
        "speed-p2048-n256": (2048, 256, ["prefill_2048", "decode_2048"]),
    }
    figures = [f for t in suite.tasks for f in t["speed"]["measures"]]
    assert len(figures) == len(set(figures))
    # The short-prompt glob users and the lab pass still picks the short-prompt cell.
    assert [t["id"] for t in suite.tasks if fnmatch.fnmatch(t["id"], "speed-p128-*")] == [
        "speed-p128-n256"
    ]


def _rule(mode="adaptive", floor=3, ceiling=10, decode=0.02, prefill=0.03):
    rule = adaptive_rule(floor, ceiling) if mode == "adaptive" else fixed_rule(ceiling)
    rule["targets"] = {"decode": decode, "prefill": prefill}
    return rule


@pytest.mark.parametrize(
    ("values", "stop", "reason"),
    [
        ([100.0, 101.0], False, "continue"),  # below the floor, however close
        ([100.0, 101.0, 99.5], True, "target_met"),  # ±0.75% at the floor
        ([100.0, 110.0, 95.0], False, "continue"),  # ±7.5%
        ([100.0, 110.0, 95.0, 100.5, 100.2, 99.9, 100.1, 100.3, 99.8], True, "target_met"),
        ([100.0, 90.0, 110.0, 95.0, 105.0], True, "ceiling"),  # a ceiling of 5, still ±10%
        ([100.0, None, 101.0], False, "continue"),  # a failed trial: two values, no interval
    ],
)
def test_the_stopping_rule_on_sequences_of_decode_rates(values, stop, reason):
    rule = _rule(ceiling=5 if len(values) == 5 else 10)
    decision = decide(rule, len(values), {"decode": values})
    assert (decision["stop"], decision["reason"]) == (stop, reason)
    assert decision["trials_run"] == len(values)


def test_the_stopping_rule_says_what_it_reached_and_how_sure_the_interval_is():
    three = decide(_rule(), 3, {"decode": [100.0, 101.0, 99.5], "prefill": [1000, 1100, 960]})
    # Decode is within ±2%, prefill (±7%) is not: the cell goes on.
    assert not three["stop"]
    assert three["figures"]["decode"] == {
        "n": 3,
        "median": 100.0,
        "half_width": 0.0075,
        "coverage": 0.75,  # min–max of three values covers the median 75% of the time
        "target": 0.02,
        "met": True,
    }
    assert three["figures"]["prefill"]["half_width"] == pytest.approx(0.07)
    assert not three["figures"]["prefill"]["met"]
    # The long-prompt figures take their kind's target.
    long = decide(_rule(), 3, {"decode_2048": [90.0, 90.5, 89.9], "prefill_2048": [900, 950, 930]})
    assert long["figures"]["decode_2048"]["target"] == 0.02
    assert long["figures"]["prefill_2048"]["target"] == 0.03
    noisy = decide(_rule(ceiling=6), 6, {"decode": [100.0, 92, 108, 97, 103, 100]})
    assert noisy["reason"] == "ceiling"
    assert noisy["figures"]["decode"]["coverage"] == 0.9688
    assert describe(noisy) == "ceiling reached, noisy: 6 trials, decode ±8.0% (target ±2%)"


def test_a_fixed_count_runs_every_trial_and_still_reports_the_half_width():
    tight = [100.0, 100.1, 99.9, 100.0, 100.05]
    assert not decide(_rule("fixed", ceiling=5), 3, {"decode": tight[:3]})["stop"]
    done = decide(_rule("fixed", ceiling=5), 5, {"decode": tight})
    assert (done["stop"], done["reason"]) == (True, "fixed")
    assert done["figures"]["decode"]["met"] and done["figures"]["decode"]["coverage"] == 0.9375
    assert speed_rule(5) == fixed_rule(5) and speed_rule(None) == adaptive_rule()
    assert speed_rule(None)["floor"] == 3 and speed_rule(None)["ceiling"] == 10


def _cell(measures, decode, prefill):
    trials = [
        {"ok": True, "decode_tps": d, "prefill_tps": p, "ttft_ms": 1000 / p, "e2e_ms": 5.0}
        for d, p in zip(decode, prefill, strict=True)
    ]
    return {"metadata": {"trials": trials, **({"measures": measures} if measures else {})}}


def test_the_headline_pools_only_the_cells_that_measure_each_figure():
    tasks = [
        _cell(["decode"], [100.0, 101.0, 99.0], [3000.0, 3100.0, 2900.0]),
        _cell(["prefill"], [80.0, 81.0, 79.0], [5000.0, 5050.0, 4950.0]),
        _cell(["prefill_2048", "decode_2048"], [60.0, 61.0, 59.0], [4000.0, 4100.0, 3900.0]),
    ]
    summary = speed_summary(tasks)
    assert summary["decode_tps"]["n"] == 3 and summary["decode_tps"]["median"] == 100.0
    assert (summary["decode_tps"]["ci95_low"], summary["decode_tps"]["ci95_high"]) == (99, 101)
    assert summary["prefill_tps"]["median"] == 5000.0 and summary["ttft_ms"]["median"] == 0.2
    v3 = speed_metrics_v3(tasks)
    assert (v3["generation_tok_per_sec"], v3["prompt_eval_tok_per_sec"]) == (100.0, 5000.0)
    assert v3["sample_count"] == 3
    # A first-method run names no figures: every trial counts towards each, as it always did.
    legacy = [_cell(None, *_pairs(cell)) for cell in tasks]
    assert speed_summary(legacy)["decode_tps"]["n"] == 9
    assert speed_summary(legacy)["decode_tps"]["median"] == 80.0


def _pairs(cell):
    trials = cell["metadata"]["trials"]
    return [t["decode_tps"] for t in trials], [t["prefill_tps"] for t in trials]


def _p128_cell(suite, max_tokens=64):
    """The short-prompt decode cell, with fewer tokens out so a trial takes a fraction of a
    second on the two-core CI machine."""
    tasks = suite.effective_tasks(OutputLimits(max_tokens=max_tokens))
    return next(t for t in tasks if t["id"] == "speed-p128-n256")


# The real-server tests' rule: decode within ±25% (the default ±2% is for a quiet GPU; the CI
# machine shares two cores between this server, the test and another test worker, so "quiet"
# here means no hog). Four busy loops on two cores cut the server's share of the CPU to well
# under half, which opens min–max far past ±25%. Ceiling 6 keeps the quiet test short.
REAL_RULE = {"decode": 0.25, "prefill": 0.30}
# Under the hog a token takes many times longer: that cell decodes 16 tokens a trial and stops
# at 4 trials, one past the floor, which is all that test needs to show.
HOG_TOKENS, HOG_CEILING = 16, 4


@pytest.mark.llm
def test_a_quiet_cell_stops_at_the_floor_once_its_target_is_met(provider, machine_to_itself):
    suite = available_suites()["speed"]
    rule = _rule(ceiling=6, decode=REAL_RULE["decode"], prefill=REAL_RULE["prefill"])
    ctx = RunContext(provider=provider, trials=5, trial_rule=rule)
    suite.prepare(ctx)
    # The other test worker's load can still cross a cell; a cell that misses must then say so
    # and run on (the rule), and one of three cells on this machine is quiet enough to stop.
    for _ in range(3):
        meta = suite.run_task(_p128_cell(suite), ctx)["metadata"]
        stopping = meta["stopping"]
        if stopping["reason"] == "target_met":
            break
        assert (stopping["reason"], stopping["trials_run"]) == ("ceiling", 6)
        assert not stopping["figures"]["decode"]["met"]
    assert (stopping["reason"], stopping["trials_run"], len(meta["trials"])) == ("target_met", 3, 3)
    decode = stopping["figures"]["decode"]
    assert decode["met"] and decode["n"] == 3 and decode["coverage"] == 0.75
    rates = [t["decode_tps"] for t in meta["trials"]]
    assert decode["half_width"] == pytest.approx(
        (max(rates) - min(rates)) / 2 / decode["median"], abs=1e-4
    )
    assert meta["trial_rule"] == rule and meta["measures"] == ["decode"]
    assert stopping["note"].startswith("target met after 3 trials: decode ±")


@pytest.mark.llm
def test_past_the_floor_a_cell_short_only_on_decode_sends_its_prompt_again(provider):
    """The long-prompt cell with prefill inside its target and decode never (a target of
    -1): its fourth trial is the third's prompt again, which the server takes from its cache, so
    the trial costs its output alone and keeps no prefill figure."""
    suite = available_suites()["speed"]
    ctx = RunContext(
        provider=provider, trials=5, trial_rule=_rule(ceiling=4, decode=-1.0, prefill=10.0)
    )
    suite.prepare(ctx)
    tasks = suite.effective_tasks(OutputLimits(max_tokens=16))
    record = suite.run_task(next(t for t in tasks if t["id"] == "speed-p2048-n256"), ctx)
    meta = record["metadata"]
    trials = meta["trials"]
    assert [t.get("prompt_reused", False) for t in trials] == [False, False, False, True]
    assert len({t["nonce"] for t in trials[:3]}) == 3 and trials[3]["nonce"] == trials[2]["nonce"]
    fresh, again = trials[2], trials[3]
    assert fresh["server"]["prompt_n"] > 1500 and fresh["prefill_tps"] > 0
    assert again["server"]["prompt_n"] < 20, again["server"]
    assert again["server"]["cache_n"] > 1500
    assert again["prefill_tps"] is again["ttft_ms"] is again["server_prefill_tps"] is None
    assert again["speed_metrics"]["prompt_eval_tok_per_sec"] is None
    assert again["decode_tps"] > 0 and again["completion_tokens"] == 16
    figures = meta["stopping"]["figures"]
    assert (figures["prefill_2048"]["n"], figures["decode_2048"]["n"]) == (3, 4)
    assert meta["summary"]["prefill_tps"]["n"] == 3 and meta["summary"]["decode_tps"]["n"] == 4
    assert record["tokens_prompt"] == sorted(t["prompt_tokens"] for t in trials[:3])[1]


def test_only_a_local_cell_short_on_decode_alone_reuses_its_prompt():
    def decision(stop=False, **met):
        figures = {name: {"met": ok} for name, ok in met.items()}
        return {"stop": stop, "reason": "continue", "trials_run": 3, "figures": figures}

    assert decode_only_next(decision(prefill_2048=True, decode_2048=False), 3, local=True)
    assert decode_only_next(decision(decode=False), 3, local=True)
    assert not decode_only_next(decision(prefill_2048=False, decode_2048=False), 3, local=True)
    assert not decode_only_next(decision(prefill=False), 3, local=True)
    assert not decode_only_next(decision(prefill_2048=True, decode_2048=True), 3, local=True)
    assert not decode_only_next(decision(decode=False), 3, local=False)
    assert not decode_only_next(decision(stop=True, decode=False), 3, local=True)
    # Before the floor every trial evaluates its own prompt.
    assert not decode_only_next(decision(decode=False), 4, local=True)


def _cpu_hogs() -> list[subprocess.Popen]:
    """Busy loops, twice as many as the machine has cores: the server's threads now wait."""
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 2))
    ]


@pytest.mark.llm
def test_a_cell_under_a_cpu_hog_goes_past_the_floor_and_records_how_wide_it_stayed(
    provider, machine_to_itself
):
    """The load arrives after the cell's first trial, as another job starting on the machine
    would: the trials that follow are slower, and the interval cannot close."""
    suite = available_suites()["speed"]
    rule = _rule(ceiling=HOG_CEILING, decode=REAL_RULE["decode"], prefill=REAL_RULE["prefill"])
    hogs: list[subprocess.Popen] = []

    def on_event(event):
        if event["type"] == "trial_completed" and not hogs:
            hogs.extend(_cpu_hogs())

    ctx = RunContext(provider=provider, trials=5, trial_rule=rule, emit=on_event)
    suite.prepare(ctx)
    try:
        record = suite.run_task(_p128_cell(suite, max_tokens=HOG_TOKENS), ctx)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert hogs, "the hog never started"
    meta = record["metadata"]
    stopping = meta["stopping"]
    assert stopping["trials_run"] > 3 and len(meta["trials"]) == stopping["trials_run"]
    decode = stopping["figures"]["decode"]
    rates = [t["decode_tps"] for t in meta["trials"]]
    assert decode["n"] == len(rates)
    assert decode["half_width"] == pytest.approx(relative_half_width(rates)[0], abs=1e-4)
    # Up to 8 values the interval is min–max, which only widens: once open at the floor, the
    # cell runs to its ceiling and says so.
    assert stopping["reason"] == "ceiling" and stopping["trials_run"] == HOG_CEILING
    assert not decode["met"] and decode["half_width"] > REAL_RULE["decode"]
    assert stopping["note"].startswith(f"ceiling reached, noisy: {HOG_CEILING} trials, decode ±")
    assert all(t["completion_tokens"] == HOG_TOKENS for t in meta["trials"])


def test_student_t_quantiles_and_cdf_match_the_tables():
    assert t_ppf(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert t_ppf(0.975, 4) == pytest.approx(2.776, abs=1e-3)
    assert t_ppf(0.975, 30) == pytest.approx(2.042, abs=1e-3)
    assert t_ppf(0.975, 10_000) == pytest.approx(1.960, abs=1e-3)
    assert t_cdf(0.0, 7) == pytest.approx(0.5)
    assert t_cdf(2.228, 10) == pytest.approx(0.975, abs=1e-4)


def test_summaries_report_percentiles_interval_and_peak():
    values = [10.0, 12.0, 11.0, 13.0, 9.0, 100.0]
    s = summarize(values)
    assert s["n"] == 6
    assert s["median"] == 11.5
    assert s["peak"] == 100.0
    assert s["p95"] == pytest.approx(percentile(sorted(values), 0.95))
    # The interval is the median's (sign test): between order statistics, so never below the
    # smallest rate. Issue 15: mean ± t·s/√n gave a negative lower bound for this sample.
    half = t_ppf(0.975, 5) * s["stdev"] / math.sqrt(6)
    assert s["mean"] - half < 0
    assert (s["ci95_low"], s["ci95_high"], s["ci95_coverage"]) == (9.0, 100.0, 0.9688)
    assert summarize([5.0, 7.0], higher_is_better=False)["peak"] == 5.0
    assert summarize([])["n"] == 0
    # Below three values there is no median and no interval, but the mean and peak remain.
    two = summarize([5.0, 900.0])
    assert (two["median"], two["ci95_low"], two["ci95_high"]) == (None, None, None)
    assert (two["mean"], two["peak"]) == (452.5, 900.0)
    assert summarize([3.0])["ci95_low"] is None


def test_welch_flags_real_differences_and_not_noise():
    fast = [60.1, 59.8, 60.4, 60.0, 59.9]
    slow = [50.2, 49.9, 50.1, 50.3, 49.8]
    assert welch_test(fast, slow)["p_value"] < 0.001
    assert welch_test(fast, [60.0, 60.3, 59.7, 60.2, 59.9])["p_value"] > 0.05
    assert welch_test([1.0], slow) is None
