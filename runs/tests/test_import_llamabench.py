"""llama-bench's real output, in every format it writes, lands as runs whose stored figures are
the file's own numbers.

The fixtures in runs/tests/data/external/ were written by llama-bench itself against SmolLM2
(bench/make_external_fixtures.py; manifest.json there says which build and command). Each test
reads the fixture a second way, independently of the importer (json, csv, sqlite3 for the SQL,
a split on "|" for Markdown), and compares what was stored with it.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import statistics
from pathlib import Path

import pytest

from runs import normalize
from runs.importers import public_fields
from runs.importers.external import NeedsHardware, build_label, detect_external, parse_external
from runs.importers.llamacpp import quant_label, read_devices
from runs.importers.records import FormatError, HardwareRecord
from runs.models import Run, SuiteResult, TaskResult
from submissions.intake import import_records

DATA = Path(__file__).resolve().parent / "data" / "external"
MACHINE = HardwareRecord(cpu="AMD EPYC", os_name="linux")
FORMATS = {
    "llama-bench.json": "llama-bench-json",
    "llama-bench.jsonl": "llama-bench-jsonl",
    "llama-bench.csv": "llama-bench-csv",
    "llama-bench.sql": "llama-bench-sql",
    "llama-bench.md": "llama-bench-md",
    "llama-bench.stderr.md": "llama-bench-md",
}


# ------------------------------------------------------------ the files, read independently


def file_rows(name: str) -> list[dict]:
    """The fixture's rows as plain dicts (numbers as numbers), read without the importer."""
    text = (DATA / name).read_text()
    if name.endswith(".json"):
        return json.loads(text)
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if name.endswith(".csv"):
        return [_numbers(row) for row in csv.DictReader(io.StringIO(text))]
    if name.endswith(".sql"):
        db = sqlite3.connect(":memory:")
        db.row_factory = sqlite3.Row
        db.executescript(text)
        return [_numbers(dict(row)) for row in db.execute("SELECT * FROM llama_bench")]
    return _markdown_rows(text)


def _numbers(row: dict) -> dict:
    out = {}
    for key, value in row.items():
        try:
            out[key] = float(value) if "." in str(value) else int(value)
        except (TypeError, ValueError):
            out[key] = value
    return out


def _markdown_rows(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        if cells["test"] == "test":
            continue
        test = re.fullmatch(r"(?:pp(\d+))?\+?(?:tg(\d+))?(?: @ d(\d+))?", cells["test"])
        mean, std = (float(x) for x in cells["t/s"].split(" ± "))
        rows.append(
            {
                "n_prompt": int(test[1] or 0),
                "n_gen": int(test[2] or 0),
                "n_depth": int(test[3] or 0),
                "avg_ts": mean,
                "stddev_ts": std,
                "backends": cells["backend"],
                "n_threads": int(cells["threads"]),
                "model_type": cells["model"],
            }
        )
    build = re.search(r"^build: (\S+) \((\d+)\)$", text, re.M)
    for row in rows:
        row["build_commit"], row["build_number"] = build[1], int(build[2])
    return rows


def row_of(rows: list[dict], *, n_prompt: int, n_gen: int, n_depth: int = 0) -> dict:
    (found,) = [
        r
        for r in rows
        if r["n_prompt"] == n_prompt and r["n_gen"] == n_gen and r.get("n_depth", 0) == n_depth
    ]
    return found


def imported(name: str, hardware: HardwareRecord | None = None) -> list[Run]:
    text = (DATA / name).read_text()
    records = parse_external(text, filename=name, hardware=hardware)
    return import_records([public_fields(r) for r in records]).created


# --------------------------------------------------------------------- every format, stored


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_lands_as_a_run_with_the_files_own_figures(name, client) -> None:
    assert detect_external((DATA / name).read_text(), name) == FORMATS[name]
    rows = file_rows(name)
    markdown = name.endswith(".md")
    (run,) = imported(name, MACHINE if markdown else None)
    run = Run.objects.select_related("stack", "hardware", "hardware_class").get(pk=run.pk)
    first = rows[0]

    # Method, build, backend, settings: the file's own.
    assert run.method == run.stack.method == run.source_format == "llama-bench"
    assert run.stack.engine == "llama.cpp"
    assert run.engine_version == build_label(str(first["build_commit"]), first["build_number"])
    settings = run.stack.launch_settings
    assert settings["backend"] == first["backends"] == "CPU"
    assert settings["n_threads"] == first["n_threads"]
    assert run.score_scale == "speed" and run.outcome == "complete" and run.published

    # The model: the file's name without its folders (llama-bench wrote an absolute path), or in
    # a Markdown table, which names no file, llama.cpp's own model type.
    if markdown:
        assert run.stack.model_id == " ".join(first["model_type"].split()[:2])
    else:
        assert "/" in first["model_filename"]
        # ... without the quantization the stack names on its own ("…Instruct.Q4_1").
        assert f"{run.stack.model_id}.Q4_1" == Path(first["model_filename"]).stem
        assert settings["params_b"] == round(first["model_n_params"] / 1e9, 4)
        assert run.stack.kv_cache_type == first["type_k"] == first["type_v"]
    assert run.stack.quantization == "Q4_1" == first["model_type"].split()[-1]
    public = json.dumps([run.stack.model_id, run.stack.launch_settings, run.provenance])
    assert "/work/" not in public and ".venv" not in public

    # Hardware: from the file (cpu_info), or for a Markdown table the submitter's.
    expected = (
        MACHINE
        if markdown
        else HardwareRecord(cpu=first["cpu_info"], gpu=first["gpu_info"], gpu_count=1)
    )
    assert run.hardware.cpu_model == normalize.canonical_cpu(expected.cpu)
    assert (
        run.hardware_class.key
        == normalize.hardware_class(
            cpu=expected.cpu,
            gpu=expected.gpu,
            gpu_count=1,
            vram_gb=None,
            ram_gb=None,
            os_name=expected.os_name,
        )["key"]
    )

    # The headline: pp64 is prefill, tg16 decode; n and the median from samples_ts when the
    # format has them, the mean alone otherwise. llama-bench measures no TTFT.
    prefill = row_of(rows, n_prompt=64, n_gen=0)
    decode = row_of(rows, n_prompt=0, n_gen=16)
    if "samples_ts" in first:
        assert run.decode_tps_median == pytest.approx(
            statistics.median(decode["samples_ts"]), abs=1e-4
        )
        assert run.prefill_tps_median == pytest.approx(
            statistics.median(prefill["samples_ts"]), abs=1e-4
        )
        assert run.speed_sample_count == len(decode["samples_ts"]) == 3
        stored = TaskResult.objects.get(suite_result__run=run, task_id="tg16")
        assert [s.decode_tps for s in stored.samples.order_by("trial_index")] == pytest.approx(
            decode["samples_ts"]
        )
    else:
        assert run.decode_tps_median is None and run.speed_sample_count is None
        assert run.decode_tps_mean == pytest.approx(decode["avg_ts"], abs=1e-4)
        assert run.prefill_tps_mean == pytest.approx(prefill["avg_ts"], abs=1e-4)
    assert run.ttft_ms_median is None and run.ttft_ms_mean is None

    # The depth cells: @ d256 beside depth 0, as our own sweep writes them.
    cells = run.raw_payload["sweeps"]["depth"]["cells"]
    assert [c["depth"] for c in cells] == sorted({r["n_depth"] for r in rows}) == [0, 256]
    deep = row_of(rows, n_prompt=0, n_gen=16, n_depth=256)
    stat = "median" if "samples_ts" in first else "mean"
    figure = statistics.median(deep["samples_ts"]) if stat == "median" else deep["avg_ts"]
    assert cells[1]["decode_tps"][stat] == pytest.approx(figure, abs=1e-4)
    sweep = SuiteResult.objects.get(run=run, suite="speed_sweep")
    cell_task = TaskResult.objects.get(suite_result=sweep, task_id="sweep-depth-256")
    assert cell_task.metadata["sweep"]["kind"] == "depth"
    assert cell_task.metadata["cell"]["decode_tps"][stat] == pytest.approx(figure, abs=1e-4)

    # pp64+tg16 is stored, labelled, and ranks nothing.
    combined = TaskResult.objects.get(suite_result__run=run, task_id="pp64+tg16")
    assert combined.metadata["phase"] == "combined" and combined.metadata["ranks"] is False
    both = row_of(rows, n_prompt=64, n_gen=16)
    assert combined.metadata["mean_tps"] == pytest.approx(both["avg_ts"], abs=1e-4)
    assert run.decode_tps_mean != pytest.approx(both["avg_ts"], abs=1e-4)

    page = client.get(f"/runs/{run.id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "sweep-depth-256" in html and "pp64+tg16" in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name",
    # The Markdown and CSV tables hold no time: they are dated when read, and still one run.
    ["llama-bench.json", "llama-bench.jsonl", "llama-bench.sql", "llama-bench.csv"]
    + ["llama-bench.md", "llama-benchy.md", "llama-benchy.csv"],
)
def test_importing_the_same_file_again_adds_nothing(name) -> None:
    here = HardwareRecord(cpu="AMD EPYC 7763 64-Core Processor", gpu="", gpu_count=0)
    hardware = here if name.endswith(".md") or "benchy" in name else None
    assert len(imported(name, hardware)) == 1
    assert imported(name, hardware) == []
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_one_run_per_setting_in_one_file() -> None:
    """`-t 1,2`: two thread counts, two stacks, each with its own samples."""
    rows = file_rows("llama-bench.threads.json")
    runs = imported("llama-bench.threads.json")
    assert len(runs) == 2
    by_threads = {run.stack.launch_settings["n_threads"]: run for run in runs}
    assert set(by_threads) == {1, 2}
    assert by_threads[1].stack_id != by_threads[2].stack_id
    for threads, run in by_threads.items():
        mine = [r for r in rows if r["n_threads"] == threads]
        decode = row_of(mine, n_prompt=0, n_gen=8)
        assert run.decode_tps_median == pytest.approx(
            statistics.median(decode["samples_ts"]), abs=1e-4
        )


# ---------------------------------------------------------------------------- hardware


def test_a_markdown_table_without_device_lines_asks_for_the_hardware() -> None:
    for name in ("llama-bench.md", "llama-bench.stderr.md"):
        with pytest.raises(NeedsHardware) as caught:
            parse_external((DATA / name).read_text(), filename=name)
        message = str(caught.value)
        assert "names no hardware" in message and "--hardware" in message
        assert message.endswith(".")


def test_the_files_hardware_wins_over_the_submitters_and_an_override_over_both() -> None:
    text = (DATA / "llama-bench.json").read_text()
    other = HardwareRecord(gpu="NVIDIA GeForce RTX 4090", vram_gb=24)
    (from_file,) = parse_external(text, hardware=other, hardware_source="submitter")
    assert (from_file.hardware.cpu, from_file.hardware_source) == ("AMD EPYC", "file")
    (overridden,) = parse_external(text, hardware=other, hardware_source="override")
    assert (overridden.hardware, overridden.hardware_source) == (other, "override")
    (md,) = parse_external((DATA / "llama-bench.md").read_text(), hardware=other)
    assert (md.hardware, md.hardware_source) == (other, "submitter")


# The device lines llama.cpp prints to stderr, in the forms its source writes them
# (ggml-cuda.cu ggml_cuda_init, ggml-vulkan.cpp, ggml-metal-device.m, older ggml-metal.m).
DEVICE_LINES = {
    "CUDA": (
        "ggml_cuda_init: found 1 CUDA devices (Total VRAM: 24080 MiB):\n"
        "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes, VRAM: 24080 MiB",
        ["NVIDIA GeForce RTX 4090"],
    ),
    "ROCm": (
        "ggml_cuda_init: found 2 ROCm devices:\n"
        "  Device 0: AMD Radeon RX 7900 XTX, gfx1100 (0x1100), VMM: no, Wave Size: 32\n"
        "  Device 1: AMD Radeon RX 7900 XTX, gfx1100 (0x1100), VMM: no, Wave Size: 32",
        ["AMD Radeon RX 7900 XTX", "AMD Radeon RX 7900 XTX"],
    ),
    "Vulkan": (
        "ggml_vulkan: Found 1 Vulkan devices:\n"
        "ggml_vulkan: 0 = AMD Radeon RX 7900 XTX (RADV NAVI31) (radv) | uma: 0 | fp16: 1 | "
        "bf16: 0 | warp size: 64 | shared memory: 65536 | int dot: 1 | matrix cores: KHR_coopmat",
        ["AMD Radeon RX 7900 XTX"],
    ),
    "Metal": ("ggml_metal_device_init: GPU name:   MTL0 (Apple M4 Max)", ["Apple M4 Max"]),
}


@pytest.mark.parametrize("backend", sorted(DEVICE_LINES))
def test_device_lines_pasted_above_the_table_name_the_hardware(backend) -> None:
    lines, gpus = DEVICE_LINES[backend]
    assert read_devices(lines).gpus == gpus
    text = lines + "\n" + (DATA / "llama-bench.md").read_text()
    (record,) = parse_external(text, filename="pasted.md")
    assert record.hardware_source == "file"
    assert record.hardware.gpu == ", ".join(gpus)
    assert record.hardware.gpu_count == len(gpus)


# ---------------------------------------------------------------- old builds and forks


def _rewritten(change) -> str:
    rows = json.loads((DATA / "llama-bench.json").read_text())
    for row in rows:
        change(row)
    return json.dumps(rows, indent=2)


def test_an_old_build_with_per_backend_booleans_and_f16_kv_imports() -> None:
    """Builds of 2023 wrote `cuda`, `metal`, … and `f16_kv` where today's write `backends`,
    `type_k` and `type_v`, and had no depth."""

    def old(row: dict) -> None:
        for name in ("backends", "type_k", "type_v", "n_depth", "flash_attn", "devices"):
            row.pop(name)
        row.update(cuda=False, metal=False, gpu_blas=False, blas=True, f16_kv=True, mul_mat_q=True)

    records = parse_external(_rewritten(old))
    assert len(records) == 1  # depth gone: the d256 tests are now tests of their own size
    settings = records[0].launch_settings
    assert settings["backend"] == "CPU"
    assert settings["type_k"] == settings["type_v"] == records[0].kv_cache_type == "f16"


def test_an_old_cuda_build_reads_as_cuda() -> None:
    def old(row: dict) -> None:
        row.pop("backends")
        row.update(cuda=True, metal=False, gpu_info="NVIDIA GeForce RTX 3090 Ti")

    (record,) = parse_external(_rewritten(old))
    assert record.launch_settings["backend"] == "CUDA"
    assert record.hardware.gpu == "NVIDIA GeForce RTX 3090 Ti"


def test_a_build_without_a_field_we_need_says_which() -> None:
    with pytest.raises(FormatError, match=r"^\[0\]\.n_gen: is missing"):
        parse_external(_rewritten(lambda row: row.pop("n_gen")))


def test_a_forks_extra_fields_are_kept_in_the_payload() -> None:
    (record,) = parse_external(_rewritten(lambda row: row.update(fork_kernel="fast-mmq")))
    assert {row["fork_kernel"] for row in record.raw_payload["tests"]} == {"fast-mmq"}
    assert all("/" not in row["model_filename"] for row in record.raw_payload["tests"])


# ------------------------------------------------------------------------------ bad input


def test_truncated_json_names_the_line() -> None:
    text = (DATA / "llama-bench.json").read_text()
    with pytest.raises(FormatError, match=r"^line \d+ column \d+: invalid JSON"):
        parse_external(text[: len(text) // 2])


def test_truncated_jsonl_names_the_line() -> None:
    text = (DATA / "llama-bench.jsonl").read_text()
    lines = text.splitlines()
    cut = "\n".join(lines[:-1] + [lines[-1][:200]])
    with pytest.raises(FormatError, match=rf"^line {len(lines)} column \d+: invalid JSON"):
        parse_external(cut)


@pytest.mark.parametrize("column", ["n_gen", "avg_ts"])
def test_a_csv_without_a_required_column_names_it(column) -> None:
    rows = list(csv.reader(io.StringIO((DATA / "llama-bench.csv").read_text())))
    drop = rows[0].index(column)
    kept = [[v for i, v in enumerate(row) if i != drop] for row in rows]
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(kept)
    with pytest.raises(FormatError, match=f"^line 1: column '{column}' is missing"):
        parse_external(buffer.getvalue())


def test_a_truncated_csv_row_names_its_line() -> None:
    text = (DATA / "llama-bench.csv").read_text().rstrip("\n")
    cut = text[: text.rindex(",", 0, len(text) - 40)]
    with pytest.raises(FormatError, match=rf"^line {len(text.splitlines())}: \d+ values for"):
        parse_external(cut)


def test_a_truncated_sql_statement_names_its_line() -> None:
    text = (DATA / "llama-bench.sql").read_text().rstrip("\n")
    with pytest.raises(FormatError, match=rf"^line {len(text.splitlines())}: "):
        parse_external(text[:-60])


def test_a_truncated_markdown_row_names_its_line() -> None:
    lines = (DATA / "llama-bench.md").read_text().splitlines()
    cut = "\n".join(lines[:4] + [lines[4][:60]])
    with pytest.raises(FormatError, match=r"^line 5: \d+ cells for 8 columns"):
        parse_external(cut, hardware=MACHINE)


def test_an_unknown_table_is_refused_not_guessed() -> None:
    table = "| gpu | tokens/s |\n| --- | ---: |\n| RTX 4090 | 120.5 |\n"
    assert detect_external(table) is None
    with pytest.raises(FormatError, match="not llama-bench or llama-benchy output"):
        parse_external(table, hardware=MACHINE)


def test_a_test_name_it_cannot_read_is_named() -> None:
    text = (DATA / "llama-bench.md").read_text().replace("      pp64 |", "  warmup64 |", 1)
    with pytest.raises(FormatError, match=r"^line 3: column test: unrecognised test"):
        parse_external(text, hardware=MACHINE)


@pytest.mark.parametrize(
    ("ftype", "label"),
    [
        ("Q4_K - Medium", "Q4_K_M"),
        ("Q4_K - Small", "Q4_K_S"),
        ("Q3_K - Large", "Q3_K_L"),
        ("Q2_K - Medium", "Q2_K"),
        ("mostly Q4_0", "Q4_0"),
        ("IQ4_XS - 4.25 bpw", "IQ4_XS"),
        ("IQ3_S mix - 3.66 bpw", "IQ3_M"),
        ("all F32", "F32"),
        ("MXFP4 MoE", "MXFP4"),
        ("Q8_0", "Q8_0"),
        ("BF16", "BF16"),
    ],
)
def test_llama_cpps_file_types_map_to_quantization_labels(ftype, label) -> None:
    assert quant_label(ftype) == label
