"""manage.py import_results against every real fixture format."""

from __future__ import annotations

import copy
import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runs import normalize
from runs.models import Hardware, Run, SpeedSample, Stack, SuiteResult, TaskResult
from submissions.models import Submission

pytestmark = pytest.mark.django_db

ALL_TABLES = [Run, Stack, Hardware, SuiteResult, TaskResult, SpeedSample, Submission]


def _import(*paths: Path, **options) -> str:
    out = io.StringIO()
    call_command("import_results", *[str(p) for p in paths], stdout=out, stderr=out, **options)
    return out.getvalue()


def _row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in ALL_TABLES}


# Every row of leaderboard.json: (id, stack model id, harness, overall, quality), unrounded v2.
# The file names the prompt formats by their old names (hermes, qwen, pi); they are stored by
# today's (issue 19), so such a stack is never mistaken for the real Hermes Agent program.
LEADERBOARD_V2_ROWS = [
    ("20260512-150046-qwen3.6-27b-local-ollama", "qwen3.6:27b", "raw", 75.15899999999999, 96.88),
    (
        "20260512-145456-pc1-coder-v2-latest-local-ollama",
        "pc1-coder-v2",
        "raw",
        75.15899999999999,
        96.88,
    ),
    (
        "20260512-150212-OsaurusAI-MiniMax-M2.7-Small-JANGTQ-local-openai_compat",
        "OsaurusAI/MiniMax-M2.7-Small-JANGTQ",
        "raw",
        75.15899999999999,
        96.88,
    ),
    ("20260512-145608-pc1-coder-latest-local-ollama", "pc1-coder", "raw", 75.15899999999999, 96.88),
    ("20260512-125752-qwen3-8b-local-ollama", "qwen3:8b", "raw", 72.93146666666667, None),
    ("20260512-141932-qwen3-8b-local-ollama", "qwen3:8b", "xml-tool-call", 70.3125, None),
    ("20260512-141928-qwen3-8b-local-ollama", "qwen3:8b", "xml-function-call", 70.3125, None),
    (
        "20260430-211450-pc1-qwen36-unsloth-text-q4-remote-55-ollama",
        "pc1-qwen36-unsloth-text:q4",
        "raw",
        61.05432012195122,
        None,
    ),
    (
        "20260512-150104-pc1-critic-latest-local-ollama",
        "pc1-critic",
        "raw",
        50.93750000000001,
        None,
    ),
    ("20260512-001414-qwen2.5-1.5b-local-ollama", "qwen2.5:1.5b", "raw", 44.84843333333333, None),
    (
        "20260512-141650-qwen3-8b-local-ollama",
        "qwen3:8b",
        "think-xml-tool-call",
        30.937500000000004,
        None,
    ),
]


def test_it_imports_every_leaderboard_v2_row_with_unrounded_scores(fixtures_dir: Path) -> None:
    output = _import(fixtures_dir / "leaderboard.json")

    assert "created 11, skipped 0" in output
    runs = {run.client_run_id: run for run in Run.objects.select_related("stack", "hardware")}
    assert len(runs) == 11
    for run_id, model_id, harness, overall, quality in LEADERBOARD_V2_ROWS:
        run = runs[run_id]
        assert run.stack.model_id == model_id
        assert run.stack.harness == harness
        assert run.overall_score == overall  # exact float equality: nothing was rounded
        if quality is not None:
            assert run.quality_score == quality
        assert run.score_scale == "v2"
        assert run.score_schema_version == ""
        assert run.hardware.gpu_model == "Apple M1 Pro"
        assert run.published
    qwen = runs["20260512-125752-qwen3-8b-local-ollama"]
    assert (qwen.quality_score, qwen.speed_score) == (73.616, 78.88)
    assert qwen.reliability_score == 66.66666666666666
    assert qwen.decode_tps_mean == 74.572395758733
    assert qwen.ttft_ms_mean == 108.04354444444444
    assert qwen.decode_tps_median is None  # v2 published only a mean; we do not invent a median
    assert set(qwen.suite_results.values_list("suite", flat=True)) == {
        "coding",
        "dataextract",
        "instructfollow",
        "reasonmath",
        "speed",
        "toolcall",
    }
    agent = runs["20260512-150046-qwen3.6-27b-local-ollama"].suite_results.get()
    assert (agent.suite, agent.score, agent.task_count, agent.pass_count) == ("agent", 96.88, 8, 7)


# stack_id: (peak, mean, median, stdev) tok/s, as published in leaderboard-v1.json.
LEADERBOARD_V1_SPEEDS = {
    "0d26b50cc89dda53": (186.56, 152.28, 153.96, 26.54),
    "8ad2f2a19a15e732": (176.36, 135.56, 137.7, 36.43),
    "4b0c996adb1f4589": (164.21, 124.14, 124.95, 22.62),
    "9d93a5422a865f46": (164.03, 122.77, 123.27, 25.69),
    "71ecf63a0d8edcc7": (160.32, 121.42, 127.97, 22.97),
    "dcbe16357a5fc21d": (156.0, 117.96, 138.87, 39.77),
    "1045c3f3c8a53a5d": (135.64, 115.71, 112.15, 14.59),
    "9c3182b621b96379": (168.55, 109.55, 130.55, 54.73),
    "56f4cd38eefdfd93": (164.38, 108.72, 132.14, 48.48),
    "a02d44758e771721": (137.5, 105.23, 98.03, 19.08),
    "f72bcfdbfd8b79ee": (155.45, 103.6, 117.85, 43.26),
    "d7581bbdec12dea1": (156.96, 97.48, 105.07, 38.23),
    "cd1fdd8b0314965f": (195.54, 96.67, 45.56, 83.93),
    "c6f42ff8eff71c3a": (216.69, 75.18, 47.61, 79.73),
    "b9bcfde725ff6f48": (122.36, 64.43, 39.07, 50.9),
    "669bafc4e268eb8e": (10.35, 10.3, 10.3, 0.06),
    "c8ede43737ff6152": (13.6, 6.98, 6.3, 5.95),
}


def test_it_imports_every_leaderboard_v1_speed_stack(fixtures_dir: Path) -> None:
    output = _import(fixtures_dir / "leaderboard-v1.json")

    assert "created 17, skipped 0" in output
    runs = {run.client_run_id: run for run in Run.objects.select_related("stack", "hardware")}
    assert set(runs) == set(LEADERBOARD_V1_SPEEDS)
    for stack_id, (peak, mean, median, stdev) in LEADERBOARD_V1_SPEEDS.items():
        run = runs[stack_id]
        assert (
            run.decode_tps_peak,
            run.decode_tps_mean,
            run.decode_tps_median,
            run.decode_tps_stdev,
        ) == (peak, mean, median, stdev)
        assert run.score_scale == "speed"
        assert run.overall_score is None
        assert run.stack.engine == "llama.cpp"
        assert run.hardware.gpu_model == "RTX 4090"
    first = runs["0d26b50cc89dda53"]
    assert first.stack.draft_model == "qwen3.6-0.6b:Q8"
    assert first.stack.context_length == 8192
    assert first.stack.kv_cache_type == "q8_0"
    assert first.stack.launch_settings["draft_params"]["draft_max"] == 20
    assert first.prefill_tps_mean == 351.02
    assert first.speed_sample_count == 10
    assert first.submission.submitter_name == "Eric"
    # Different draft settings or context lengths are different stacks.
    assert Stack.objects.count() == 17


def test_it_imports_each_generated_run_file(fixtures_dir: Path) -> None:
    generated = fixtures_dir / "generated"

    _import(generated / "v2-0.2.3-local/run.json")
    v2 = Run.objects.get(source_format="run-v2")
    assert v2.score_scale == "v2"
    assert v2.overall_score == 23.070756554307117
    assert v2.suite_results.count() == 7
    assert TaskResult.objects.filter(suite_result__run=v2).count() == 89
    assert TaskResult.objects.filter(suite_result__run=v2, execution_ok=None).count() == 89
    # 9 speed tasks × 3 trials, the first of each a warm-up that the summary leaves out.
    assert SpeedSample.objects.filter(task_result__suite_result__run=v2).count() == 27
    assert v2.speed_sample_count == 18
    assert v2.decode_tps_median == 58.0
    assert v2.decode_tps_peak == 61.0
    assert v2.decode_tps_p5 == 55.0
    assert v2.decode_tps_mean == pytest.approx(58.0556, abs=1e-4)
    assert v2.decode_tps_stdev == pytest.approx(2.0996, abs=1e-4)

    _import(generated / "v3-full-local/run.json")
    full = Run.objects.get(profile="full")
    # The file says comparable, but its long-context prompts reached the model cut to 80 tokens
    # (test_import_bundle_1_1.py): by the engine's rule it is not.
    assert (full.score_scale, full.score_schema_version, full.comparable) == ("v3", "3.0.0", False)
    assert full.manifest_hash.startswith("sha256:c19ab274")
    assert (full.overall_score, full.quality_score, full.speed_score) == (32.09, 12.1, 74.48)
    assert full.suite_results.count() == 8
    assert TaskResult.objects.filter(suite_result__run=full).count() == 93
    assert full.ttft_ms_median == 35.5
    assert full.hardware.gpu_model == "RTX 4090"
    assert full.command_used == "llama-server -m model.gguf -ngl 99"
    assert full.stack.engine == "llama.cpp"

    _import(generated / "v3-smoke-local-run.json")
    smoke = Run.objects.get(profile="smoke")
    assert smoke.client_run_id == full.client_run_id  # same folder name, still a different run
    assert TaskResult.objects.filter(suite_result__run=smoke).count() == 39

    _import(generated / "v3-custom-remote/run.json")
    remote = Run.objects.get(profile="custom")
    assert remote.hardware is None  # a cloud endpoint's hardware is never claimed
    assert (remote.scoring_mode, remote.comparable, remote.coverage_score) == (
        "remote",
        False,
        40.0,
    )
    assert remote.prefill_tps_median is None  # 0.0 in the file meant "not measured"

    _import(generated / "v3-failed/run.json")
    failed = Run.objects.get(outcome="failed")
    assert failed.error.startswith("Model 'qwen3:8b' not found")
    assert failed.overall_score is None
    assert not failed.published

    _import(generated / "bench_results.jsonl", model="Qwen3.6-27B")
    probe = Run.objects.get(source_format="speed-jsonl")
    assert probe.stack.model_id == "Qwen3.6-27B"
    assert (
        probe.decode_tps_peak,
        probe.decode_tps_mean,
        probe.decode_tps_median,
        probe.decode_tps_stdev,
    ) == (171.87, 131.66, 133.63, 20.4)
    assert probe.speed_sample_count == 10
    assert SpeedSample.objects.filter(task_result__suite_result__run=probe).count() == 10
    assert probe.stack.launch_settings == {"tag": "win8k-q8kv-dmax16-p60"}

    assert Run.objects.count() == 6


def test_the_publish_envelope_is_the_same_run_as_its_run_json(fixtures_dir: Path) -> None:
    envelope = fixtures_dir / "generated/v3-full-local/publish-payload.json"
    output = _import(envelope)
    assert "created 1, skipped 0" in output
    run = Run.objects.get()
    assert run.source_format == "envelope-v3"
    assert run.visibility == "public"
    assert run.decode_tps_median == 58.0
    assert run.decode_tps_p95 == 61.0

    output = _import(fixtures_dir / "generated/v3-full-local/run.json")
    assert "created 0, skipped 1" in output
    assert Run.objects.count() == 1


def test_a_second_import_of_everything_adds_nothing(fixtures_dir: Path) -> None:
    files = [
        fixtures_dir / "leaderboard.json",
        fixtures_dir / "leaderboard-v1.json",
        *sorted((fixtures_dir / "generated").rglob("run.json")),
        fixtures_dir / "generated/v3-smoke-local-run.json",
        fixtures_dir / "generated/v3-full-local/publish-payload.json",
        fixtures_dir / "generated/bench_results.jsonl",
    ]
    first = _import(*files)
    assert "total: 34 created, 1 skipped, 0 file(s) rejected" in first
    before = _row_counts()

    second = _import(*files)

    assert "total: 0 created, 35 skipped, 0 file(s) rejected" in second
    assert _row_counts() == before


def _truncate(text: str) -> str:
    return text[: len(text) // 2]


def _wrong_type(text: str) -> str:
    data = json.loads(text)
    target = data.get("run", data)
    if "runs" in target:
        target["runs"][3]["overall_score"] = "very good"
    elif "entries" in target:
        target["entries"][5]["speed"]["peak_tps"] = -12.0
    else:
        target["overall_score"] = float("nan")
        return json.dumps(data)  # json.dumps writes NaN, which strict JSON refuses
    return json.dumps(data)


CORRUPT_CASES = [
    ("leaderboard.json", _truncate, "invalid JSON"),
    ("leaderboard.json", _wrong_type, "runs[3].overall_score: expected a number, got a string"),
    ("leaderboard-v1.json", _truncate, "invalid JSON"),
    ("leaderboard-v1.json", _wrong_type, "entries[5].speed.peak_tps: must be ≥ 0, got -12"),
    ("generated/v2-0.2.3-local/run.json", _truncate, "invalid JSON"),
    ("generated/v2-0.2.3-local/run.json", _wrong_type, "NaN is not valid JSON"),
    ("generated/v3-full-local/run.json", _truncate, "invalid JSON"),
    ("generated/v3-full-local/run.json", _wrong_type, "NaN is not valid JSON"),
    ("generated/v3-full-local/publish-payload.json", _truncate, "invalid JSON"),
    ("generated/v3-full-local/publish-payload.json", _wrong_type, "NaN is not valid JSON"),
    ("generated/v3-failed/run.json", _truncate, "invalid JSON"),
    (
        "generated/bench_results.jsonl",
        lambda t: t.replace('"gen_tps": 138.23', '"gen_tps": "x"'),
        "line 3.gen_tps: expected a number, got a string",
    ),
    (
        "generated/bench_results.jsonl",
        lambda t: t[: t.index("\n", 400) - 30],
        "line 2: invalid JSON",
    ),
]


@pytest.mark.parametrize(
    ("name", "corrupt", "message"),
    CORRUPT_CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(CORRUPT_CASES)],
)
def test_a_corrupted_file_is_rejected_with_one_clear_line_and_changes_nothing(
    fixtures_dir: Path, tmp_path: Path, name: str, corrupt, message: str
) -> None:
    _import(fixtures_dir / "generated/v3-smoke-local-run.json")  # something to leave untouched
    before = _row_counts()
    bad = tmp_path / Path(name).name
    bad.write_text(corrupt((fixtures_dir / name).read_text()))
    out, err = io.StringIO(), io.StringIO()

    with pytest.raises(CommandError, match="1 file\\(s\\) rejected"):
        call_command("import_results", str(bad), stdout=out, stderr=err)

    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"rejected {bad}: ")
    assert message in lines[0]
    assert _row_counts() == before


def test_a_file_with_one_bad_row_imports_none_of_its_rows(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    data = json.loads((fixtures_dir / "leaderboard.json").read_text())
    data["runs"][-1]["timestamp"] = "2099-01-01T00:00:00+00:00"
    bad = tmp_path / "leaderboard.json"
    bad.write_text(json.dumps(data))

    with pytest.raises(CommandError):
        _import(bad)

    assert Run.objects.count() == 0


def test_unknown_score_schema_major_is_refused(fixtures_dir: Path, tmp_path: Path) -> None:
    data = json.loads((fixtures_dir / "generated/v3-smoke-local-run.json").read_text())
    data["score_schema_version"] = "9.0.0"
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps(data))
    err = io.StringIO()

    with pytest.raises(CommandError):
        call_command("import_results", str(bad), stdout=io.StringIO(), stderr=err)

    assert "score_schema_version: unknown score schema version '9.0.0'" in err.getvalue()


def test_a_folder_is_searched_and_unrelated_json_is_reported(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    shutil.copy(fixtures_dir / "generated/v3-smoke-local-run.json", tmp_path / "run.json")
    (tmp_path / "notes.json").write_text('{"hello": "world"}')
    err = io.StringIO()

    with pytest.raises(CommandError):
        call_command("import_results", str(tmp_path), stdout=io.StringIO(), stderr=err)

    assert "notes.json: (top level): unrecognised format" in err.getvalue()
    assert Run.objects.count() == 1  # each file is its own transaction


@pytest.mark.parametrize(
    ("old", "new"),
    [("hermes", "xml-tool-call"), ("qwen", "xml-function-call"), ("pi", "think-xml-tool-call")],
)
def test_an_old_clis_format_name_is_stored_by_its_new_name(fixtures_dir: Path, old, new) -> None:
    """A run.json from the earlier CLI with --harness hermes lands on the renamed stack, keyed
    as a new upload with --harness xml-tool-call is: one stack, never the Hermes program's."""
    from runs.importers import parse_run_payload
    from submissions.intake import import_records

    data = json.loads((fixtures_dir / "generated/v3-smoke-local-run.json").read_text())
    data["harness"] = old
    record = parse_run_payload(copy.deepcopy(data))
    assert record.harness == new
    (run,) = import_records([record]).created
    stack = run.stack
    assert stack.harness == new
    fields = ("model_id", "quantization", "model_sha256", "engine", "context_length")
    fields += ("kv_cache_type", "draft_model", "launch_settings")
    same = {name: getattr(stack, name) for name in fields}
    assert stack.comparability_key == normalize.stack_identity(harness=new, **same)
    assert stack.comparability_key != normalize.stack_identity(harness=old, **same)
