"""llama-benchy's output (its JSON, CSV and Markdown) read into measurements.

llama-benchy (pypi `llama-benchy`) times an OpenAI-compatible server over HTTP: for each prompt
size, response size, depth and concurrency it reports prefill (`pp`) and decode (`tg`) rates,
each as `{mean, std, values}` in its JSON and as `mean ± std` in its CSV and Markdown, whose
test names carry the cell: `pp2048 @ d4096 (c2)`. With `--enable-prefix-caching` a depth cell
has its context-load phase too (`ctx_pp @ d4096`, `ctx_tg @ d4096`). It names no machine and no
engine: the hardware comes from whoever submits the file. Django-free.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from runs import bounds
from runs.importers.llamacpp import (
    Measurement,
    Test,
    csv_table,
    find_tables,
    model_basename,
    table_cells,
)
from runs.importers.records import FormatError, JsonObject, Node, load_json

_NAME = re.compile(
    r"^(?:(?P<ctx>ctx_pp|ctx_tg)|pp(?P<pp>\d+)|tg(?P<tg>\d+))"
    r"(?: @ d(?P<depth>\d+))?(?: \(c(?P<c>\d+)\))?$"
)
_RATE = re.compile(r"^(?P<mean>[-0-9.]+(?:e[-+]?\d+)?)\s*±\s*(?P<std>[-0-9.]+(?:e[-+]?\d+)?)$")
# The Markdown columns and CSV column stems, by what they hold.
_MD_COLUMNS = {
    "t/s": "t_s",
    "t/s (total)": "t_s",
    "t/s (req)": "t_s_req",
    "peak t/s": "peak_ts",
    "peak t/s (req)": "peak_ts_req",
    "ttfr (ms)": "ttfr",
    "est_ppt (ms)": "est_ppt",
    "e2e_ttft (ms)": "e2e_ttft",
}
MAX_BENCHMARKS = 5000
MAX_VALUES = 100_000


def read_measurements(text: str, kind: str) -> list[Measurement]:
    """The one measurement in a llama-benchy file of the given kind (external.detect_external);
    one per model where a CSV or Markdown file holds several."""
    if kind == "llama-benchy-json":
        return [_from_json(text)]
    rows = _csv_rows(text) if kind == "llama-benchy-csv" else _md_rows(text)
    if not rows:
        raise FormatError("", "the file holds no llama-benchy results")
    by_model: dict[str, Measurement] = {}
    for where, cells in rows:
        model = cells.get("model", "")
        if model not in by_model:
            by_model[model] = _measurement(kind, model, {})
        by_model[model].tests.append(_text_test(cells, where))
        by_model[model].rows.append(cells)
    return list(by_model.values())


def _measurement(kind: str, model: str, source: JsonObject) -> Measurement:
    name = public_model_name(model)
    if not name:
        raise FormatError("model", "is missing: llama-benchy names the model it measured")
    return Measurement(
        method="llama-benchy",
        kind=kind,
        model_name=name,
        engine="openai-compatible",
        source={"tool": "llama-benchy", "format": kind.removeprefix("llama-benchy-"), **source},
        key=name,
    )


def public_model_name(model: str) -> str:
    """A served model's name; a local path (`--model /home/alice/m.gguf`) becomes its file."""
    text = model.strip()
    if text.startswith(("/", "~", ".", "\\")) or re.match(r"^[A-Za-z]:[\\/]", text):
        return model_basename(text)
    return text


# ------------------------------------------------------------------------------------ JSON


def _from_json(text: str) -> Measurement:
    document = Node(load_json(text, position="line {line} column {column}"))
    document.obj()
    meta = {
        name: document.get(name, required=False).value
        for name in ("version", "latency_mode", "latency_ms", "prefix_caching_enabled")
    }
    meta["max_concurrency"] = document.get("max_concurrency", required=False).int(minimum=1)
    stamp = document.get("timestamp", required=False)
    at = _moment(stamp) if stamp.value is not None else None
    out = _measurement("llama-benchy-json", document.get("model").str(), meta)
    benchmarks = document.get("benchmarks").list()
    if not benchmarks:
        raise document.get("benchmarks").fail("holds no results")
    if len(benchmarks) > MAX_BENCHMARKS:
        raise document.get("benchmarks").fail(f"more than {MAX_BENCHMARKS} results")
    # Its own test names carry "(cK)" when any level of the file was above one stream.
    widest = meta["max_concurrency"] or max(
        e.get("concurrency", required=False).int(minimum=1) or 1 for e in benchmarks
    )
    for entry in benchmarks:
        out.tests += _json_tests(entry, at, named_streams=widest > 1)
        out.rows.append(entry.obj())
    if not out.tests:
        raise document.get("benchmarks").fail("no result has a rate")
    return out


def _json_tests(entry: Node, at: datetime | None, *, named_streams: bool) -> list[Test]:
    c, depth, pp, tg = (
        _count(entry.get(name), minimum)
        for name, minimum in (
            ("concurrency", 1),
            ("context_size", 0),
            ("prompt_size", 0),
            ("response_size", 0),
        )
    )
    context = bool(entry.get("is_context_prefill_phase", required=False).bool())
    suffix = (f" @ d{depth}" if depth or context else "") + (f" (c{c})" if named_streams else "")
    tests = []
    for metric, phase, name in (("pp", "prefill", f"pp{pp}"), ("tg", "decode", f"tg{tg}")):
        total = _metric(entry.get(f"{metric}_throughput", required=False))
        if total is None:
            continue
        per_request = _metric(entry.get(f"{metric}_req_throughput", required=False))
        ttft = _metric(entry.get("e2e_ttft", required=False)) if metric == "pp" else None
        test = Test(
            name=(f"ctx_{metric}" if context else name) + suffix,
            phase="context" if context else phase,
            n_prompt=(depth if context else pp) if metric == "pp" else 0,
            n_gen=tg if metric == "tg" else 0,
            depth=depth,
            concurrency=c,
            mean=total[0],
            stdev=total[1],
            samples=total[2],
            at=at,
            where=entry.path,
        )
        if per_request is not None:
            test.per_request_mean, test.per_request = per_request[0], per_request[2]
        if ttft is not None:
            test.ttft_mean, test.ttft_ms = ttft[0], ttft[2]
        tests.append(test)
    return tests


def _count(node: Node, minimum: int) -> int:
    return node.int(optional=False, minimum=minimum)


def _metric(node: Node) -> tuple[float, float | None, list[float]] | None:
    """(mean, std, values) of a `{mean, std, values}` metric; None when it is null."""
    if node.value is None:
        return None
    mean = node.get("mean").num(optional=False, minimum=0)
    std = node.get("std", required=False).num(minimum=0)
    values_node = node.get("values", required=False)
    values: list[float] = []
    if values_node.value is not None:
        items = values_node.list()
        if len(items) > MAX_VALUES:
            raise values_node.fail(f"more than {MAX_VALUES} values")
        values = [item.num(optional=False, minimum=0) for item in items]
    return mean, std, values


def _moment(node: Node) -> datetime:
    text = node.str()
    try:
        # llama-benchy writes "2026-01-02 03:04:05Z".
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise node.fail(f"not a timestamp: {text[:40]!r}") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if problem := bounds.moment_problem(moment):
        raise node.fail(problem)
    return moment


# ------------------------------------------------------------------------ CSV and Markdown


def _csv_rows(text: str) -> list[tuple[str, dict[str, str]]]:
    def check(header: list[str]) -> None:
        for required in ("model", "test_name", "t_s_mean"):
            if required not in header:
                raise FormatError("line 1", f"column {required!r} is missing: not llama-benchy CSV")

    return csv_table(text, check)


def _md_rows(text: str) -> list[tuple[str, dict[str, str]]]:
    """Rows of llama-benchy's Markdown table, each cell split into the CSV's _mean and _std."""
    lines = text.splitlines()
    tables = [(i, c) for i, c in find_tables(text) if "test" in c and "model" in c]
    if not tables:
        raise FormatError("", "no llama-benchy table: expected columns 'model' and 'test'")
    rows = []
    for index, columns in tables:
        number = index + 2
        while number < len(lines) and lines[number].strip().startswith("|"):
            where = f"line {number + 1}"
            cells = table_cells(lines[number])
            if len(cells) != len(columns):
                raise FormatError(where, f"{len(cells)} cells for {len(columns)} columns")
            row = {"model": "", "test_name": ""}
            for column, value in zip(columns, cells, strict=True):
                if column in ("model", "test"):
                    row["model" if column == "model" else "test_name"] = value
                elif column in _MD_COLUMNS and value:
                    match = _RATE.match(value)
                    if not match:
                        raise FormatError(
                            f"{where}: column {column}", f"expected 'mean ± std', got {value!r}"
                        )
                    row[f"{_MD_COLUMNS[column]}_mean"] = match["mean"]
                    row[f"{_MD_COLUMNS[column]}_std"] = match["std"]
                else:
                    row[column] = value
            rows.append((where, row))
            number += 1
    return rows


def _text_test(cells: dict[str, str], where: str) -> Test:
    name = cells.get("test_name", "").strip()
    match = _NAME.match(name)
    if not match:
        raise FormatError(f"{where}: test", f"unrecognised llama-benchy test {name[:40]!r}")
    depth, c = int(match["depth"] or 0), int(match["c"] or 1)
    context = match["ctx"]
    prefill = match["pp"] is not None or context == "ctx_pp"
    mean = _number(cells, "t_s_mean", where)
    if mean is None:
        raise FormatError(f"{where}: t_s_mean", "is missing (the result has no rate)")
    test = Test(
        name=name,
        phase="context" if context else "prefill" if prefill else "decode",
        n_prompt=(depth if context else int(match["pp"])) if prefill else 0,
        n_gen=int(match["tg"]) if match["tg"] else 0,
        depth=depth,
        concurrency=c,
        mean=mean,
        stdev=_number(cells, "t_s_std", where),
        per_request_mean=_number(cells, "t_s_req_mean", where),
        ttft_mean=_number(cells, "e2e_ttft_mean", where) if prefill else None,
        where=where,
    )
    return test


def _number(cells: dict[str, Any], name: str, where: str) -> float | None:
    text = str(cells.get(name) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise FormatError(f"{where}: {name}", f"expected a number, got {text[:40]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise FormatError(f"{where}: {name}", f"expected a number ≥ 0, got {text[:40]!r}")
    return value


__all__ = ["public_model_name", "read_measurements"]
