"""`benchloop compare`'s text: the runs, the ratio B ÷ A with its interval, medians, scores."""

from __future__ import annotations

from rich.console import Console

from worker.cli.formatting import SCORE_LABELS, fmt_p, fmt_range, fmt_signed, fmt_unit, say, table
from worker.rules.stats import MIN_MEDIAN_N

# The unit of each compared metric (compare.METRICS); per-task rows are decode rates.
_UNITS = {"decode_tps": "tok/s", "prefill_tps": "tok/s", "ttft_ms": "ms"}
_TOO_FEW = f"n<{MIN_MEDIAN_N}"


def _fmt_median(side: dict, unit: str) -> str:
    if side["n"] == 0:
        return "–"
    return _TOO_FEW if side["median"] is None else fmt_unit(side["median"], unit)


def _verdict(row: dict) -> str:
    """Every compared metric is a speed, so the better run is the faster one."""
    if row["ratio"] is None:
        return "–"
    return f"{row['better'].upper()} faster" if row["significant"] and row["better"] else "unclear"


def _ratio(row: dict) -> tuple[str, str]:
    if row["ratio"] is None:
        return "–", "–"
    return fmt_unit(row["ratio"], "ratio") + "×", fmt_range(
        row["ratio_ci95_low"], row["ratio_ci95_high"], "ratio"
    )


def _runs(out: Console, result: dict) -> None:
    for side in ("a", "b"):
        info = result[side]
        engine = " ".join(str(v) for v in (info["engine"], info["engine_version"]) if v)
        stack = " · ".join(str(v) for v in (info["model"], engine, info["hardware_label"]) if v)
        say(out, str(info["run_id"]), style="bold", first=f"{side.upper()}  ", indent="    ")
        say(out, stack, indent="    ")
    if result["warnings"]:
        say(out, "Before you read the numbers:", style="yellow")
    for warning in result["warnings"]:
        say(out, warning, style="yellow", first="  - ", indent="    ")


def _differences(result: dict):
    shared = len(result["shared_tasks"])
    grid = table(f"Speed on the {shared} shared task{'s' if shared != 1 else ''}: B ÷ A")
    grid.add_column("metric", no_wrap=True)
    for header in ("A", "B", "B ÷ A", "95% CI", "p"):
        grid.add_column(header, justify="right", no_wrap=True)
    grid.add_column("verdict", no_wrap=True)
    rows = [(row["label"], row, _UNITS[row["metric"]]) for row in result["metrics"]]
    if result["tasks"]:
        rows.append(("decode tok/s by task:", None, ""))
        rows += [(f"  {row['task_id']}", row, "tok/s") for row in result["tasks"]]
    for label, row, unit in rows:
        if row is None:
            grid.add_row(label)
            continue
        ratio, interval = _ratio(row)
        grid.add_row(
            label,
            _fmt_median(row["a"], unit),
            _fmt_median(row["b"], unit),
            ratio,
            interval,
            fmt_p(row["p_value"]),
            _verdict(row),
        )
    return grid


def _grid_of_medians(result: dict):
    grid = table("Each run's median, its 95% CI and samples")
    grid.add_column("metric", no_wrap=True)
    grid.add_column("run", no_wrap=True)
    for header in ("median", "95% CI of the median", "n"):
        grid.add_column(header, justify="right", no_wrap=True)
    for row in result["metrics"]:
        unit = _UNITS[row["metric"]]
        for side in ("a", "b"):
            s = row[side]
            grid.add_row(
                row["label"] if side == "a" else "",
                side.upper(),
                _fmt_median(s, unit),
                fmt_range(s["ci95_low"], s["ci95_high"], unit),
                fmt_unit(s["n"], "n"),
            )
    return grid


def _scores(result: dict):
    grid = table("Scores (one per run)")
    grid.add_column("score", no_wrap=True)
    for header in ("A", "B", "B − A"):
        grid.add_column(header, justify="right", no_wrap=True)
    for row in result["scores"]:
        grid.add_row(
            SCORE_LABELS.get(row["metric"], row["metric"]),
            fmt_unit(row["a"], "score"),
            fmt_unit(row["b"], "score"),
            fmt_signed(row["delta"]),
        )
    return grid


def render_compare(out: Console, result: dict) -> None:
    """Print a compare_bundles() result so that it fits the console's width."""
    _runs(out, result)
    out.print()
    out.print(_differences(result))
    out.print()
    out.print(_grid_of_medians(result))
    out.print()
    out.print(_scores(result))
    out.print()
    too_few = any(
        side["n"] and side["median"] is None
        for row in result["metrics"] + result["tasks"]
        for side in (row["a"], row["b"])
    )
    if too_few:
        say(out, f"{_TOO_FEW}: too few samples for a median.", style="dim")
    say(
        out,
        "B ÷ A above 1: B is higher. Its 95% CI and p come from Welch's t-test on log values, "
        "per task, combined over the shared tasks; a verdict needs p < 0.05. "
        "Runs without quality suites have no quality, overall or value score.",
        style="dim",
    )
