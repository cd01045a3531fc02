"""Bundle writer/reader, legacy formats, the upload view, scoring and the suite data files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker.engine.bundle import (
    find_run,
    load_bundle,
    upload_view,
    validation_errors,
    write_bundle,
)
from worker.engine.errors import UsageError
from worker.engine.suites import SuiteDataError, load_profiles, load_suite_file
from worker.rules import scoring

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("BENCHLOOP_FIXTURES_DIR", REPO.parent / "shared/fixtures/benchloop"))
LEGACY = {
    "v2": "generated/v2-0.2.3-local/run.json",
    "v3": "generated/v3-full-local/run.json",
    "v3-remote": "generated/v3-custom-remote/run.json",
    "v3-smoke": "generated/v3-smoke-local-run.json",
    "v3-failed": "generated/v3-failed/run.json",
}
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures not present")


@needs_fixtures
@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_run_files_load_into_valid_bundles(name):
    raw = json.loads((FIXTURES / LEGACY[name]).read_text())
    bundle = load_bundle(FIXTURES / LEGACY[name])
    assert validation_errors(bundle) == []
    assert bundle["source_format"] in ("benchloop-cli-0.2.3", "benchloop-cli-0.3.0")
    assert bundle["model"]["model_id"] == raw["model"]["model_id"]
    assert bundle["overall_score"] == raw["overall_score"]
    assert load_bundle(FIXTURES / LEGACY[name])["client_run_id"] == bundle["client_run_id"]
    if name == "v3-failed":
        assert bundle["status"] == "failed"
    else:
        assert bundle["status"] == "complete"
        # Speed samples come from the legacy trials (warm-ups excluded).
        assert bundle["speed_summary"]["decode_tps"]["n"] > 0


@needs_fixtures
def test_v2_and_v3_are_told_apart():
    assert load_bundle(FIXTURES / LEGACY["v2"])["source_format"] == "benchloop-cli-0.2.3"
    assert load_bundle(FIXTURES / LEGACY["v3"])["source_format"] == "benchloop-cli-0.3.0"


@needs_fixtures
def test_the_upload_view_of_a_legacy_remote_run_leaks_no_endpoint():
    raw_text = (FIXTURES / LEGACY["v3-remote"]).read_text()
    assert "api.example.com" in raw_text  # the old CLI wrote it into backend, endpoint, host
    view = upload_view(load_bundle(FIXTURES / LEGACY["v3-remote"]))
    text = json.dumps(view)
    assert "api.example.com" not in text
    assert "https://" not in text
    assert "endpoint" not in view["machine"] and "remote_host" not in view["machine"]
    assert view["machine"]["backend"] == "fakecloud"
    assert "machine_id" not in view["machine"]  # legacy ids are MAC-derived
    for suite in view["suites"].values():
        assert all("output" not in task for task in suite["tasks"])
    assert "extras" not in view


def test_model_ids_that_are_paths_keep_only_the_file_name():
    bundle = {"model": {"model_id": "/home/alice/models/qwen3-8b-q4.gguf"}, "machine": {}}
    assert upload_view(bundle)["model"]["model_id"] == "qwen3-8b-q4.gguf"


def test_bundles_are_written_atomically(tmp_path):
    path = tmp_path / "runs" / "r1" / "run.json"
    write_bundle({"status": "incomplete", "n": 1}, path)
    with pytest.raises(TypeError):
        write_bundle({"status": "complete", "bad": object()}, path)
    # The failed write left the previous file intact and no temp file behind.
    assert json.loads(path.read_text()) == {"status": "incomplete", "n": 1}
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]


def test_runs_are_found_by_id_prefix_path_or_latest(tmp_path):
    runs = tmp_path / "runs"
    for name in ("20260101-000000-a", "20260102-000000-b"):
        write_bundle({"run_id": name}, runs / name / "run.json")
    assert find_run("latest", runs).parent.name == "20260102-000000-b"
    assert find_run("20260101", runs).parent.name == "20260101-000000-a"
    assert find_run(str(runs / "20260101-000000-a"), runs).name == "run.json"
    with pytest.raises(UsageError):
        find_run("2026", runs)  # ambiguous
    with pytest.raises(UsageError):
        find_run("nope", runs)


def test_the_schema_rejects_a_bundle_missing_fields_or_with_a_bad_status():
    errors = validation_errors({"bundle_schema_version": "1.0", "status": "done"})
    assert any("required" in e for e in errors)
    assert any(e.startswith("status") for e in errors)


def test_local_speed_curve_reference_points():
    assert scoring.local_speed_score(60) == pytest.approx(75.0, abs=0.1)
    assert scoring.local_speed_score(5) == pytest.approx(30.0, abs=0.1)
    assert scoring.local_speed_score(1000) == 100.0
    assert scoring.local_speed_score(0) == 0.0


def test_the_cloud_curve_is_continuous_at_ten_tokens_per_second():
    below = scoring.cloud_decode_score(9.9999)
    above = scoring.cloud_decode_score(10.0)
    assert above == pytest.approx(below, abs=0.01)
    assert scoring.cloud_ttft_score(500) == pytest.approx(85.9, abs=0.1)
    assert scoring.cloud_speed_score(150, 20) == pytest.approx(0.6 * 100 + 0.4 * 52, abs=0.01)


def test_run_aggregates_match_the_v3_golden_example():
    def suite(score, ok=True):
        return {"score": score, "tasks": [{"execution_ok": ok}]}

    suites = {
        "speed": suite(70),
        "toolcall": suite(80),
        "coding": suite(60),
        "dataextract": suite(100),
        "instructfollow": suite(40),
        "reasonmath": suite(20, ok=False),
    }
    core = load_profiles()["profiles"]["core"]
    result = scoring.aggregate(suites, core)
    assert result == {
        "overall_score": 61.57,
        "quality_score": 57.0,
        "speed_score": 70.0,
        "reliability_score": 83.33,
    }


def test_speed_presence_not_its_score_picks_the_formula():
    profile = {"suites": ["speed", "toolcall"], "quality_weights": {"toolcall": 1.0}}
    zero_speed = {
        "speed": {"score": 0.0, "tasks": [{"execution_ok": True}]},
        "toolcall": {"score": 50.0, "tasks": [{"execution_ok": True}]},
    }
    # 0.70·50 + 0.25·0 + 0.05·100, not the no-speed 0.90·50 + 0.10·100.
    assert scoring.aggregate(zero_speed, profile)["overall_score"] == pytest.approx(40.0)


def test_a_suite_file_that_breaks_the_schema_is_refused_with_its_location(tmp_path):
    bad = tmp_path / "broken.suite.json"
    bad.write_text(
        json.dumps(
            {
                "suite_schema_version": "1.0",
                "suite": "x",
                "version": "1.0.0",
                "tasks": [{"id": "t1"}],
            }
        )
    )
    with pytest.raises(SuiteDataError) as caught:
        load_suite_file(bad)
    assert "broken.suite.json" in caught.value.message


def test_a_quality_suite_plugs_in_with_a_data_file_and_a_verifier_only(tmp_path, monkeypatch):
    (tmp_path / "echo.suite.json").write_text(
        json.dumps(
            {
                "suite_schema_version": "1.0",
                "suite": "echo",
                "version": "0.1.0",
                "verifier": "worker.tests.test_engine_bundle:_echo_verifier",
                "tasks": [{"id": "echo-1", "messages": [{"role": "user", "content": "Say hi"}]}],
            }
        )
    )
    monkeypatch.setenv("BENCHLOOP_SUITES_PATH", str(tmp_path))
    from worker.engine.suites import available_suites

    suites = available_suites()
    assert {"speed", "echo"} <= set(suites)
    assert suites["echo"].verifier is _echo_verifier


def _echo_verifier(task, response):
    from worker.engine.suites import Verdict

    return Verdict(score=100.0 if "hi" in response.content.lower() else 0.0, passed=True)


def test_the_engine_imports_without_django():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'django' or name.startswith('django.'):\n"
        "            raise ImportError('django is blocked for this check')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import worker.cli, worker.engine.orchestrator, worker.engine.bundle\n"
        "assert not any(m.startswith('django') for m in sys.modules)\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
