"""Stored trials whose prefill counted a wait for a server slot (issue 35): the run page marks
them with the wait and the prefill from the slot's start, from their own clock readings, and
leaves every stored figure as it was."""

from __future__ import annotations

import copy
import math

import pytest
from django.test import Client

from leaderboard.queued import LateSlotStart, late_slot_start, late_starts_by_index
from leaderboard.tests.factories import HOSTILE, add_runs, record
from runs.importers.records import ImportedSuite, ImportedTask, SampleRecord
from runs.models import SpeedSample, TaskResult

# A concurrency-sweep stream on a one-slot llama.cpp server as the engine recorded it before the
# queued-stream rule: headers at 9,010.2 ms of a 9,600 ms TTFT (its slot started then), so the
# window was all of TTFT, prefill 870 tokens / 9.6 s and the client's share the whole wait.
QUEUED = {
    "trial_index": 2,
    "ok": True,
    "ttft_ms": 9600.0,
    "prefill_tokens": 870,
    "prefill_tokens_source": "server",
    "prefill_window_ms": 9600.0,
    "prefill_window_source": "sent",
    "prefill_tps": 90.625,
    "server_prefill_tps": 1500.0,
    "ttft_server_setup_ms": None,
    "ttft_server_prompt_ms": 580.0,
    "ttft_server_ms": 580.0,
    "ttft_client_ms": 9020.0,
    "ttft_split_source": "llama.cpp timings",
    "server": {"source": "llama.cpp", "prompt_n": 870, "prompt_ms": 580.0},
    "timings": {"written_ms": 0.2, "headers_ms": 9010.2, "first_token_ms": 9600.0},
    "speed_metrics": {"ttft_ms": 9600.0, "prompt_eval_tok_per_sec": 90.625},
}
# The stream served at once: headers early, window from them, nothing to mark.
FIRST = {
    **QUEUED,
    "trial_index": 1,
    "ttft_ms": 600.0,
    "prefill_window_ms": 589.8,
    "prefill_window_source": "headers",
    "prefill_tps": 1475.085,
    "timings": {"written_ms": 0.2, "headers_ms": 10.2, "first_token_ms": 600.0},
}
# An Ollama stream: headers with the first chunk, so TTFT is the window and stays so.
OLLAMA = {
    **QUEUED,
    "server": {"source": "ollama", "prompt_n": 870, "prompt_ms": 580.0},
    "timings": {"written_ms": 0.2, "headers_ms": 9599.0, "first_token_ms": 9600.0},
}


def test_a_stored_queued_trial_gives_its_wait_and_its_prefill_from_the_slot_s_start():
    found = late_slot_start(QUEUED)
    assert found == LateSlotStart(9010.0, queued=True, prefill_tps=pytest.approx(870 / 0.5898))
    # Near the server's own rate, where the stored figure read 6% of it.
    assert found.prefill_tps / QUEUED["server_prefill_tps"] == pytest.approx(0.983, abs=0.001)


def test_a_late_start_on_a_long_cached_context_is_setup_not_a_wait():
    # 64 new tokens on 32,000 cached ones: 40 ms of prompt, 120 ms of setup (the whole context
    # tokenised again) before the slot started. The window was wrong all the same.
    deep = {
        **QUEUED,
        "prefill_tokens": 64,
        "server": {"source": "llama.cpp", "prompt_n": 64, "cache_n": 32000, "prompt_ms": 40.0},
        "timings": {"written_ms": 0.2, "headers_ms": 120.2, "first_token_ms": 165.0},
    }
    found = late_slot_start(deep)
    assert found == LateSlotStart(120.0, queued=False, prefill_tps=pytest.approx(64 / 0.0448))


@pytest.mark.parametrize("trial", [FIRST, OLLAMA, {**QUEUED, "server": None}, None, [], "x"])
def test_every_other_trial_is_left_alone(trial):
    assert late_slot_start(trial) is None


@pytest.mark.parametrize(
    "change",
    [
        {"timings": {"written_ms": "0.2", "headers_ms": HOSTILE, "first_token_ms": True}},
        {"timings": {"headers_ms": math.nan, "first_token_ms": math.inf}},
        {"server": {"source": ["llama.cpp"], "prompt_ms": {"$gt": 0}}},
        {"timings": "9010"},
    ],
)
def test_values_of_the_wrong_type_mark_nothing(change):
    assert late_slot_start({**QUEUED, **change}) is None


def test_a_bad_token_count_still_gives_the_wait_and_no_prefill():
    assert late_slot_start({**QUEUED, "prefill_tokens": -5}) == LateSlotStart(9010.0, True, None)


def test_trials_are_found_by_their_own_index_else_their_place():
    no_index = {k: v for k, v in QUEUED.items() if k != "trial_index"}
    assert set(late_starts_by_index({"trials": [FIRST, QUEUED]})) == {2}
    assert set(late_starts_by_index({"trials": [FIRST, FIRST, no_index]})) == {3}
    assert late_starts_by_index({"trials": "many"}) == late_starts_by_index(None) == {}


@pytest.mark.django_db
def test_the_run_page_marks_the_queued_trial_and_rewrites_nothing(client: Client) -> None:
    made = record(with_tasks=True)
    trials = [FIRST, QUEUED]
    made.suites.append(
        ImportedSuite(
            suite="speed_sweep",
            task_count=1,
            tasks=[
                ImportedTask(
                    task_id="sweep-concurrency-4",
                    passed=True,
                    metadata={"cell": {"streams": 4}, "trials": copy.deepcopy(trials)},
                    # As runs.importers.runjson reads them: the v3 block's figures.
                    samples=[
                        SampleRecord(
                            trial_index=t["trial_index"],
                            ttft_ms=t["ttft_ms"],
                            prefill_tps=t["prefill_tps"],
                        )
                        for t in trials
                    ],
                )
            ],
        )
    )
    (run,) = add_runs(made)
    html = client.get(f"/runs/{run.id}/").content.decode()
    start = html.index("sweep-concurrency-4")
    rows = html[start : html.index("</table>", html.index('class="mini"', start))]
    assert rows.count("waited") == 1
    assert (
        '91<br><span class="ci late-start">waited 9,010 ms for a server slot, counted in this '
        "prefill; 1,475 from the slot’s start</span>" in rows
    )
    # The stored evidence is as it came.
    task = TaskResult.objects.get(suite_result__run=run, task_id="sweep-concurrency-4")
    assert task.metadata["trials"] == trials
    stored = SpeedSample.objects.filter(task_result=task).order_by("trial_index")
    assert [s.prefill_tps for s in stored] == [1475.085, 90.625]
