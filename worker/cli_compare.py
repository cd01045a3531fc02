"""`benchloop compare`'s table: every figure with its n and 95% interval, the ratio with its own."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def fmt(value: object, digits: int = 1) -> str:
    """A figure as the CLI prints it: "–" when missing, floats with thousands separators."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def summary_cell(s: dict) -> str:
    """'median [low–high] n=N', or 'n too small' where a median needs more values."""
    if s["n"] == 0:
        return "–"
    if s["median"] is None:
        return f"n too small (n={s['n']})"
    ci = ""
    if s.get("ci95_low") is not None:
        ci = f" [{fmt(s['ci95_low'])}–{fmt(s['ci95_high'])}]"
        coverage = s.get("ci95_coverage")
        if coverage is not None and coverage < 0.95:
            ci += f" ({coverage:.0%})"
    return f"{fmt(s['median'])}{ci} n={s['n']}"


def ratio_cell(row: dict) -> str:
    """'1.23× [1.18–1.29]' for B ÷ A, the interval from the log-scale Welch test."""
    if row["ratio"] is None:
        return "–"
    text = f"{row['ratio']:.3f}×"
    if row["ratio_ci95_low"] is not None:
        text += f" [{row['ratio_ci95_low']:.3f}–{row['ratio_ci95_high']:.3f}]"
    return text


def render_compare(out: Console, result: dict) -> None:
    for side in ("a", "b"):
        info = result[side]
        out.print(
            escape(
                f"{side.upper()}: {info['run_id']} ({info['model']}, {info['hardware_label']}, "
                f"{info['engine']} {info['engine_version'] or ''})".replace(" )", ")")
            ),
            soft_wrap=True,
        )
    for warning in result["warnings"]:
        out.print(f"[yellow]{escape(warning)}[/]", soft_wrap=True)
    shared = len(result["shared_tasks"])
    table = Table(title=f"Speed on the {shared} shared task(s): median [95% CI of median], n")
    for col in ("metric", "A", "B", "B/A [95% CI]", "Δ median", "p", "significant"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in result["metrics"] + result["tasks"]:
        verdict = ("yes, " + row["better"].upper() + " better") if row["significant"] else "no"
        table.add_row(
            row["label"],
            summary_cell(row["a"]),
            summary_cell(row["b"]),
            ratio_cell(row),
            fmt(row["delta"]),
            fmt(row["p_value"], 4),
            verdict,
        )
    out.print(table)
    scores = Table(title="Scores (one figure per run; speed-only runs have no quality)")
    for col in ("score", "A", "B", "Δ"):
        scores.add_column(col, justify="left" if col == "score" else "right")
    for row in result["scores"]:
        scores.add_row(row["metric"], fmt(row["a"], 2), fmt(row["b"], 2), fmt(row["delta"], 2))
    out.print(scores)
    out.print(f"[dim]Significance: {escape(result['method'])}.[/]", soft_wrap=True)
