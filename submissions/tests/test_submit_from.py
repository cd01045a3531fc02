"""POST /api/v1/runs/external with the real llama-bench and llama-benchy outputs made here
(runs/tests/data/external): each file lands as runs with their method, build, backend, machine
and cells, and the stored figures are the file's own, read here without the site's parser.
Repeats are duplicates; a bad file, a file with no machine, another account's runs or a body
too large store nothing."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import sqlite3
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.test import Client

from runs.importers.external import build_label
from runs.models import Hardware, Run, SpeedSample, Stack, TaskResult
from submissions.models import Channel, Submission
from submissions.services import create_api_key
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db

URL = "/api/v1/runs/external"
DATA = Path(__file__).resolve().parents[2] / "runs/tests/data/external"
# The generator's manifest lists every file it made, with the command that made it.
MANIFEST = json.loads((DATA / "manifest.json").read_text())
FILES = [entry["file"] for entry in MANIFEST["files"]]
# This machine as `benchloop submit --from` describes it (worker.cli.submit_from.this_machine).
MACHINE = {"cpu": "AMD EPYC 7B13", "gpu": "", "gpu_count": 0, "ram_gb": 62.8, "os": "Linux"}


def _method(name: str) -> str:
    return "llama-benchy" if name.startswith("llama-benchy") else "llama-bench"


def _names_hardware(name: str, text: str) -> bool:
    """Whether the file names its machine: llama-bench's structured formats (cpu_info), or
    its Markdown table with llama.cpp's device lines pasted above it; llama-benchy never."""
    if _method(name) == "llama-benchy":
        return False
    if name.endswith(".md"):
        # llama.cpp's device lines: "Device 0: NVIDIA …" (CUDA, ROCm, SYCL), Metal's "GPU name:".
        return bool(re.search(r"Device \d+:|GPU name:", text))
    return True


# --- the file's own figures, read without the site's parser ---------------------------------


@dataclass
class Row:
    """One test as the file states it."""

    name: str  # "pp64", "tg16 @ d256", "pp64+tg16"
    mean: float
    samples: list[float] = field(default_factory=list)


@dataclass
class Expected:
    """One run's worth of the file: the tests that share one set of settings."""

    build: str
    backend: str
    cpu: str
    rows: list[Row]


def _test_name(n_prompt: int, n_gen: int, depth: int) -> str:
    if n_gen == 0:
        name = f"pp{n_prompt}"
    elif n_prompt == 0:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}+tg{n_gen}"
    return f"{name} @ d{depth}" if depth else name


# Fields of one test, as opposed to the settings it shares with the others of its run.
_TEST_FIELDS = {"n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts"}
_TEST_FIELDS |= {"stddev_ts", "samples_ns", "samples_ts", "test", "t/s"}


def _groups(records: list[dict]) -> list[list[dict]]:
    """The file's rows by their settings, in the file's order."""
    groups: dict[str, list[dict]] = {}
    for record in records:
        settings = {k: v for k, v in record.items() if k not in _TEST_FIELDS}
        groups.setdefault(json.dumps(settings, sort_keys=True, default=str), []).append(record)
    return list(groups.values())


def _from_records(records: list[dict]) -> list[Expected]:
    return [_expected(group) for group in _groups(records)]


def _expected(records: list[dict]) -> Expected:
    rows = [
        Row(
            _test_name(int(r["n_prompt"]), int(r["n_gen"]), int(r.get("n_depth") or 0)),
            float(r["avg_ts"]),
            [float(v) for v in r.get("samples_ts") or []],
        )
        for r in records
    ]
    first = records[0]
    return Expected(
        build_label(str(first["build_commit"]), int(first["build_number"])),
        str(first["backends"]),
        str(first["cpu_info"]),
        rows,
    )


def _from_markdown(text: str) -> list[Expected]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    records = []
    for line in lines[1:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        if cells["test"] != "test" and not set(cells["test"]) <= set("-:"):  # not a rule
            records.append(cells)
    build = re.search(r"^build: (\S+) \((\d+)\)", text, re.M)
    label = build_label(build.group(1), int(build.group(2)))
    return [
        Expected(label, group[0]["backend"], "", [_md_row(c) for c in group])
        for group in _groups(records)
    ]


def _md_row(cells: dict) -> Row:
    return Row(cells["test"], float(cells["t/s"].split("±")[0]))


def _llama_bench(name: str, text: str) -> list[Expected]:
    if name.endswith(".json"):
        return _from_records(json.loads(text))
    if name.endswith(".jsonl"):
        return _from_records([json.loads(line) for line in text.splitlines() if line.strip()])
    if name.endswith(".csv"):
        return _from_records(list(csv.DictReader(io.StringIO(text))))
    if name.endswith(".sql"):
        db = sqlite3.connect(":memory:")
        db.row_factory = sqlite3.Row
        db.executescript(text)  # llama-bench writes SQLite's dialect
        return _from_records([dict(r) for r in db.execute("SELECT * FROM llama_bench")])
    return _from_markdown(text)


def _llama_benchy(name: str, text: str) -> list[Row]:
    """llama-benchy's tests: JSON's benchmarks (a pp and a tg test each, with their values),
    or the rows of its CSV and Markdown (total t/s, mean only)."""
    if name.endswith(".json"):
        rows = []
        for b in json.loads(text)["benchmarks"]:
            depth, streams = b["context_size"], b["concurrency"]
            where = (f" @ d{depth}" if depth else "") + f" (c{streams})"
            pp, tg = (
                ("ctx_pp", "ctx_tg")
                if b["is_context_prefill_phase"]
                else (f"pp{b['prompt_size']}", f"tg{b['response_size']}")
            )
            for test, figure in ((pp, b["pp_throughput"]), (tg, b["tg_throughput"])):
                rows.append(Row(test + where, figure["mean"], figure["values"]))
        return rows
    if name.endswith(".csv"):
        return [
            Row(r["test_name"], float(r["t_s_mean"])) for r in csv.DictReader(io.StringIO(text))
        ]
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        rows.append(Row(cells["test"], float(cells["t/s (total)"].split("±")[0])))
    return rows


# --- what the site stored --------------------------------------------------------------------


def _tasks_for(run: Run, test: str) -> list[TaskResult]:
    """The tasks that hold the file's test: its own (pp64, of the speed suite) and a sweep
    cell's (sweep-depth-256 holds pp64 @ d256; sweep-depth-0 holds pp64 too)."""
    tasks = TaskResult.objects.filter(suite_result__run=run)
    found = [t for t in tasks if t.task_id == test or test in t.metadata.get("tests", [])]
    assert found, (test, [t.task_id for t in tasks])
    return found


def _stored_mean(task: TaskResult, row: Row) -> float | None:
    """The test's mean as the run states it: its task's, or its sweep cell's figure (a
    concurrency cell's decode figure is the streams' total rate; it has no prefill rate)."""
    if "cell" not in task.metadata:
        return task.metadata["mean_tps"]
    cell, decode = task.metadata["cell"], row.name.startswith("tg")
    if "streams" in cell:
        return cell["aggregate_decode_tps"] if decode else None
    return cell["decode_tps" if decode else "prefill_tps"]["mean"]


def _holds_the_tests(run: Run, rows: list[Row]) -> None:
    """Each test of the file is in the run, with its mean and, where the file has them, its
    samples as trials."""
    for row in rows:
        for task in _tasks_for(run, row.name):
            mean = _stored_mean(task, row)
            if mean is not None:
                assert mean == pytest.approx(row.mean, rel=1e-3), (row.name, task.task_id)
            phase = "ctx" not in row.name and "+" not in row.name  # those have no rates
            if row.samples and phase and "streams" not in task.metadata.get("cell", {}):
                assert _stored_samples(task, row) == pytest.approx(row.samples), row.name


def _stored_samples(task: TaskResult, row: Row) -> list[float]:
    figure = "decode_tps" if row.name.startswith("tg") else "prefill_tps"
    samples = SpeedSample.objects.filter(task_result=task).order_by("trial_index")
    return list(samples.values_list(figure, flat=True))


def _post(key: str, name: str, *, text: str | None = None, **extra):
    body = {"filename": name, "content": (DATA / name).read_text() if text is None else text}
    return post_json(Client(), URL, {**body, **extra}, key)


def _nothing_stored() -> bool:
    return not (
        Run.objects.exists()
        or Submission.objects.exists()
        or Stack.objects.exists()
        or Hardware.objects.exists()
    )


# --- the formats -----------------------------------------------------------------------------


def test_every_format_of_both_tools_is_here() -> None:
    """Must show 1: llama-bench's five formats and llama-benchy's three, made here."""
    suffixes = {(_method(n), Path(n).suffix) for n in FILES}
    assert {s for m, s in suffixes if m == "llama-bench"} >= {
        ".json",
        ".jsonl",
        ".csv",
        ".sql",
        ".md",
    }
    assert {s for m, s in suffixes if m == "llama-benchy"} >= {".json", ".csv", ".md"}


@pytest.mark.parametrize("name", [n for n in FILES if _method(n) == "llama-bench"])
def test_a_llama_bench_file_lands_with_its_method_build_backend_and_cells(
    alice, alice_key, name, settings
) -> None:
    settings.SITE_URL = "https://bench.example.org"
    text = (DATA / name).read_text()
    hardware = None if _names_hardware(name, text) else MACHINE
    response = _post(alice_key, name, hardware=hardware)
    assert response.status_code == 201, response.json()
    body = response.json()
    expected = _llama_bench(name, text)
    # One run per set of settings (-t 1,2 makes two), in the file's order.
    assert len(body["runs"]) == len(expected) == Run.objects.count()
    for answer, group in zip(body["runs"], expected, strict=True):
        run = Run.objects.select_related("stack", "hardware").get(pk=answer["id"])
        assert answer["url"] == f"https://bench.example.org/runs/{run.pk}/"
        assert (answer["method"], run.method, run.stack.method) == ("llama-bench",) * 3
        # The stack's label, with what tells it from the file's other runs (n_threads=2).
        assert answer["stack"].startswith(run.stack.label) and answer["status"] == "pending"
        if len(expected) > 1:
            assert f"n_threads={run.stack.launch_settings['n_threads']}" in answer["stack"]
        assert run.engine_version == group.build
        assert run.stack.launch_settings["backend"] == group.backend
        assert run.submission.channel == Channel.API_KEY and run.submission.submitter == alice
        if hardware is None:
            assert body["hardware_source"] == answer["hardware_source"] == "file"
            assert group.cpu in run.hardware.cpu_model
        else:
            assert body["hardware_source"] == answer["hardware_source"] == "submitter"
            assert run.hardware.cpu_model == MACHINE["cpu"]
        assert answer["hardware"] == run.hardware_class.label
        assert run.provenance["hardware_source"] == answer["hardware_source"]
        _has_the_files_figures(run, answer, group)


@pytest.mark.parametrize("name", [n for n in FILES if _method(n) == "llama-benchy"])
def test_a_llama_benchy_file_lands_with_its_depth_and_concurrency_cells(alice_key, name) -> None:
    text = (DATA / name).read_text()
    response = _post(alice_key, name, hardware=MACHINE)
    assert response.status_code == 201, response.json()
    (answer,) = response.json()["runs"]
    run = Run.objects.select_related("stack", "hardware").get(pk=answer["id"])
    assert (answer["method"], run.method, run.stack.method) == ("llama-benchy",) * 3
    assert answer["hardware_source"] == "submitter"
    assert run.hardware.cpu_model == MACHINE["cpu"]
    assert {"sweep-depth-256", "sweep-concurrency-2"} <= set(answer["cells"])
    rows = _llama_benchy(name, text)
    _holds_the_tests(run, rows)
    pp, tg = (next(r for r in rows if r.name == f"{t} (c1)") for t in ("pp64", "tg16"))
    assert run.prefill_tps_mean == pytest.approx(pp.mean, rel=1e-3)
    assert run.decode_tps_mean == pytest.approx(tg.mean, rel=1e-3)


def _has_the_files_figures(run: Run, answer: dict, group: Expected) -> None:
    """Every test of the file is a cell of the run, with the file's own figures."""
    tasks = TaskResult.objects.filter(suite_result__run=run)
    assert answer["cells"] == [t.task_id for t in tasks.order_by("suite_result_id", "id")]
    _holds_the_tests(run, group.rows)
    # The headline figures are the depth-0 tests': medians of their samples where the file
    # has samples (n and the interval come from them), else the means it states.
    pp = next(r for r in group.rows if re.fullmatch(r"pp\d+", r.name))
    tg = next(r for r in group.rows if re.fullmatch(r"tg\d+", r.name))
    if tg.samples:
        assert run.decode_tps_median == pytest.approx(statistics.median(tg.samples), rel=1e-4)
        assert run.prefill_tps_median == pytest.approx(statistics.median(pp.samples), rel=1e-4)
        assert run.speed_sample_count == len(tg.samples)
    else:
        assert run.decode_tps_mean == pytest.approx(tg.mean, rel=1e-3)
        assert run.prefill_tps_mean == pytest.approx(pp.mean, rel=1e-3)


@pytest.mark.parametrize("name", FILES)
def test_sending_the_same_file_again_is_a_duplicate(alice_key, name) -> None:
    hardware = None if _names_hardware(name, (DATA / name).read_text()) else MACHINE
    first = _post(alice_key, name, hardware=hardware)
    assert first.status_code == 201
    counts = (Run.objects.count(), SpeedSample.objects.count())
    again = _post(alice_key, name, hardware=hardware)
    assert again.status_code == 200
    assert [r["id"] for r in again.json()["runs"]] == [r["id"] for r in first.json()["runs"]]
    assert again.json()["duplicate"] is True
    assert all(r["duplicate"] for r in again.json()["runs"])
    assert (Run.objects.count(), SpeedSample.objects.count()) == counts


# --- hardware --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", [n for n in FILES if not _names_hardware(n, (DATA / n).read_text())]
)
def test_a_file_that_names_no_machine_gets_the_hardware_question(alice_key, name) -> None:
    response = _post(alice_key, name)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "needs_hardware"
    assert error["message"].endswith("say which with --hardware.")
    assert _nothing_stored()


@pytest.mark.parametrize(
    "name", [n for n in FILES if not _names_hardware(n, (DATA / n).read_text())]
)
def test_the_submitters_machine_or_the_words_given_stand_in(alice_key, name) -> None:
    sent = _post(alice_key, name, hardware=MACHINE, hardware_source="submitter")
    assert sent.status_code == 201, sent.json()
    assert sent.json()["hardware_source"] == "submitter"
    for answer in sent.json()["runs"]:
        run = Run.objects.select_related("hardware").get(pk=answer["id"])
        assert run.hardware.cpu_model == MACHINE["cpu"] and run.hardware.gpu_model == ""
        assert answer["hardware"] == run.hardware_class.label


def test_hardware_given_in_words_overrides_the_files(alice_key) -> None:
    name = next(n for n in FILES if n.endswith(".json") and _method(n) == "llama-bench")
    sent = _post(alice_key, name, hardware="RTX 4090 24 GB", hardware_source="override")
    assert sent.status_code == 201, sent.json()
    (answer,) = sent.json()["runs"]
    run = Run.objects.select_related("hardware").get(pk=answer["id"])
    assert answer["hardware_source"] == "override"
    assert (run.hardware.gpu_model, run.hardware.vram_gb) == ("RTX 4090", 24.0)


@pytest.mark.parametrize(
    ("hardware", "source", "path"),
    [
        ({"gpu_count": 1}, "submitter", "hardware"),
        ({"cpu": 7}, "submitter", "hardware.cpu"),
        ({"cpu": "x", "ram_gb": -1}, "submitter", "hardware.ram_gb"),
        ("", "override", "hardware"),
        (MACHINE, "the file's", "hardware_source"),
    ],
)
def test_a_machine_that_cannot_be_read_is_a_400_naming_the_field(
    alice_key, hardware, source, path
) -> None:
    response = _post(alice_key, "llama-bench.md", hardware=hardware, hardware_source=source)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert response.json()["error"]["fields"][0]["path"] == path
    assert _nothing_stored()


# --- bad input -------------------------------------------------------------------------------


def _cut_in_a_row(path: Path) -> str:
    """The file as a copy that stopped half-way through a result row (a copy cut at the end
    of a row, or inside its last number, reads as a shorter file and cannot be told from one).
    Result rows: a table's lines, SQL's INSERTs, JSON's and CSV's lines."""
    lines = path.read_text().splitlines(keepends=True)
    marks = {".md": "|", ".sql": "INSERT"}
    rows = [i for i, line in enumerate(lines) if line.startswith(marks.get(path.suffix, ""))]
    index = rows[int(len(rows) * 0.6)]
    return "".join(lines[:index]) + lines[index][: len(lines[index]) // 2]


@pytest.mark.parametrize("name", FILES)
def test_a_truncated_file_is_a_400_with_its_position_and_stores_nothing(alice_key, name) -> None:
    response = _post(alice_key, name, text=_cut_in_a_row(DATA / name), hardware=MACHINE)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "bad_file"
    assert error["fields"][0]["path"] and error["fields"][0]["path"] != "(file)"
    assert error["fields"][0]["path"] in error["message"]
    assert _nothing_stored()


def test_a_file_of_neither_tool_is_a_400(alice_key) -> None:
    response = _post(alice_key, "notes.txt", text="just some notes\nabout a benchmark\n")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_file"
    assert "not llama-bench or llama-benchy output" in response.json()["error"]["message"]


def test_one_run_that_cannot_be_stored_stores_none_of_the_file(alice_key) -> None:
    """A file of two models whose second names a model no column holds: the first run, its
    stack and its machine are rolled back with it."""
    rows = json.loads((DATA / "llama-bench.json").read_text())
    other = copy.deepcopy(rows)
    for row in other:
        row["model_filename"] = "/models/" + "m" * 400 + ".Q4_1.gguf"
    response = _post(alice_key, "two-models.json", text=json.dumps(rows + other))
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == "bad_file"
    assert _nothing_stored()


def test_another_accounts_runs_are_a_409_and_nothing_is_stored(alice_key, mallory_key) -> None:
    assert _post(alice_key, "llama-bench.json").status_code == 201
    stored = Run.objects.count()
    response = _post(mallory_key, "llama-bench.json")
    assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"
    assert Run.objects.count() == stored


def test_a_body_over_the_upload_limit_is_a_413(alice_key, settings) -> None:
    settings.BENCHLOOP_MAX_UPLOAD_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    response = _post(alice_key, "llama-bench.json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert _nothing_stored()


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"filename": "x.json"}, "content"),
        ({"filename": 3, "content": "[]"}, "filename"),
        ({"filename": "x.json", "content": ["a"]}, "content"),
    ],
)
def test_a_body_without_a_file_is_a_400_naming_the_field(alice_key, body, path) -> None:
    response = post_json(Client(), URL, body, alice_key)
    assert response.status_code == 400
    assert response.json()["error"]["fields"][0]["path"] == path


# --- the upload's key, scope and throttle ----------------------------------------------------


def test_the_key_scope_and_throttle_are_the_bundle_uploads(alice, alice_key, throttle_rates):
    assert _post("", "llama-bench.json").status_code == 401
    read_only = create_api_key(user=alice, name="reader", scopes=["read"])[1]
    assert _post(read_only, "llama-bench.json").status_code == 403
    throttle_rates["upload"] = "2/hour"
    # One count for both endpoints: a bundle upload (refused, but counted) and a file.
    assert post_json(Client(), "/api/v1/runs", {}, alice_key).status_code == 400
    assert _post(alice_key, "llama-bench.json").status_code == 201
    assert _post(alice_key, "llama-bench.json").status_code == 429
