"""Score schema 3.1.0: golden aggregates from the spec and one test per known-bug fix.

Every expected number is written out by hand; none is computed by the code under test.
"""

from __future__ import annotations

import pytest

from worker.engine.suites import load_profiles
from worker.rules.scoring import (
    SCORE_SCHEMA_VERSION,
    aggregate,
    cloud_decode_score,
    cloud_speed_score,
    cloud_ttft_score,
    is_speed_only,
    local_speed_score,
    manifest_hash,
    quality_weights,
    value_score,
)

PROFILES = load_profiles()["profiles"]


def _suite(score: float, ok: list[bool]) -> dict:
    return {"score": score, "tasks": [{"execution_ok": flag} for flag in ok]}


def test_score_schema_version_is_3_1_0():
    assert SCORE_SCHEMA_VERSION == "3.1.0"


def test_golden_core_with_speed():
    # One task per suite; coding's single task failed to execute (1 of 6 → R 83.33).
    suites = {
        "speed": _suite(70, [True]),
        "toolcall": _suite(80, [True]),
        "coding": _suite(60, [False]),
        "dataextract": _suite(100, [True]),
        "instructfollow": _suite(40, [True]),
        "reasonmath": _suite(20, [True]),
    }
    scores = aggregate(suites, PROFILES["core"])
    assert scores == {
        "quality_score": 57.0,
        "reliability_score": 83.33,
        "speed_score": 70.0,
        "overall_score": 61.57,
    }


def test_golden_smoke_without_speed():
    suites = {"toolcall": _suite(100, [True]), "reasonmath": _suite(0, [True])}
    scores = aggregate(suites, PROFILES["smoke"])
    assert scores["quality_score"] == 45.0
    assert scores["reliability_score"] == 100.0
    assert scores["speed_score"] is None  # no speed suite: not scored, never a 0
    assert scores["overall_score"] == 50.5


def test_a_run_of_the_sweeps_alone_has_no_speed_score():
    """Issue 32: the measured-only sweep is not the speed suite; its run stores speed null."""
    sweep = {"score": None, "tasks": [{"execution_ok": True}, {"execution_ok": False}]}
    scores = aggregate({"speed_sweep": sweep}, PROFILES["smoke"])
    assert scores == {
        "overall_score": None,
        "quality_score": None,
        "speed_score": None,
        "reliability_score": 50.0,
    }


def test_has_speed_comes_from_suites_present_not_from_a_positive_score():
    # Speed suite ran but scored 0: still the with-speed formula 0.70·Q + 0.25·S + 0.05·R.
    suites = {
        "speed": _suite(0, [True]),
        "toolcall": _suite(100, [True]),
        "reasonmath": _suite(0, [True]),
    }
    scores = aggregate(suites, PROFILES["smoke"])
    # 0.70·45 + 0 + 0.05·100 = 36.5 (the old rule would have given 0.90·45 + 10 = 50.5).
    assert scores["overall_score"] == 36.5
    assert scores["speed_score"] == 0.0


def test_cloud_decode_curve_is_continuous_at_10_tok_s():
    assert cloud_decode_score(9.999) == pytest.approx(39.996, abs=1e-3)
    assert cloud_decode_score(10.0) == pytest.approx(40.0)
    assert cloud_decode_score(10.001) == pytest.approx(40.0017, abs=1e-3)
    # Left and right limits agree within a tiny step everywhere near 10.
    for x in (9.9, 9.99, 10.0, 10.01, 10.1):
        assert abs(cloud_decode_score(x) - 40.0) < 0.5
    assert cloud_decode_score(20) == pytest.approx(52.0)
    assert cloud_decode_score(5) == pytest.approx(20.0)
    assert cloud_decode_score(0) == 0.0


def test_cloud_curve_reference_points():
    assert cloud_ttft_score(150) == 100.0
    assert cloud_ttft_score(1000) == pytest.approx(66.66, abs=0.01)
    assert cloud_ttft_score(0) == 0.0
    # 0.6·100 + 0.4·40 = 76.
    assert cloud_speed_score(100, 10) == 76.0


def test_local_curve_reference_points():
    assert local_speed_score(5) == 30.02
    assert local_speed_score(60) == 74.97
    assert local_speed_score(1000) == 100.0
    assert local_speed_score(0) == 0.0
    assert local_speed_score(None) == 0.0


def test_custom_selection_renormalises_over_suites_actually_run():
    # --suites speed,agent under core: agent has no core weight. It used to score quality 0;
    # now agent carries the whole quality weight.
    suites = {"speed": _suite(50, [True]), "agent": _suite(80, [True])}
    scores = aggregate(suites, PROFILES["core"])
    assert scores["quality_score"] == 80.0
    # 0.70·80 + 0.25·50 + 0.05·100 = 73.5
    assert scores["overall_score"] == 73.5


def test_custom_selection_mixes_profile_and_fallback_weights():
    # core weights toolcall 0.20; longcontext comes from full's 0.10 → 0.20/0.30 and 0.10/0.30.
    weights = quality_weights(
        PROFILES["core"],
        ["speed", "toolcall", "longcontext"],
        fallback_weights=PROFILES["full"]["quality_weights"],
    )
    assert weights == pytest.approx({"toolcall": 0.6666667, "longcontext": 0.3333333})
    suites = {"toolcall": _suite(100, [True]), "longcontext": _suite(30, [True])}
    scores = aggregate(
        suites, PROFILES["core"], fallback_weights=PROFILES["full"]["quality_weights"]
    )
    # (100·0.20 + 30·0.10) / 0.30 = 76.67
    assert scores["quality_score"] == 76.67


def test_subset_of_profile_renormalises_weights():
    # core with only toolcall (0.20) and reasonmath (0.25): (90·0.2 + 0·0.25)/0.45 = 40.0
    suites = {"toolcall": _suite(90, [True]), "reasonmath": _suite(0, [True])}
    assert aggregate(suites, PROFILES["core"])["quality_score"] == 40.0


def test_a_speed_only_run_has_no_quality_and_no_overall_score():
    """Issue 15: it used to get quality 0 and overall 0.25·S + 0.05·R = 20, and so a rank."""
    assert quality_weights(PROFILES["speed"], ["speed"]) == {}
    scores = aggregate({"speed": _suite(60, [True, True])}, PROFILES["speed"])
    assert scores == {
        "quality_score": None,
        "reliability_score": 100.0,
        "speed_score": 60.0,
        "overall_score": None,
    }
    assert value_score(scores["quality_score"], 60.0, 100.0) is None
    # A full-profile run stopped during speed has no quality suite yet: no quality either.
    assert aggregate({"speed": _suite(60, [True])}, PROFILES["full"])["quality_score"] is None
    assert is_speed_only(["speed"]) and not is_speed_only(["speed", "toolcall"])


def test_reliability_counts_execution_not_correctness():
    suites = {"toolcall": {"score": 0.0, "tasks": [{"execution_ok": True, "passed": False}] * 4}}
    assert aggregate(suites, PROFILES["smoke"])["reliability_score"] == 100.0


def test_value_score():
    assert value_score(57.0, 50.0, 83.333333) == 23.75
    assert value_score(57.0, 250.0, 100.0) == 57.0
    # No decode rate: the factor is 0.5.
    assert value_score(40.0, 0.0, 100.0) == 20.0


def test_manifest_hash_changes_when_a_task_changes():
    tasks = {"reasonmath": [{"id": "rm-01", "messages": [{"role": "user", "content": "2+2?"}]}]}
    first = manifest_hash(requested_profile="smoke", selected_suites=["reasonmath"], tasks=tasks)
    same = manifest_hash(requested_profile="smoke", selected_suites=["reasonmath"], tasks=tasks)
    tasks["reasonmath"][0]["messages"][0]["content"] = "2+3?"
    changed = manifest_hash(requested_profile="smoke", selected_suites=["reasonmath"], tasks=tasks)
    assert first == same
    assert first != changed
    assert first.startswith("sha256:")
