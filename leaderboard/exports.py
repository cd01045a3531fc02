"""CSV, JSON and Markdown of a leaderboard view (its rows: leaderboard.rows.Row lanes), the
wording of feed entries (every feed is written by core.feeds.XmlSafeAtomFeed)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence
from typing import Literal, NotRequired, TypedDict

from leaderboard.filters import BoardFilters
from leaderboard.rows import Figure, Row
from leaderboard.scopes import Scope
from leaderboard.suite_columns import SUITE_COLUMNS
from runs.figures import runs_text
from runs.models import Run, ScoreScale, Stack

MIXED_WARNING = (
    "ALL HARDWARE: these rows pool runs from different machines. They are ranked by quality "
    "alone, which does not depend on the machine; speed and scores that include speed are "
    "given only per hardware class."
)


class ViewMeta(TypedDict):
    """What a view is about (view_meta): the head of an export and of the API's board."""

    hardware: str
    hardware_class: str | None
    mixes_hardware: bool
    ranked_within: str
    warning: str
    score_scale: str
    benchmark_version: str
    method: str | None
    speed: bool
    quality: bool
    suites: NotRequired[list[str]]
    too_many_runs: NotRequired[bool]  # set by the API where a run filter matched too many


# One export row: its columns depend on the view (speed, suites), its values are JSON's.
Record = dict[str, object]
Part = Literal["value", "low", "high", "n"]


def view_meta(filters: BoardFilters, scope: Scope, version: str) -> ViewMeta:
    """What a view is about, said once at the top of an export (and per row in the CSV)."""
    single = scope.single
    meta: ViewMeta = {
        "hardware": "all hardware (mixes machines)" if scope.pooled else scope.label,
        "hardware_class": single.slug if single else None,
        "mixes_hardware": scope.pooled,
        # Several classes: each is ranked among its own rows (a row's rank restarts per class).
        "ranked_within": "hardware class"
        if scope.grouped
        else ("view" if not scope.pooled else "all hardware, by quality"),
        "warning": MIXED_WARNING if scope.pooled else "",
        "score_scale": filters.scale,
        "benchmark_version": version,
        # Speeds of one method only (runs.methods): the method is part of every row's stack.
        "method": None if scope.pooled else (filters.method or filters.ranked_method or None),
        "speed": not scope.pooled,
        "quality": filters.scale != ScoreScale.SPEED_ONLY,
    }
    if filters.suites:
        # Per-suite columns asked for (?cols=, or the suite sorted by): quality suites only.
        meta["suites"] = list(filters.suites)
    return meta


def _part(figure: Figure | None, part: Part) -> int | float | None:
    if figure is None:
        return None
    if part == "value":
        return figure.value
    if part == "low":
        return figure.low
    if part == "high":
        return figure.high
    return figure.n


def _figure(name: str, part: Part) -> Callable[[Row], object]:
    return lambda r: _part(r.figures.get(name), part)


def _suite(suite: str, part: Part) -> Callable[[Row], object]:
    return lambda r: _part(r.suites.get(suite), part)


def _suite_n(suite: str) -> Callable[[Row], object]:
    return lambda r: _part(r.suites.get(suite), "n") or 0


def _stack(row: Row) -> Stack:
    # Every exported row has its stack: queries attaches them and drops rows whose stack is gone.
    assert row.stack is not None
    return row.stack


def _columns(view: ViewMeta) -> list[tuple[str, Callable[[Row], object]]]:
    """(header, value of a row); numbers stay numbers so spreadsheets can sort them. The
    all-hardware view has no speed column and no score that includes speed."""
    columns: list[tuple[str, Callable[[Row], object]]] = [
        ("model", lambda r: _stack(r).model_id),
        ("quantization", lambda r: _stack(r).quantization),
        ("engine", lambda r: _stack(r).engine),
        ("backend", lambda r: (_stack(r).launch_settings or {}).get("backend", "")),
        ("method", lambda r: _stack(r).method),
        ("harness", lambda r: _stack(r).harness),
        ("draft_model", lambda r: _stack(r).draft_model),
        ("context_length", lambda r: _stack(r).context_length),
    ]
    if view["mixes_hardware"]:
        columns.append(("hardware", lambda r: view["hardware"]))
        columns.append(("warning", lambda r: view["warning"]))
    else:
        columns += [
            ("hardware", lambda r: r.hardware_class.label if r.hardware_class else ""),
            ("hardware_class", lambda r: r.hardware_class.slug if r.hardware_class else ""),
        ]
    columns += [
        ("score_scale", lambda r: view["score_scale"]),
        ("benchmark_version", lambda r: view["benchmark_version"]),
    ]
    figures = []
    if view["speed"] and view["quality"]:
        figures.append("overall")
        # Evidence, not the rank: the best run's own overall score.
        columns.append(("overall_best_run", lambda r: r.best_overall))
    if view["quality"]:
        figures.append("quality")
    if view["speed"]:
        figures += ["decode_tps", "prefill_tps", "ttft_ms"]
    lane_name = {"decode_tps": "decode", "prefill_tps": "prefill", "ttft_ms": "ttft"}
    for name in figures:
        key = lane_name.get(name, name)
        columns += [
            (name, _figure(key, "value")),
            (f"{name}_ci95_low", _figure(key, "low")),
            (f"{name}_ci95_high", _figure(key, "high")),
        ]
    for suite in view.get("suites", []):
        columns += [
            (f"suite_{suite}", _suite(suite, "value")),
            (f"suite_{suite}_ci95_low", _suite(suite, "low")),
            (f"suite_{suite}_ci95_high", _suite(suite, "high")),
            # A suite's n: the row's runs that have it (it may be fewer than n_runs).
            (f"suite_{suite}_n", _suite_n(suite)),
        ]
    columns += [
        ("n_runs", lambda r: r.runs),
        # One or two runs: a median with no interval, ranked after the rows of three or more.
        ("few_runs", lambda r: r.few_runs),
        ("submitters", lambda r: r.submitters),
        ("attempts", lambda r: r.best_of),
        ("verified_best_run", lambda r: bool(r.best_run and r.best_run.is_verified)),
    ]
    return columns


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _rounded(value: object) -> object:
    return round(value, 3) if isinstance(value, float) else value


def records(rows: Sequence[Row], *, base_url: str, view: ViewMeta) -> list[Record]:
    """One plain dict per row, ranked, with links back to the site."""
    columns = _columns(view)
    out = []
    for rank, row in enumerate(rows, start=1):
        # A view of several classes ranks each class apart (rows grouped by class).
        record: Record = {"rank": row.rank or rank}
        record.update({name: _rounded(get(row)) for name, get in columns})
        record["stack_url"] = f"{base_url}/stacks/{row.stack_id}/"
        record["best_run_url"] = f"{base_url}/runs/{row.best_run_id}/" if row.best_run_id else ""
        out.append(record)
    return out


def run_hardware(run: Run) -> str:
    """The hardware a single run is named by: its class, else its machine, else remote."""
    if run.hardware_class is not None:
        return run.hardware_class.label
    return run.hardware.label if run.hardware else "a remote endpoint"


def feed_summary(run: Run, *, pooled: bool) -> str:
    """One run's figures for a feed entry; quality alone where the view mixes hardware."""
    if run.score_scale == ScoreScale.SPEED_ONLY:
        scores = "speed only"
    elif pooled:
        scores = f"quality {run.quality_score:.1f}" if run.quality_score is not None else ""
    elif run.overall_score is not None and run.quality_score is not None:
        scores = f"overall {run.overall_score:.1f}, quality {run.quality_score:.1f}"
    else:
        scores = ""
    parts = [scores] if scores else []
    if not pooled:
        speed = f"{run.decode_tps:.1f} tok/s decode" if run.decode_tps else "no speed data"
        parts.append(f"{speed} on {run_hardware(run)}")
    parts.append(run.get_score_scale_display())
    return "; ".join(parts) + "."


def safe_cell(value: object) -> object:
    """Neutralise spreadsheet formulas: text starting with = + - @ tab or CR gets a quote."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def to_csv(rows: list[Record]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\r\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: safe_cell(value) for key, value in row.items()})
    return buffer.getvalue()


def to_json(rows: list[Record], *, query: str, view: ViewMeta) -> str:
    return json.dumps({"query": query, "view": view, "count": len(rows), "rows": rows}, indent=1)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")
# (record key, header); keys a view's records lack (speed on all hardware) are left out.
MARKDOWN_COLUMNS = [
    ("rank", "#"),
    ("model", "Model"),
    ("quantization", "Quant"),
    ("engine", "Engine"),
    ("method", "Measured by"),
    ("hardware", "Hardware"),
    ("overall", "Overall"),
    ("quality", "Quality"),
    ("decode_tps", "Decode tok/s"),
    ("ttft_ms", "TTFT ms"),
    ("n_runs", "Runs"),
]


def markdown_text(value: object) -> str:
    """A table cell that renders as the literal text: markup and HTML are backslash-escaped."""
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        return f"{value:.1f}"
    text = " ".join(str(value).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")


def _with_interval(row: Record, key: str) -> str:
    text = markdown_text(row.get(key))
    low, high = row.get(f"{key}_ci95_low"), row.get(f"{key}_ci95_high")
    if low is not None and high is not None:
        return f"{text} ({markdown_text(low)}–{markdown_text(high)})"
    n, runs = row.get(f"{key}_n"), row.get("n_runs")  # counts, as records() writes them
    if isinstance(n, int) and row.get(key) is not None:
        return f"{text} ({runs_text(n)})"  # a suite figure of one or two runs
    few = f"{key}_ci95_low" in row and row.get(key) is not None and row.get("few_runs")
    if few and isinstance(runs, int):
        return f"{text} ({runs_text(runs)})"
    return text


def to_markdown(rows: list[Record], *, title: str, view: ViewMeta) -> str:
    lines = [f"# {markdown_text(title)}", ""]
    if view["warning"]:
        lines += [f"> **{markdown_text(view['warning'])}**", ""]
    lines += [
        f"Score scale {markdown_text(view['score_scale'])}, benchmark version "
        f"{markdown_text(view['benchmark_version'])}. Figures are medians with their 95% "
        "interval in brackets; a row of one or two runs shows its median with its run count "
        "and ranks after the rows of three or more.",
        "",
    ]
    keys = {key for row in rows for key in row} if rows else set()
    if not rows:
        keys = {"rank", "model", "quantization", "engine", "hardware", "n_runs"}
    suites = [(f"suite_{s}", SUITE_COLUMNS[s][0]) for s in view.get("suites", [])]
    columns = [(key, label) for key, label in MARKDOWN_COLUMNS + suites if key in keys]
    lines.append("| " + " | ".join(label for _, label in columns) + " |")
    lines.append("|" + "|".join("---:" if key != "model" else "---" for key, _ in columns) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_with_interval(row, key) for key, _ in columns) + " |")
    return "\n".join(lines) + "\n"
