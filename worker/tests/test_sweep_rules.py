"""The sweep's rules that need no server: its cells from the data file or the run's options, the
scores it leaves alone, and what makes a sweep run not comparable."""

from __future__ import annotations

import pytest

from worker.cli import EXIT_USAGE, main
from worker.engine.suites import available_suites, load_profiles
from worker.engine.suites.sweep import parse_levels
from worker.engine.sweeps import ollama_depth_context, recorded_sweep_tokens, sweep_token_budget
from worker.rules.comparability import assess
from worker.rules.reasoning import OutputLimits
from worker.rules.scoring import aggregate, is_speed_only

SWEEP = available_suites()["speed_sweep"]


def _suite(name: str, score: float, ok: bool = True) -> dict:
    task = {"task_id": f"{name}-1", "execution_ok": ok, "score": score}
    return {"score": score, "tasks": [task]}


def test_the_data_file_has_llama_bench_s_depths_and_four_concurrency_levels() -> None:
    tasks = SWEEP.effective_tasks()
    depth = [t["sweep"]["depth"] for t in tasks if t["sweep"]["kind"] == "depth"]
    streams = [t["sweep"]["streams"] for t in tasks if t["sweep"]["kind"] == "concurrency"]
    assert (depth, streams) == ([0, 4096, 16384, 32768], [1, 2, 4, 8])


def test_run_options_replace_the_cells_and_the_request_sizes() -> None:
    options = {"depths": [0, 1024], "concurrency": [1, 3], "prompt_tokens": 64}
    tasks = SWEEP.effective_tasks(None, options)
    assert [t["id"] for t in tasks] == [
        "sweep-depth-0",
        "sweep-depth-1024",
        "sweep-concurrency-1",
        "sweep-concurrency-3",
    ]
    assert {t["sweep"]["prompt_tokens"] for t in tasks} == {64}
    assert {t["sweep"]["output_tokens"] for t in tasks} == {128}
    # --max-tokens caps the decoded tokens as it caps every answer.
    assert {
        t["sweep"]["output_tokens"] for t in SWEEP.effective_tasks(OutputLimits(max_tokens=16))
    } == {16}


def test_profiles_full_and_speed_deep_run_the_sweep() -> None:
    profiles = load_profiles()["profiles"]
    assert "speed_sweep" in profiles["full"]["suites"]
    assert profiles["speed-deep"]["suites"] == ["speed_sweep"]
    assert "speed_sweep" not in profiles["full"]["quality_weights"]


def test_the_sweep_changes_no_score() -> None:
    profile = load_profiles()["profiles"]["full"]
    without = {"speed": _suite("speed", 70.0), "agent": _suite("agent", 50.0)}
    # A failed sweep cell (score 0, not execution_ok) moves neither quality nor reliability.
    with_sweep = {**without, "speed_sweep": _suite("speed_sweep", 0.0, ok=False)}
    assert aggregate(with_sweep, profile) == aggregate(without, profile)
    assert is_speed_only(["speed", "speed_sweep"]) and is_speed_only(["speed_sweep"])
    assert not is_speed_only(["speed_sweep", "agent"])
    # A run of the sweep alone still says how many of its cells ran.
    alone = aggregate({"speed_sweep": _suite("speed_sweep", 100.0)}, profile)
    assert (alone["quality_score"], alone["reliability_score"]) == (None, 100.0)


def test_changed_sweep_cells_make_a_run_not_comparable() -> None:
    expected = {"speed_sweep": [t["id"] for t in SWEEP.effective_tasks()]}
    ran = {"speed_sweep": {"tasks": [{"task_id": "sweep-depth-0", "metadata": {}}]}}
    block = assess(
        status="complete",
        error=None,
        expected=expected,
        suites=ran,
        custom_selection=False,
        sweep_options={"depths": [0, 1024], "output_tokens": 32},
    )
    assert block["reasons"] == [
        "--depths 0,1024 --sweep-output-tokens 32 changes the sweep's cells"
    ]
    assert not block["comparable"]


def test_a_cell_capped_by_the_server_s_context_still_counts_as_scored() -> None:
    skipped = {
        "task_id": "sweep-depth-32768",
        "metadata": {"cell": {"depth": 32768, "status": "skipped", "reason": "exceeds"}},
    }
    block = assess(
        status="complete",
        error=None,
        expected={"speed_sweep": ["sweep-depth-32768"]},
        suites={"speed_sweep": {"tasks": [skipped]}},
        custom_selection=False,
    )
    assert block["comparable"] and block["tasks_scored"] == 1


@pytest.mark.parametrize("text", ["", "a,b", "-1,4", ","])
def test_bad_levels_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_levels(text, minimum=0)


def test_the_cli_refuses_bad_levels_before_any_request(bench_home, capsys) -> None:
    code = main(["run", "--url", "http://127.0.0.1:9", "--depths", "4k", "--json"])
    assert code == EXIT_USAGE
    assert "--depths '4k'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "num_ctx"),
    [
        # The deepest cell that fits, (d + 512 + 128) × 1.1, rounded up to 1024s: 4096 ...
        (8192, 6144),
        # ... 16384 (32768 does not fit 32K) ...
        (32768, 19456),
        # ... and 32768, well under a 128K model's context.
        (131072, 36864),
        # Room for the deepest cell but not its margin: the model's context, no more.
        (4800, 4800),
        # Never below the 4096 the rest of the run sends: no reload for less.
        (4000, 4096),
        (2048, 4096),
    ],
)
def test_ollama_s_depth_cells_get_room_for_the_deepest_cell_the_model_holds(
    model: int, num_ctx: int
) -> None:
    tasks = SWEEP.effective_tasks()
    assert ollama_depth_context(4096, model, tasks) == num_ctx


def test_without_depth_cells_ollama_keeps_the_run_s_num_ctx() -> None:
    concurrency = [t for t in SWEEP.effective_tasks() if t["sweep"]["kind"] == "concurrency"]
    assert ollama_depth_context(4096, 131072, concurrency) == 4096
    assert ollama_depth_context(4096, 131072, None) == 4096


def test_the_sweep_s_token_budget_before_and_since_priming_once() -> None:
    """Per depth cell, d context tokens once instead of once per trial; one warm-up round in
    the sweep instead of one per level. The profiles' own cells (d 0/4K/16K/32K, p 512, n 128;
    c 1/2/4/8, p 128, n 128), at speed-deep's 3 trials and full's 5."""
    tasks = SWEEP.effective_tasks()
    depths = sum(t["sweep"]["depth"] for t in tasks if t["sweep"]["kind"] == "depth")
    for trials in (3, 5):
        before = sweep_token_budget(tasks, trials, method="reprime")
        after = sweep_token_budget(tasks, trials)
        later_levels = 2 + 4 + 8  # streams of every level after the first
        assert before["prompt_tokens"] - after["prompt_tokens"] == (
            (trials - 1) * depths + later_levels * 128
        )
        assert before["generated_tokens"] - after["generated_tokens"] == (
            (trials - 1) * 3 + later_levels * 128
        )
        assert before["requests"] - after["requests"] == (trials - 1) * 3 + later_levels
    # full (5 trials): the peer count of issue 35 found 288,240 prompt tokens and 14,099
    # generated in a real bundle of the old method, the calibration's few included.
    assert sweep_token_budget(tasks, 5, method="reprime") == {
        "prompt_tokens": 288_000,
        "generated_tokens": 14_095,
        "requests": 125,
    }
    assert sweep_token_budget(tasks, 5) == {
        "prompt_tokens": 73_216,
        "generated_tokens": 12_291,
        "requests": 99,
    }
    # A server whose context holds 16K skips the 16K and 32K cells, as the run does.
    small = sweep_token_budget(tasks, 3, context=16384)
    assert small["prompt_tokens"] == 4096 + 2 * 3 * 512 + (3 * 15 + 1) * 128


def test_a_bundle_from_before_priming_once_is_counted_with_its_estimates() -> None:
    """Old records kept neither the context requests nor the warm-up rounds: they are
    estimated from what the records hold, and the count says so."""
    depth_trial = {"ok": True, "depth_target": 4096, "context_tokens": 4100}
    depth_trial |= {"prefill_tokens": 510, "completion_tokens": 128}
    stream_trial = {"ok": True, "prefill_tokens": 100, "completion_tokens": 128}
    suite = {
        "tasks": [
            {"metadata": {"sweep": {"kind": "depth"}, "trials": [depth_trial] * 2}},
            {
                "metadata": {
                    "sweep": {"kind": "concurrency", "streams": 2},
                    "trials": [stream_trial] * 4,
                }
            },
        ]
    }
    count = recorded_sweep_tokens(suite)
    assert count == {
        "prompt_tokens": 2 * (4100 + 510) + 6 * 100,
        "generated_tokens": 2 * (1 + 128) + 6 * 128,
        "requests": 4 + 6,
        "estimated": ["depth context requests", "warm-up rounds"],
    }
