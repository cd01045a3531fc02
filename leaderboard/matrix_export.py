"""The harness matrix as data: the JSON the API returns and the CSV the page links."""

from __future__ import annotations

import csv
import io
from typing import Any

from leaderboard.exports import safe_cell
from leaderboard.matrix import Cell, HarnessRow, Matrix
from leaderboard.stats import Proportion

CSV_COLUMNS = [
    "model_id",
    "hardware_class",
    "quantization",
    "engine",
    "harness",
    "harness_kind",
    "harness_variant",
    "harness_versions",
    "suite",
    "runs",
    "tasks",
    "passed",
    "pass_rate",
    "ci95_low",
    "ci95_high",
    "prompt_tokens_per_task",
    "tokens_vs_raw",
    "requests_per_task",
    "requests_vs_raw",
    "wall_ms_median",
    "model_ms_median",
    "harness_ms_median",
    "peak_context",
    "format_failures",
    "wrong",
    "sandbox",
    "other_failures",
]


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def score_dict(score: Proportion | None) -> dict[str, Any] | None:
    if score is None:
        return None
    return {
        "passed": score.passed,
        "n": score.n,
        "pass_rate": _round(score.rate),
        "ci95_low": _round(score.low),
        "ci95_high": _round(score.high),
    }


def cell_dict(cell: Cell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    o = cell.overhead
    return {
        "suite": cell.suite,
        "runs": cell.runs,
        "score": score_dict(cell.score),
        "overhead": {
            "tasks": o.tasks,
            "prompt_tokens_per_task": _round(o.prompt_tokens, 1),
            "completion_tokens_per_task": _round(o.completion_tokens, 1),
            "requests_per_task": _round(o.requests),
            "wall_ms_median": _round(o.wall_ms, 1),
            "model_ms_median": _round(o.model_ms, 1),
            "harness_ms_median": _round(o.harness_ms, 1),
            "peak_context": o.peak_context,
            "tokens_vs_raw": _round(o.tokens_ratio, 3),
            "requests_vs_raw": _round(o.requests_ratio, 3),
            "wall_vs_raw": _round(o.wall_ratio, 3),
        },
        "failures": {
            "format": cell.format_failures,
            "wrong": cell.wrong,
            "sandbox": cell.sandbox,
            "other": cell.other_failures,
        },
    }


def _row_dict(row: HarnessRow, suites: list[str]) -> dict[str, Any]:
    return {
        "harness": row.harness,
        "kind": row.kind,
        "runs": row.runs,
        "versions": row.versions,
        "variant": row.variant,
        "cells": {suite: cell_dict(c) for suite, c in zip(suites, row.cells, strict=True)},
        "all_suites": cell_dict(row.overall),
    }


def as_dict(matrix: Matrix) -> dict[str, Any]:
    suites = [name for name, _label in matrix.suites]
    v = matrix.verdict
    return {
        "model_id": matrix.model_id,
        "hardware_class": {
            "slug": matrix.hardware_class.slug,
            "label": matrix.hardware_class.label,
        },
        "setup": {"quantization": matrix.setup.quantization, "engine": matrix.setup.engine},
        "other_setups": [
            {"quantization": s.quantization, "engine": s.engine, "runs": s.runs}
            for s in matrix.setups
            if s != matrix.setup
        ],
        "suites": suites,
        "runs": matrix.runs,
        "baseline": matrix.baseline.harness if matrix.baseline else None,
        "rows": [_row_dict(row, suites) for row in matrix.rows],
        "best_harness": {
            "harness": v.best.harness if v.best else None,
            "variant": v.best.variant if v.best else None,
            "runner_up": v.runner_up.label if v.runner_up else None,
            # False when the runner-up's interval overlaps the best's: no clear winner.
            "clear": v.clear,
            "not_compared": v.left_out,
        },
    }


def csv_text(matrix: Matrix) -> str:
    """One line per harness and suite (and per harness over all suites, as suite "all")."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for row in matrix.rows:
        for found in [*row.cells, row.overall]:
            if found is None:
                continue
            s, o = found.score, found.overhead
            values = [
                matrix.model_id,
                matrix.hardware_class.slug,
                matrix.setup.quantization,
                matrix.setup.engine,
                row.harness,
                row.kind,
                row.variant,
                " ".join(row.versions),
                found.suite,
                found.runs,
                s.n if s else 0,
                s.passed if s else 0,
                _round(s.rate) if s else "",
                _round(s.low) if s else "",
                _round(s.high) if s else "",
                _round(o.prompt_tokens, 1),
                _round(o.tokens_ratio, 3),
                _round(o.requests),
                _round(o.requests_ratio, 3),
                _round(o.wall_ms, 1),
                _round(o.model_ms, 1),
                _round(o.harness_ms, 1),
                o.peak_context,
                found.format_failures,
                found.wrong,
                found.sandbox,
                found.other_failures,
            ]
            # Stored names are untrusted: no cell may start a spreadsheet formula.
            writer.writerow([safe_cell(v) for v in values])
    return out.getvalue()
