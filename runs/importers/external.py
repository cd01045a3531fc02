"""Results from the tools people already run, llama-bench and llama-benchy, as run records.

The one entry point for `import_results`, the upload API and `benchloop submit --from`:
`detect_external` names a file's tool and format, `parse_external` reads it into one record per
stack (model, build and settings). Each test lands where our own engine puts the same figure:
`pp512` is prefill and `tg128` decode (the speed suite, which the run's headline comes from),
`@ dN` a depth cell and `(cK)` a concurrency cell of the speed_sweep suite (task metadata
{"sweep", "cell"} and the payload's `sweeps` block, as worker.engine.sweeps writes them).
`pp512+tg128` mixes both phases: it is stored, labelled, and feeds no figure. llama-bench's
`samples_ts` become trials, so a run's n and interval come from its own samples; formats that
carry only a mean (CSV, SQL, Markdown) give the mean and no median.

Hardware: a file that names it (llama-bench's cpu_info and gpu_info, or the device lines
pasted above its table) is read from the file; otherwise the caller's (the submitting machine,
or --hardware, which also overrides a file's); with neither, NeedsHardware says why.

Django-free; the records still go through runs.importers.public_fields before they are stored.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

from runs import normalize
from runs.importers import benchy, llamabench
from runs.importers.llamacpp import Measurement, Test, find_tables, model_basename
from runs.importers.records import (
    FormatError,
    HardwareRecord,
    ImportedSuite,
    ImportedTask,
    JsonObject,
    RunRecord,
    SampleRecord,
)
from worker.rules.stats import percentile, summarize

KINDS = (
    "llama-bench-json",
    "llama-bench-jsonl",
    "llama-bench-csv",
    "llama-bench-sql",
    "llama-bench-md",
    "llama-benchy-json",
    "llama-benchy-csv",
    "llama-benchy-md",
)
HARDWARE_SOURCES = ("submitter", "override")
DEPTH_METHODS = {
    "llama-bench": "llama-bench -d: d tokens are processed first (not timed), then the test's "
    "p prompt tokens are prefilled, or its n tokens decoded, on top of them, in-process",
    "llama-benchy": "llama-benchy --depth: d tokens of earlier conversation before the measured "
    "request (with --enable-prefix-caching, loaded by a request of their own first)",
}
COMBINED_NOTE = (
    "prefill and decode together: (prompt + generated tokens) ÷ the whole time; stored as "
    "measured, ranks nothing"
)
_SPLIT_FILE = re.compile(r"-\d{5}-of-\d{5}$")
_BENCH_COLUMNS = {"n_prompt", "n_gen", "avg_ts", "build_commit", "model_type", "model_filename"}


class NeedsHardware(FormatError):
    """The file names no hardware and none was given: ask, never guess."""


def detect_external(text: str, filename: str = "") -> str | None:
    """The tool and format a file came from ("llama-bench-json", "llama-benchy-md", …), by
    its content (the file name only breaks a tie); None when it is neither tool's."""
    body = text.lstrip("\ufeff").strip()
    if not body:
        return None
    head = body[:20_000]
    first = body.splitlines()[0].strip()
    bench_json = '"n_prompt"' in head and ('"avg_ts"' in head or '"samples_ts"' in head)
    if body.startswith("["):
        return "llama-bench-json" if bench_json else None
    if body.startswith("{"):
        if '"benchmarks"' in head and re.search(r'"(?:pp|tg)_throughput"|"context_size"', head):
            return "llama-benchy-json"
        if '"n_prompt"' in first and ('"avg_ts"' in first or '"samples_ts"' in first):
            return "llama-bench-jsonl"
        if bench_json and filename.lower().endswith(".json"):
            return "llama-bench-json"  # a wrapper object around the list
        return None
    columns = {c.strip().strip('"') for c in first.split(",")}
    benchy_figures = ("t_s_", "peak_ts_", "ttfr_", "est_ppt_", "e2e_ttft_")
    if "test_name" in columns and any(c.startswith(benchy_figures) for c in columns):
        return "llama-benchy-csv"
    if len(columns & _BENCH_COLUMNS) >= 2:  # by name, so a missing column can be named
        return "llama-bench-csv"
    sql = re.search(r"^\s*(?:INSERT\s+INTO|CREATE\s+TABLE)\b", body, re.I | re.M)
    if sql and ("n_prompt" in head or "avg_ts" in head):
        return "llama-bench-sql"
    for _index, names in find_tables(body):
        if "test" in names and ("e2e_ttft (ms)" in names or "ttfr (ms)" in names):
            return "llama-benchy-md"
        if "test" in names and "t/s" in names:
            return "llama-bench-md"
    return None


def parse_external(
    text: str,
    *,
    filename: str = "",
    hardware: HardwareRecord | None = None,
    hardware_source: str = "submitter",
) -> list[RunRecord]:
    """One record per stack in a llama-bench or llama-benchy file; FormatError (naming the
    line or field) for a file that cannot be read whole, NeedsHardware when nothing says
    which machine it ran on."""
    if hardware_source not in HARDWARE_SOURCES:
        raise ValueError(f"hardware_source must be one of {HARDWARE_SOURCES}")
    kind = detect_external(text, filename)
    if kind is None:
        raise FormatError(
            "",
            "not llama-bench or llama-benchy output: expected llama-bench's -o json, jsonl, "
            "csv, sql or Markdown table, or llama-benchy's JSON, CSV or Markdown",
        )
    reader = benchy if kind.startswith("llama-benchy") else llamabench
    measurements = reader.read_measurements(text, kind)
    digest = hashlib.sha256(text.replace("\r\n", "\n").strip().encode()).hexdigest()
    return [
        _record(m, digest, filename, _machine(m, kind, hardware, hardware_source))
        for m in measurements
    ]


def _machine(
    m: Measurement, kind: str, given: HardwareRecord | None, source: str
) -> tuple[HardwareRecord, str]:
    if m.hardware is not None and not (given is not None and source == "override"):
        return m.hardware, "file"
    if given is not None:
        return given, source
    if kind.startswith("llama-benchy"):
        why = (
            "llama-benchy measures a server over HTTP and its output never names the machine "
            "the server ran on"
        )
    elif kind == "llama-bench-md":
        why = (
            "this llama-bench Markdown table names no hardware (a table has no cpu_info or "
            "gpu_info, and no device line from llama.cpp's stderr is pasted with it)"
        )
    else:
        why = "this llama-bench output has an empty cpu_info and gpu_info"
    raise NeedsHardware(
        "", f"{why}, so the machine it was measured on is unknown: say which with --hardware."
    )


# ------------------------------------------------------------------------------ the record


def _record(
    m: Measurement, digest: str, filename: str, machine: tuple[HardwareRecord, str]
) -> RunRecord:
    model_id = _model_id(m)
    key = hashlib.sha256(f"{digest}:{m.key}".encode()).hexdigest()[:32]
    moments = [t.at for t in m.tests if t.at is not None]
    record = RunRecord(
        source_format=m.method,
        # A file without timestamps (Markdown, llama-benchy's CSV) was measured before now.
        started_at=min(moments) if moments else datetime.now(UTC).replace(microsecond=0),
        model_id=model_id,
        score_scale="speed",
        client_run_id=f"{m.method}-{key}",
        quantization=m.model.get("quantization") or _named_quant(m),
        engine=m.engine,
        engine_version=build_label(m.build_commit, m.build_number),
        benchmark_id=m.method,
        kv_cache_type=m.kv_cache_type,
        launch_settings=dict(m.settings),
        method=m.method,
        hardware=machine[0],
        hardware_source=machine[1],
    )
    if not moments:
        record.sources["started_at"] = "the time of import: the file has no timestamps"
    cells, rest = _cells(m)
    speed, sweep = _speed_suite(m), _sweep_suite(m, cells, rest)
    record.suites = [s for s in (speed, sweep) if s.tasks]
    _headline(record, m)
    record.provenance = {
        "source": m.method,
        "format": m.kind,
        "hardware_source": record.hardware_source,
    }
    if filename:
        record.provenance["file"] = model_basename(filename)
    record.raw_payload = {
        "source": {**m.source, "build_commit": m.build_commit, "build_number": m.build_number},
        "model": {k: v for k, v in m.model.items() if v not in (None, "")} or {"name": model_id},
        "tests" if m.method == "llama-bench" else "benchmarks": m.rows,
    }
    if block := _sweeps_block(m, cells):
        record.raw_payload["sweeps"] = block
    return record


def _model_id(m: Measurement) -> str:
    if m.model_file:
        stem = _SPLIT_FILE.sub("", re.sub(r"\.gguf$", "", m.model_file, flags=re.IGNORECASE))
        return _without_quant(stem, str(m.model.get("quantization") or ""))
    if m.model_name:
        quant = m.model.get("quantization") or _named_quant(m)
        return _without_quant(m.model_name, str(quant or ""))
    # A Markdown table names no file: llama.cpp's own name for the model, "llama 8B".
    return " ".join(p for p in (m.model.get("architecture"), m.model.get("size_label")) if p)


def _named_quant(m: Measurement) -> str:
    """The quantization a served model's or file's name carries ("…-Q4_1")."""
    return normalize.parse_model(m.model_name or m.model_file)["quantization"]


def _without_quant(name: str, quant: str) -> str:
    """The quantization is the stack's own field: "SmolLM2-135M-Instruct.Q4_1" is the model
    SmolLM2-135M-Instruct at Q4_1, not a model of that name at Q4_1 again."""
    if not quant:
        return name
    return re.sub(rf"[._-]{re.escape(quant)}$", "", name, flags=re.IGNORECASE) or name


def build_label(commit: str, number: int | None) -> str:
    """llama.cpp's build as its release tags name it, "b7000 (abc1234)"; "" when unknown (a
    build from a source tree without git reports build 0, commit "unknown")."""
    commit = "" if commit in ("", "unknown") else commit
    if number:
        return f"b{number} ({commit})" if commit else f"b{number}"
    return commit


# ------------------------------------------------------------------------------ the suites


def _summary(
    values: list[float], mean: float | None, stdev: float | None, higher: bool = True
) -> JsonObject | None:
    """The engine's Summary of a sample; a format that carries only the mean gives that."""
    if values:
        return dict(summarize(values, higher_is_better=higher))
    if mean is None:
        return None
    return {
        "n": None,
        "median": None,
        "mean": round(mean, 4),
        "stdev": None if stdev is None else round(stdev, 4),
    }


def _note(m: Measurement, test: Test) -> str:
    if test.phase == "combined":
        return COMBINED_NOTE
    if test.phase == "context":
        return "llama-benchy's context load before a depth cell: stored, ranks nothing"
    what = "prompt processing" if test.phase == "prefill" else "generation"
    count = f", {len(test.samples)} samples" if test.samples else ", mean only"
    return f"{m.method} {test.name}: {what}{count}"


def _task(
    m: Measurement, test: Test, task_id: str, metadata: JsonObject | None = None
) -> ImportedTask:
    latency = (sum(test.samples_ns) / len(test.samples_ns) / 1e6) if test.samples_ns else None
    meta = {
        "test": test.name,
        "phase": test.phase,
        "n_prompt": test.n_prompt,
        "n_gen": test.n_gen,
        "depth": test.depth,
        "concurrency": test.concurrency,
        "mean_tps": test.mean,
        "stdev_tps": test.stdev,
        "ranks": test.phase in ("prefill", "decode") and not test.depth and test.concurrency == 1,
        "note": _note(m, test),
        **(metadata or {}),
    }
    return ImportedTask(
        task_id=task_id,
        passed=True,
        latency_ms=latency,
        tokens_prompt=test.n_prompt,
        tokens_generated=test.n_gen,
        execution_ok=True,
        metadata={k: v for k, v in meta.items() if v is not None},
        samples=_samples([test]),
    )


def _samples(tests: list[Test]) -> list[SampleRecord]:
    """Trials: sample i of each test (a depth cell pairs its prefill and decode tests)."""
    out: dict[int, SampleRecord] = {}
    for test in tests:
        for i, value in enumerate(test.samples):
            sample = out.setdefault(i, SampleRecord(trial_index=i + 1))
            if test.phase == "prefill":
                sample.prefill_tps = value
                sample.tokens_prompt = test.n_prompt
                if len(test.ttft_ms) == len(test.samples):
                    sample.ttft_ms = test.ttft_ms[i]
            elif test.phase == "decode":
                sample.decode_tps = value
                sample.tokens_generated = test.n_gen
            else:
                sample.tokens_prompt, sample.tokens_generated = test.n_prompt, test.n_gen
            if len(test.samples_ns) == len(test.samples):
                sample.total_latency_ms = test.samples_ns[i] / 1e6
    return [out[i] for i in sorted(out)]


def _unique(task_id: str, seen: set[str]) -> str:
    candidate, n = task_id, 1
    while candidate in seen:
        n += 1
        candidate = f"{task_id} #{n}"
    seen.add(candidate)
    return candidate


def _is_headline(test: Test) -> bool:
    return test.depth == 0 and test.concurrency == 1 and test.phase != "context"


def _speed_suite(m: Measurement) -> ImportedSuite:
    seen: set[str] = set()
    tasks = [_task(m, t, _unique(t.name, seen)) for t in m.tests if _is_headline(t)]
    return ImportedSuite("speed", task_count=len(tasks), pass_count=len(tasks), tasks=tasks)


def _primary(tests: list[Test], phase: str) -> Test | None:
    """The test a figure comes from: the largest size of its phase (pp512 over pp64)."""
    size = "n_prompt" if phase == "prefill" else "n_gen"
    found = [t for t in tests if t.phase == phase]
    return max(found, key=lambda t: getattr(t, size)) if found else None


# A sweep cell: (its sweep spec, the cell as the payload's sweeps block holds it, its tests).
Cell = tuple[JsonObject, JsonObject, list[Test]]


def _cells(m: Measurement) -> tuple[list[Cell], list[Test]]:
    """(sweep spec, cell, its tests) for every depth and concurrency cell, and the tests in
    no cell (other sizes, depth with concurrency, context loads, pp+tg at depth)."""
    plain = [t for t in m.tests if t.phase in ("prefill", "decode")]
    pp = _primary(plain, "prefill")
    tg = _primary(plain, "decode")
    p = pp.n_prompt if pp else 0
    n = tg.n_gen if tg else 0

    def pick(depth: int, c: int) -> list[Test]:
        return [
            t
            for t in plain
            if t.depth == depth
            and t.concurrency == c
            and (t.n_prompt == p if t.phase == "prefill" else t.n_gen == n)
        ]

    cells: list[Cell] = []
    depths = sorted({t.depth for t in plain if t.concurrency == 1})
    if any(depths):
        for depth in depths:
            if chosen := pick(depth, 1):
                cells.append(_depth_cell(m, depth, p, n, chosen))
    streams = sorted({t.concurrency for t in plain if t.depth == 0})
    if any(c > 1 for c in streams):
        for c in streams:
            if chosen := pick(0, c):
                cells.append(_streams_cell(c, p, n, chosen))
    used = {id(t) for _spec, _cell, tests in cells for t in tests}
    rest = [t for t in m.tests if id(t) not in used and not _is_headline(t)]
    return cells, rest


def _depth_cell(m: Measurement, depth: int, p: int, n: int, tests: list[Test]) -> Cell:
    pp = next((t for t in tests if t.phase == "prefill"), None)
    tg = next((t for t in tests if t.phase == "decode"), None)
    cell: dict[str, Any] = {"depth": depth, "status": "measured"}
    counts = [len(t.samples) for t in tests if t.samples]
    if counts:
        cell["n"] = max(counts)
    if m.method == "llama-bench":
        cell["depth_tokens"] = depth  # llama-bench puts exactly d tokens in context
    if pp is not None:
        cell["prompt_tokens"] = pp.n_prompt
        cell["prefill_tps"] = _summary(pp.samples, pp.mean, pp.stdev)
        if pp.ttft_ms or pp.ttft_mean is not None:
            cell["ttft_ms"] = _summary(pp.ttft_ms, pp.ttft_mean, None, higher=False)
    if tg is not None:
        cell["decode_tps"] = _summary(tg.samples, tg.mean, tg.stdev)
    spec = {"kind": "depth", "depth": depth, "prompt_tokens": p, "output_tokens": n}
    return spec, {k: v for k, v in cell.items() if v is not None}, tests


def _streams_cell(c: int, p: int, n: int, tests: list[Test]) -> Cell:
    """A concurrency level: llama-benchy's total tg rate is decode tokens ÷ (last token − first
    first token), our aggregate_decode_tps; its per-request rates are per_stream_tps."""
    pp = next((t for t in tests if t.phase == "prefill"), None)
    tg = next((t for t in tests if t.phase == "decode"), None)
    cell: dict[str, Any] = {"streams": c, "status": "measured"}
    if tg is not None:
        total = sum(tg.samples) / len(tg.samples) if tg.samples else tg.mean
        cell["aggregate_decode_tps"] = round(total, 3) if total is not None else None
        cell["rounds"] = len(tg.samples) or None
        cell["requests"] = len(tg.per_request) or None
        cell["per_stream_tps"] = _summary(tg.per_request, tg.per_request_mean, None)
    if pp is not None and (pp.ttft_ms or pp.ttft_mean is not None):
        cell["ttft_ms"] = _summary(pp.ttft_ms, pp.ttft_mean, None, higher=False)
        if pp.ttft_ms:
            ttft = sorted(pp.ttft_ms)
            cell["ttft_p50_ms"] = round(percentile(ttft, 0.5), 3)
            tail = "p99" if len(ttft) >= 20 else "max"
            cell["ttft_tail_ms"] = round(percentile(ttft, 0.99) if tail == "p99" else ttft[-1], 3)
            cell["ttft_tail_label"] = tail
    spec = {"kind": "concurrency", "streams": c, "prompt_tokens": p, "output_tokens": n}
    return spec, {k: v for k, v in cell.items() if v is not None}, tests


def _sweep_suite(m: Measurement, cells: list[Cell], rest: list[Test]) -> ImportedSuite:
    seen: set[str] = set()
    tasks = []
    for spec, cell, tests in cells:
        level = spec.get("depth", spec.get("streams"))
        task = _task(m, tests[0], _unique(f"sweep-{spec['kind']}-{level}", seen))
        task.metadata = {
            "sweep": spec,
            "cell": cell,
            "tests": [t.name for t in tests],
            "note": f"{m.method} " + " and ".join(t.name for t in tests),
        }
        task.samples = _samples(tests)
        task.tokens_prompt = spec["prompt_tokens"]
        task.tokens_generated = spec["output_tokens"]
        task.latency_ms = None
        tasks.append(task)
    tasks += [_task(m, t, _unique(t.name, seen)) for t in rest]
    return ImportedSuite("speed_sweep", task_count=len(tasks), pass_count=len(tasks), tasks=tasks)


def _sweeps_block(m: Measurement, cells: list[Cell]) -> JsonObject:
    """The payload's `sweeps` block (worker.rules.contract.Sweeps), from the same cells."""
    depth = [(spec, cell) for spec, cell, _tests in cells if spec["kind"] == "depth"]
    streams = [(spec, cell) for spec, cell, _tests in cells if spec["kind"] == "concurrency"]
    block: dict[str, Any] = {}
    if depth:
        counts = [cell["n"] for _spec, cell in depth if cell.get("n")]
        block["depth"] = {
            "method": DEPTH_METHODS[m.method],
            "prompt_tokens": depth[0][0]["prompt_tokens"],
            "output_tokens": depth[0][0]["output_tokens"],
            "trials": max(counts) if counts else None,
            "server_context": None,
            "context_source": None,
            "cells": [cell for _spec, cell in depth],
        }
    if streams:
        block["concurrency"] = {
            "prompt_tokens": streams[0][0]["prompt_tokens"],
            "output_tokens": streams[0][0]["output_tokens"],
            "server_slots": None,
            "slots_source": None,
            "cells": [cell for _spec, cell in streams],
        }
    return block


def _headline(record: RunRecord, m: Measurement) -> None:
    """The run's speed: the largest depth-0, one-stream prefill and decode tests (TTFT only
    where the tool measured one: llama-benchy's end-to-end TTFT)."""
    tests = [t for t in m.tests if _is_headline(t)]
    pp, tg = _primary(tests, "prefill"), _primary(tests, "decode")
    figures = []
    if pp is not None:
        figures.append(("prefill_tps", _summary(pp.samples, pp.mean, pp.stdev)))
        figures.append(("ttft_ms", _summary(pp.ttft_ms, pp.ttft_mean, None, higher=False)))
    if tg is not None:
        figures.append(("decode_tps", _summary(tg.samples, tg.mean, tg.stdev)))
        record.speed_sample_count = len(tg.samples) or None
    for metric, summary in figures:
        for stat in ("median", "mean", "stdev", "p5", "p95", "peak"):
            if summary is not None:
                record.speed[f"{metric}_{stat}"] = summary.get(stat)


__all__ = ["KINDS", "NeedsHardware", "build_label", "detect_external", "parse_external"]
