"""Suite data files: schema-checked on load, profile totals, manifest hash sensitivity."""

from __future__ import annotations

import json
import shutil

import pytest

from worker.engine.suites import (
    DATA_DIR,
    SuiteDataError,
    available_suites,
    load_profiles,
    load_suite_file,
)
from worker.rules.scoring import SPEED_SUITES, manifest_hash


def _profile_total(name: str) -> int | None:
    suites = available_suites()
    wanted = load_profiles()["profiles"][name]["suites"]
    if any(s not in suites for s in wanted):
        return None
    return sum(len(suites[s].tasks) for s in wanted)


def test_smoke_profile_has_33_tasks():
    assert _profile_total("smoke") == 33


@pytest.mark.parametrize(("profile", "total"), [("core", 75), ("full", 119), ("speed-deep", 8)])
def test_larger_profile_totals_once_their_suites_exist(profile, total):
    found = _profile_total(profile)
    if found is None:
        pytest.skip(f"{profile}: not every suite is installed yet")
    assert found == total


def test_quality_weights_cover_exactly_the_quality_suites():
    for name, profile in load_profiles()["profiles"].items():
        quality = {s for s in profile["suites"] if s not in SPEED_SUITES}
        assert set(profile["quality_weights"]) == quality, name
        if quality:
            assert sum(profile["quality_weights"].values()) == pytest.approx(1.0), name


def test_task_validation_is_checked_on_load(tmp_path):
    doc = json.loads((DATA_DIR / "reasonmath.suite.json").read_text())
    doc["tasks"][0]["validation"] = {"answer": {"type": "number", "valu": 3}}
    bad = tmp_path / "reasonmath.suite.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(SuiteDataError, match=r"tasks/0 \(rm-01\)/validation"):
        load_suite_file(bad)


def test_toolcall_expectation_typo_fails_on_load(tmp_path):
    doc = json.loads((DATA_DIR / "toolcall.suite.json").read_text())
    doc["tasks"][0]["validation"] = {"requird": []}
    bad = tmp_path / "toolcall.suite.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(SuiteDataError):
        load_suite_file(bad)


def test_changing_any_task_changes_the_manifest_hash(tmp_path):
    source = DATA_DIR / "reasonmath.suite.json"
    copy = tmp_path / "reasonmath.suite.json"
    shutil.copy(source, copy)
    before = load_suite_file(copy).effective_tasks()
    doc = json.loads(copy.read_text())
    doc["tasks"][4]["validation"]["answer"]["tolerance"] = 0.5
    copy.write_text(json.dumps(doc))
    after = load_suite_file(copy).effective_tasks()

    def digest(tasks):
        return manifest_hash(
            requested_profile="smoke", selected_suites=["reasonmath"], tasks={"reasonmath": tasks}
        )

    assert digest(before) != digest(after)
    assert digest(before) == digest(load_suite_file(source).effective_tasks())
