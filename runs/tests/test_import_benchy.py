"""llama-benchy's real output (its JSON, CSV and Markdown) lands as runs whose stored figures
are the file's own numbers, in the cells our own sweep writes.

The fixtures were written by llama-benchy 0.4.0 against llama.cpp's llama-server serving
SmolLM2 (bench/make_external_fixtures.py; manifest.json there has the commands):
`--pp 64 --tg 16 --depth 0 256 --concurrency 1 2 --runs 3 --enable-prefix-caching`. The tests
read each file a second way, without the importer, and compare what was stored with it.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

import pytest

from runs.importers import public_fields
from runs.importers.benchy import public_model_name
from runs.importers.external import NeedsHardware, detect_external, parse_external
from runs.importers.records import FormatError, HardwareRecord
from runs.models import Run, SuiteResult, TaskResult
from submissions.intake import import_records
from worker.rules.stats import MIN_MEDIAN_N

DATA = Path(__file__).resolve().parent / "data" / "external"
MACHINE = HardwareRecord(cpu="AMD EPYC", os_name="linux")
FORMATS = {
    "llama-benchy.json": "llama-benchy-json",
    "llama-benchy.csv": "llama-benchy-csv",
    "llama-benchy.md": "llama-benchy-md",
}


def figures(name: str) -> dict[str, dict]:
    """{test name: {mean, std, values, req_mean, ttft_mean, ttft}} read without the importer."""
    text = (DATA / name).read_text()
    out: dict[str, dict] = {}
    if name.endswith(".json"):
        document = json.loads(text)
        widest = document["max_concurrency"]
        for b in document["benchmarks"]:
            c = f" (c{b['concurrency']})" if widest > 1 else ""
            context = b["is_context_prefill_phase"]
            d = f" @ d{b['context_size']}" if b["context_size"] or context else ""
            for metric, size in (("pp", b["prompt_size"]), ("tg", b["response_size"])):
                total = b[f"{metric}_throughput"]
                label = f"ctx_{metric}" if context else f"{metric}{size}"
                ttft = b["e2e_ttft"] if metric == "pp" else None
                out[f"{label}{d}{c}"] = {
                    "mean": total["mean"],
                    "values": total["values"],
                    "req": b[f"{metric}_req_throughput"]["values"],
                    "ttft": ttft["values"] if ttft else [],
                    "ttft_mean": ttft["mean"] if ttft else None,
                }
        return out
    if name.endswith(".csv"):
        for row in csv.DictReader(io.StringIO(text)):
            out[row["test_name"]] = {
                "mean": float(row["t_s_mean"]),
                "req_mean": float(row["t_s_req_mean"]),
                "ttft_mean": float(row["e2e_ttft_mean"]) if row["e2e_ttft_mean"] else None,
                "values": [],
            }
        return out
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        ttft = cells["e2e_ttft (ms)"]
        out[cells["test"]] = {
            "mean": float(cells["t/s (total)"].split(" ± ")[0]),
            "req_mean": float(cells["t/s (req)"].split(" ± ")[0]),
            "ttft_mean": float(ttft.split(" ± ")[0]) if ttft else None,
            "values": [],
        }
    return out


def expected(entry: dict, key: str = "values") -> tuple[str, float | None]:
    """(stat, figure) the run should hold: the median of at least MIN_MEDIAN_N samples, else
    the mean (of the samples, or the file's own where it has none)."""
    values = entry.get(key, [])
    if len(values) >= MIN_MEDIAN_N:
        return "median", statistics.median(values)
    mean_key = {"values": "mean", "ttft": "ttft_mean"}[key]
    return "mean", statistics.fmean(values) if values else entry[mean_key]


def imported(name: str) -> Run:
    records = parse_external((DATA / name).read_text(), filename=name, hardware=MACHINE)
    (run,) = import_records([public_fields(r) for r in records]).created
    return Run.objects.select_related("stack", "hardware", "hardware_class").get(pk=run.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_lands_as_a_run_with_the_files_own_figures(name, client) -> None:
    assert detect_external((DATA / name).read_text(), name) == FORMATS[name]
    tests = figures(name)
    run = imported(name)

    assert run.method == run.stack.method == run.source_format == "llama-benchy"
    assert run.stack.engine == "openai-compatible"  # llama-benchy names no engine
    # The served name without the quantization the stack names on its own.
    assert run.stack.model_id == "SmolLM2-135M-Instruct" and run.stack.quantization == "Q4_1"
    assert run.stack.quantization == "Q4_1"
    assert run.provenance["hardware_source"] == "submitter"
    assert run.hardware.cpu_model and run.hardware_class.kind == "cpu"
    assert run.score_scale == "speed" and run.published

    # The headline: the one-stream, depth-0 cells; TTFT is llama-benchy's end-to-end TTFT.
    suffix = " (c1)"
    decode, prefill = tests[f"tg16{suffix}"], tests[f"pp64{suffix}"]
    for field, entry, key in (
        ("decode_tps", decode, "values"),
        ("prefill_tps", prefill, "values"),
        ("ttft_ms", prefill, "ttft"),
    ):
        stat, figure = expected(entry, key)
        assert getattr(run, f"{field}_{stat}") == pytest.approx(figure, abs=1e-3), field
    if decode["values"]:
        assert run.speed_sample_count == len(decode["values"])
        stored = TaskResult.objects.get(suite_result__run=run, task_id=f"tg16{suffix}")
        assert [s.decode_tps for s in stored.samples.order_by("trial_index")] == pytest.approx(
            decode["values"]
        )
        assert run.decode_tps_mean == pytest.approx(decode["mean"], abs=1e-3)
    else:
        assert run.speed_sample_count is None and run.decode_tps_median is None

    # The depth cells (one stream) and the concurrency cells (depth 0), as our sweep has them.
    sweeps = run.raw_payload["sweeps"]
    depth = {c["depth"]: c for c in sweeps["depth"]["cells"]}
    assert sorted(depth) == [0, 256]
    stat, figure = expected(tests[f"tg16 @ d256{suffix}"])
    assert depth[256]["decode_tps"][stat] == pytest.approx(figure, abs=1e-3)
    stat, figure = expected(tests[f"pp64 @ d256{suffix}"])
    assert depth[256]["prefill_tps"][stat] == pytest.approx(figure, abs=1e-3)
    streams = {c["streams"]: c for c in sweeps["concurrency"]["cells"]}
    assert sorted(streams) == [1, 2]
    two = tests["tg16 (c2)"]
    total = statistics.fmean(two["values"]) if two["values"] else two["mean"]
    assert streams[2]["aggregate_decode_tps"] == pytest.approx(total, abs=1e-3)
    per_stream = streams[2]["per_stream_tps"]
    if two["values"]:
        assert per_stream["n"] == len(two["req"])
        assert per_stream["mean"] == pytest.approx(statistics.fmean(two["req"]), abs=1e-3)
    else:
        assert per_stream["mean"] == pytest.approx(two["req_mean"], abs=1e-3)
    sweep = SuiteResult.objects.get(run=run, suite="speed_sweep")
    cell = TaskResult.objects.get(suite_result=sweep, task_id="sweep-concurrency-2")
    assert cell.metadata["sweep"] == {
        "kind": "concurrency",
        "streams": 2,
        "prompt_tokens": 64,
        "output_tokens": 16,
    }

    # The context loads and the depth-with-streams results are stored, labelled, ranked on
    # nothing.
    for task_id in ("ctx_pp @ d256 (c1)", "tg16 @ d256 (c2)"):
        task = TaskResult.objects.get(suite_result=sweep, task_id=task_id)
        assert task.metadata["ranks"] is False
        assert task.metadata["mean_tps"] == pytest.approx(tests[task_id]["mean"], abs=1e-3)

    page = client.get(f"/runs/{run.id}/")
    assert page.status_code == 200
    assert "sweep-concurrency-2" in page.content.decode()


@pytest.mark.django_db
def test_importing_the_same_json_again_adds_nothing() -> None:
    imported("llama-benchy.json")
    records = parse_external((DATA / "llama-benchy.json").read_text(), hardware=MACHINE)
    assert import_records([public_fields(r) for r in records]).created == []


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_without_hardware_it_asks_with_a_sentence_saying_why(name) -> None:
    with pytest.raises(NeedsHardware) as caught:
        parse_external((DATA / name).read_text(), filename=name)
    message = str(caught.value)
    assert "never names the machine" in message and "--hardware" in message
    assert message.endswith(".")


def test_the_override_source_is_recorded() -> None:
    (record,) = parse_external(
        (DATA / "llama-benchy.csv").read_text(), hardware=MACHINE, hardware_source="override"
    )
    assert (record.hardware, record.hardware_source) == (MACHINE, "override")


def test_a_local_path_given_as_the_model_keeps_only_its_file_name() -> None:
    assert public_model_name("/home/alice/models/Qwen3-8B-Q4_K_M.gguf") == "Qwen3-8B-Q4_K_M.gguf"
    assert public_model_name("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    document = json.loads((DATA / "llama-benchy.json").read_text())
    document["model"] = "/home/alice/models/SmolLM2-135M-Instruct-Q4_1.gguf"
    (record,) = parse_external(json.dumps(document), hardware=MACHINE)
    assert record.model_id == "SmolLM2-135M-Instruct-Q4_1.gguf"
    assert "alice" not in json.dumps(record.raw_payload["source"])


# ------------------------------------------------------------------------------ bad input


def test_truncated_json_names_the_line() -> None:
    text = (DATA / "llama-benchy.json").read_text()
    with pytest.raises(FormatError, match=r"^line \d+ column \d+: invalid JSON"):
        parse_external(text[: len(text) // 3], hardware=MACHINE)


def test_a_result_without_its_concurrency_names_the_field() -> None:
    document = json.loads((DATA / "llama-benchy.json").read_text())
    del document["benchmarks"][1]["concurrency"]
    with pytest.raises(FormatError, match=r"^benchmarks\[1\]\.concurrency: is missing"):
        parse_external(json.dumps(document), hardware=MACHINE)


def test_a_csv_without_its_rate_column_names_it() -> None:
    rows = list(csv.reader(io.StringIO((DATA / "llama-benchy.csv").read_text())))
    drop = rows[0].index("t_s_mean")
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(
        [[v for i, v in enumerate(row) if i != drop] for row in rows]
    )
    with pytest.raises(FormatError, match=r"^line 1: column 't_s_mean' is missing"):
        parse_external(buffer.getvalue(), hardware=MACHINE)


def test_a_truncated_markdown_row_names_its_line() -> None:
    lines = (DATA / "llama-benchy.md").read_text().splitlines()
    cut = "\n".join(lines[:3] + [lines[3][:50]])
    with pytest.raises(FormatError, match=r"^line 4: \d+ cells for 9 columns"):
        parse_external(cut, hardware=MACHINE)


def test_an_unreadable_test_name_is_named() -> None:
    text = (DATA / "llama-benchy.csv").read_text().replace("tg16 (c1)", "tg-sixteen", 1)
    with pytest.raises(FormatError, match=r"^line 3: test: unrecognised llama-benchy test"):
        parse_external(text, hardware=MACHINE)
