"""What the importer carries from a bundle 1.1 written by the real engine against the real
llama.cpp server, and how it reads older bundles and legacy files by the same rules."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import jsonschema
import pytest

from runs.importers import FormatError, parse_run_payload
from runs.limits import upload_schema
from runs.models import Run
from submissions.intake import import_records
from worker.engine.bundle import upload_view
from worker.engine.orchestrator import run_benchmark
from worker.engine.plan import RunConfig
from worker.engine.testing.xllama_launcher import model_path


@pytest.fixture(scope="module")
def bundle(llm_url, tmp_path_factory) -> dict:
    """A speed-only run of one task, three trials, through the engine as the CLI runs it."""
    home = tmp_path_factory.mktemp("import-home")
    config = RunConfig(url=llm_url, tasks=["speed-p128-n256"], trials=3, max_tokens=8, home=home)
    outcome = run_benchmark(config)
    assert outcome.status == "complete"
    return upload_view(outcome.bundle)


@pytest.mark.llm
def test_an_engine_bundle_passes_the_upload_schema_and_carries_its_stack(bundle):
    jsonschema.validate(bundle, upload_schema())
    record = parse_run_payload(copy.deepcopy(bundle))
    # Speed-only: its own scale, and no quality or overall score to rank it by.
    assert record.score_scale == "speed"
    assert record.quality_score is record.overall_score is record.value_score is None
    assert record.speed_score == bundle["speed_score"] > 0
    # Not comparable, with the engine's reasons.
    assert record.comparable is False
    assert record.noncomparable_reasons == bundle["comparability"]["reasons"]
    assert record.noncomparable_reasons[0].startswith("--tasks speed-p128-n256")
    assert record.coverage_score == round(100 / 3, 2)  # one of the speed suite's three cells
    # The stack's identity, as recorded at the source.
    weights = hashlib.sha256(model_path().read_bytes()).hexdigest()
    assert record.model_sha256 == weights
    assert record.context_length == bundle["launch"]["context_length"] == 4096
    assert record.launch_settings == bundle["launch"]["settings"]
    assert record.command_used == bundle["launch"]["command"]
    assert record.engine_version == bundle["engine"]["version"]
    # The measuring machine's load, for the site's "verified" rule.
    assert record.contention_status == bundle["contention"]["status"]
    assert record.contention["host"] == bundle["contention"]["host"]
    assert record.speed["decode_tps_median"] == bundle["speed_summary"]["decode_tps"]["median"]


@pytest.mark.llm
@pytest.mark.django_db
def test_the_stored_run_is_speed_only_and_its_stack_named_by_its_weights(bundle):
    (run,) = import_records([parse_run_payload(copy.deepcopy(bundle))]).created
    run = Run.objects.select_related("stack").get(pk=run.pk)
    assert (run.score_scale, run.overall_score, run.quality_score) == ("speed", None, None)
    assert run.stack.model_sha256 == bundle["model"]["sha256"]
    assert run.stack.context_length == 4096
    assert run.stack.launch_settings == bundle["launch"]["settings"]


@pytest.mark.llm
def test_an_older_bundle_gets_the_reasons_it_shows_and_no_median_of_two(bundle):
    old = copy.deepcopy(bundle)
    old["bundle_schema_version"] = "1.0"
    for key in ("comparability", "contention"):
        old.pop(key)
    # What a 1.0 engine said of a full run with a skipped long-context task.
    old.update(comparable=True, coverage_score=100.0)
    old["settings"] |= {
        "task_filter": [],
        "max_tokens_cap": None,
        "selected_suites": ["speed", "longcontext"],
    }
    old["benchmark_profile"] = "full"
    old["suites"]["longcontext"] = {
        "suite": "longcontext",
        "score": 0.0,
        "task_count": 1,
        "pass_count": 0,
        "fail_count": 1,
        "median_latency_ms": 1.0,
        "tasks": [
            {
                "task_id": "lc-8k",
                "suite": "longcontext",
                "passed": False,
                "score": 0.0,
                "latency_ms": 1.0,
                "tokens_generated": 0,
                "tokens_prompt": 0,
                "error": "the request exceeds the available context size",
                "execution_ok": True,
                "metadata": {"skipped": True, "skip_reason": "prompt exceeds the server's context"},
            }
        ],
    }
    old["speed_summary"]["decode_tps"] |= {"n": 2, "median": 61.0}
    record = parse_run_payload(old)
    assert record.comparable is False
    assert record.noncomparable_reasons == [
        "1 task skipped or cut off: the server's context (4096 tokens) is too small"
    ]
    assert record.score_scale == "v3"  # it has a quality suite
    assert record.speed["decode_tps_median"] is None  # two samples have no median
    assert record.contention_status == "" and record.contention == {}


@pytest.mark.llm
def test_a_weights_digest_that_is_not_hex_is_refused_where_it_is(bundle):
    bad = copy.deepcopy(bundle)
    bad["model"].pop("sha256")
    bad["model"]["ollama_digest"] = "sha256:not-a-digest"
    with pytest.raises(FormatError) as caught:
        parse_run_payload(bad)
    assert caught.value.position == "model.ollama_digest"
    ollama = copy.deepcopy(bundle)
    ollama["model"] = {**ollama["model"], "ollama_digest": "ab" * 32}
    ollama["model"].pop("sha256")
    assert parse_run_payload(ollama).model_sha256 == "ab" * 32


def test_a_legacy_speed_only_file_has_no_quality_or_overall_score(fixtures_dir: Path):
    """benchloop-cli 0.3.0 gave a speed-only run quality 0 and overall 0.25·S + 0.05·R."""
    doc = json.loads((fixtures_dir / "generated/v3-full-local/run.json").read_text())
    doc["suites"] = {"speed": doc["suites"]["speed"]}
    doc.update(benchmark_profile="speed", requested_profile="speed", quality_score=0.0)
    doc["overall_score"] = round(0.25 * doc["speed_score"] + 0.05 * 100, 2)
    record = parse_run_payload(doc)
    assert record.score_scale == "speed"
    assert record.quality_score is record.overall_score is record.value_score is None
    assert record.speed_score == doc["speed_score"]


def test_the_legacy_full_run_whose_long_prompts_were_cut_is_not_comparable(fixtures_dir: Path):
    """Its long-context prompts (2k–32k tokens) reached the model as 80 tokens: the old CLI
    still called the run comparable."""
    doc = json.loads((fixtures_dir / "generated/v3-full-local/run.json").read_text())
    assert doc["comparable"] is True
    record = parse_run_payload(doc)
    assert record.comparable is False
    assert record.noncomparable_reasons == [
        "4 tasks skipped or cut off: the server's context is too small"
    ]


@pytest.mark.llm
@pytest.mark.django_db
def test_the_run_page_says_why_a_run_is_not_ranked(bundle, client):
    (run,) = import_records([parse_run_payload(copy.deepcopy(bundle))]).created
    run.refresh_from_db()
    assert run.noncomparable_reasons == bundle["comparability"]["reasons"]
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="noncomparable"' in html
    # A speed-only run has no coverage rule: it is still counted on its scale, and says so.
    assert run.score_scale == "speed" and "--tasks speed-p128-n256" in html
    assert "Not comparable with a full v3 run" in html and "Not ranked with other runs" not in html


@pytest.mark.llm
@pytest.mark.django_db
def test_a_lab_run_measured_under_load_is_not_published_as_verified(bundle):
    for status, verified in (("contended", False), ("clear", True), ("unknown", True)):
        loaded = copy.deepcopy(bundle)
        loaded["contention"]["status"] = status
        loaded["client_run_id"] = f"lab-{status}"
        record = parse_run_payload(loaded)
        assert record.contention_status == status
        (run,) = import_records([record], is_verified=True).created
        run.refresh_from_db()
        assert (run.contention_status, run.is_verified) == (status, verified)
