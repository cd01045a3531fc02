"""`benchloop run`'s text: the line before the run and the summary after it, at any width."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from worker.cli.formatting import (
    SCORE_KEYS,
    SCORE_LABELS,
    bundle_versions,
    fmt_unit,
    say,
    table,
    versions,
    whole_path,
)
from worker.engine.adaptive import speed_rule
from worker.engine.parallel import workers_for
from worker.rules.comparability import task_state
from worker.rules.reasoning import BUDGET_SOURCES, reasoning_summary
from worker.rules.scoring import SPEED_SUITES
from worker.rules.stats import summary_median
from worker.rules.sweeps import cell_status

# The run summary's columns: (key in speed_summary, header, unit).
_SUMMARY_COLUMNS = (
    ("decode_tps", "decode\ntok/s", "tok/s"),
    ("prefill_tps", "prefill\ntok/s", "tok/s"),
    ("ttft_ms", "TTFT\nms", "ms"),
    ("server_decode_tps", "server decode\ntok/s", "tok/s"),
)
# Its rows after "trials" (the n of each): (key in each summary, label).
_SUMMARY_ROWS = (
    ("median", "median"),
    ("ci95_low", "  95% CI, low"),
    ("ci95_high", "  95% CI, high"),
    ("mean", "mean"),
    ("stdev", "stdev"),
    ("p95", "95th percentile"),
    ("peak", "best trial"),
)


def print_header(out: Console, prep) -> None:
    """What is about to run: versions, server, model, scoring, profile and trials."""
    info, config = prep.info, prep.config
    task_count = sum(len(tasks) for tasks in prep.tasks.values())
    scoring = "local" if prep.locality.scoring_local else "remote"
    say(out, f"benchloop {versions()}", style="bold")
    build = info.engine.get("version") or "(build not reported by the server)"
    say(
        out,
        f"{info.kind} {build} · model {prep.model} · {scoring} scoring ({prep.locality.reason})",
        indent="  ",
    )
    rule = speed_rule(config.trials)
    each = (
        f"{config.trials} trials"
        if config.trials
        else f"{rule['floor']}–{rule['ceiling']} trials (until narrow enough)"
    )
    measured = SPEED_SUITES & {n for n, t in prep.tasks.items() if t}
    trials = f" · {each} per speed task" if measured else ""
    harness = f" · harness {config.harness}" if config.harness != "raw" else ""
    variant = f" ({config.harness_variant})" if config.harness_variant else ""
    chosen = f"profile {prep.profile_name}"
    if prep.benchmark_profile == "custom":
        # --suites without a profile's set: no profile's tasks to be measured against.
        chosen = f"suites {','.join(prep.tasks)} (a custom selection)"
    at_once = max(
        (workers_for(s, prep.parallel) for s in prep.suites if prep.tasks.get(s.name)), default=1
    )
    parallel = f" · {at_once} quality tasks at a time" if at_once > 1 else ""
    say(out, f"{chosen} · {task_count} tasks{trials}{harness}{variant}{parallel}", indent="  ")


def _speed_tasks(bundle: Mapping[str, Any]) -> Table | None:
    speed = bundle["suites"].get("speed")
    if not speed:
        return None
    trials = bundle.get("settings", {}).get("trials")
    each = f"median of {trials} trials each" if trials else "medians over trials"
    grid = table(f"Speed tasks ({each})")
    grid.add_column("task", no_wrap=True)
    headers = ("prompt\ntokens", "output\ntokens", "TTFT\nms", "prefill\ntok/s", "decode\ntok/s")
    for header in (*headers, "server\ntok/s", "score"):
        grid.add_column(header, justify="right", no_wrap=True)
    for task in speed["tasks"]:
        metrics = task["metadata"].get("speed_metrics", {})
        server = (task["metadata"].get("summary") or {}).get("server_decode_tps") or {}
        grid.add_row(
            task["task_id"],
            fmt_unit(task["tokens_prompt"], "tokens"),
            fmt_unit(task["tokens_generated"], "tokens"),
            fmt_unit(metrics.get("ttft_ms"), "ms"),
            fmt_unit(metrics.get("prompt_eval_tok_per_sec"), "tok/s"),
            fmt_unit(metrics.get("generation_tok_per_sec"), "tok/s"),
            fmt_unit(server.get("median"), "tok/s"),
            "error" if task["error"] else fmt_unit(task["score"], "score"),
        )
    return grid


def _quality_suites(bundle: Mapping[str, Any]) -> Table | None:
    suites = {n: s for n, s in bundle["suites"].items() if n not in ("speed", "speed_sweep")}
    if not suites:
        return None
    grid = table("Quality suites")
    grid.add_column("suite", no_wrap=True)
    for header in ("tasks passed", "score"):
        grid.add_column(header, justify="right", no_wrap=True)
    for name, suite in suites.items():
        passed = f"{suite.get('pass_count', 0)} of {suite.get('task_count', 0)}"
        grid.add_row(name, passed, fmt_unit(suite.get("score"), "score"))
    return grid


def _depth_table(block: Mapping[str, Any]) -> Table:
    each = f"medians of {block.get('trials')} trials, {block['prompt_tokens']} new tokens"
    grid = table(f"Speed at depth ({each})")
    if block.get("server_context"):
        # Where the context came from (the server's, or Ollama's num_ctx for the model's own).
        source = block.get("context_source") or "source not recorded"
        context = fmt_unit(block["server_context"], "tokens")
        # Text, not markup: a source is a string from the bundle.
        grid.caption = Text(f"depth cells ran in a context of {context} tokens ({source})")
        grid.caption_justify = "left"
    grid.add_column("depth", justify="right", no_wrap=True)
    for header in ("cached\ntokens", "prefill\ntok/s", "decode\ntok/s", "TTFT\nms"):
        grid.add_column(header, justify="right", no_wrap=True)
    for cell in block["cells"]:
        if cell["status"] != "measured":
            grid.add_row(fmt_unit(cell["depth"], "tokens"), cell["status"], cell.get("reason", ""))
            continue
        grid.add_row(
            fmt_unit(cell["depth"], "tokens"),
            fmt_unit(cell.get("depth_tokens"), "tokens")
            + ("" if cell.get("cache_held") is not False else " (not held)"),
            fmt_unit(summary_median(cell.get("prefill_tps")), "tok/s"),
            fmt_unit(summary_median(cell.get("decode_tps")), "tok/s"),
            fmt_unit(summary_median(cell.get("ttft_ms")), "ms"),
        )
    return grid


def _concurrency_table(block: Mapping[str, Any]) -> Table:
    slots = block.get("server_slots")
    grid = table(f"Concurrent streams (server slots: {slots if slots else 'not reported'})")
    grid.add_column("streams", justify="right", no_wrap=True)
    headers = ("requests", "aggregate\ntok/s", "per stream\ntok/s", "TTFT p50\nms", "TTFT\ntail ms")
    for header in headers:
        grid.add_column(header, justify="right", no_wrap=True)
    for cell in block["cells"]:
        if cell["status"] != "measured":
            grid.add_row(str(cell["streams"]), cell["status"], cell.get("reason", ""))
            continue
        grid.add_row(
            str(cell["streams"]),
            fmt_unit(cell.get("requests"), "n"),
            fmt_unit(cell.get("aggregate_tps"), "tok/s"),
            fmt_unit(summary_median(cell.get("per_stream_tps")), "tok/s"),
            fmt_unit(cell.get("ttft_p50_ms"), "ms"),
            f"{fmt_unit(cell.get('ttft_tail_ms'), 'ms')} ({cell.get('ttft_tail_label')})",
        )
    return grid


def _sweeps(bundle: Mapping[str, Any]) -> list[Table]:
    sweeps = bundle.get("sweeps") or {}
    out = []
    if sweeps.get("depth"):
        out.append(_depth_table(sweeps["depth"]))
    if sweeps.get("concurrency"):
        out.append(_concurrency_table(sweeps["concurrency"]))
    return out


def _speed_summary(bundle: Mapping[str, Any]) -> Table:
    summary = bundle["speed_summary"]
    n = summary["decode_tps"]["n"]
    grid = table(f"Run summary (all {n} measured trials)")
    grid.add_column("", no_wrap=True)
    for _, header, _ in _SUMMARY_COLUMNS:
        grid.add_column(header, justify="right", no_wrap=True)
    grid.add_row("trials", *(fmt_unit(summary[k]["n"], "n") for k, _, _ in _SUMMARY_COLUMNS))
    for row, label in _SUMMARY_ROWS:
        cells = []
        for key, _, unit in _SUMMARY_COLUMNS:
            s = summary[key]
            small = row in ("median", "ci95_low", "ci95_high") and s["n"] and s[row] is None
            cells.append("n too small" if small else fmt_unit(s[row], unit))
        grid.add_row(label, *cells)
    return grid


def _scores(bundle: Mapping[str, Any]) -> Table:
    grid = table(f"Scores ({bundle['scoring_mode']} curve)")
    for key in SCORE_KEYS:
        grid.add_column(SCORE_LABELS[key], justify="right", no_wrap=True)
    grid.add_row(*(fmt_unit(score_or_none(bundle, key), "score") for key in SCORE_KEYS))
    return grid


def score_or_none(bundle: Mapping[str, Any], key: str) -> object:
    """A score, or None ("–") where nothing was scored: a run without the speed suite (the
    sweeps alone are measured, not scored) has none; bundles written before issue 32 stored
    speed 0.0 there, which is no score at all."""
    if key == "speed_score" and "speed" not in (bundle.get("suites") or {}):
        return None
    return bundle.get(key)


def reasoning_lines(bundle: Mapping[str, Any]) -> list[str]:
    """The run's thinking budget, reasoning/answer token split and time to the first answer
    token next to TTFT (quality tasks), when the run saw any reasoning or set a budget."""
    summary = reasoning_summary(dict(bundle))
    if summary is None:
        return []
    source = BUDGET_SOURCES.get(summary["budget_source"], "none set")
    lines = [f"thinking budget: {summary['budget']} tokens per task ({source})"]
    tasks = summary["tasks"]
    counted = f"{tasks} quality task" + ("" if tasks == 1 else "s")
    if summary["reasoning_tokens"]:
        lines.append(
            f"reasoning: {summary['reasoning_tokens']} tokens, answers: "
            f"{summary['answer_tokens']} tokens over {counted} "
            f"(counted by {', '.join(summary['token_sources'])})"
        )
    ttft, first = summary["ttft_ms"], summary["ttft_answer_ms"]
    if ttft is not None:
        answer_at = "none came" if first is None else fmt_unit(first, "ms") + " ms after sending"
        lines.append(f"first answer token: {answer_at} (TTFT {fmt_unit(ttft, 'ms')} ms), medians")
    if summary["truncated_in_reasoning"]:
        lines.append(
            f"{summary['truncated_in_reasoning']} of {tasks} tasks cut off while still thinking: "
            "raise --thinking-budget"
        )
    return lines


def _notes(out: Console, bundle: Mapping[str, Any], path: str) -> None:
    comparability = bundle["comparability"]
    scored = f"{comparability['tasks_scored']} of {comparability['tasks_expected']} tasks scored"
    if bundle.get("benchmark_profile") == "custom":
        # The coverage counts a profile's tasks; a custom selection is counted on its own.
        ran = [t for suite in bundle["suites"].values() for t in suite.get("tasks") or []]
        # A sweep cell counts when measured; any other task has no cell status.
        done = sum(
            task_state(t) is None and cell_status(t.get("metadata")) in (None, "measured")
            for t in ran
        )
        scored = f"{done} of {len(ran)} selected tasks scored or measured (a custom selection)"
    ranked = "comparable" if bundle.get("comparable") else "not comparable"
    say(out, f"status: {bundle['status']} · {scored} · {ranked}", style="bold")
    for reason in comparability["reasons"]:
        say(out, reason, indent="    ", first="  - ")
    error = bundle.get("error")
    # An interruption is already a reason above ("interrupted after 0 of 39 tasks"): once.
    if error and error["message"] not in comparability["reasons"]:
        say(out, error["message"], style="yellow", indent="  ")
    if bundle.get("quality_score") is None:
        say(out, "no quality suite ran: no quality, overall or value score", style="dim")
    for line in reasoning_lines(bundle):
        say(out, line, indent="    ", first="  ")
    ratio = bundle["speed_summary"].get("decode_ratio_vs_server")
    if ratio is not None:
        say(out, f"decode rate ÷ the server's own: {fmt_unit(ratio, 'ratio')}", style="dim")
    contention = bundle["contention"]
    why = "; ".join(contention["reasons"]) or contention["gpu"].get("note", "")
    say(out, f"contention: {contention['status']}" + (f" ({why})" if why else ""), style="dim")
    say(out, f"measured with {bundle_versions(bundle)}", style="dim")
    # A path is printed whole: cut or broken, it could not be pasted.
    out.print(Text(whole_path("bundle", path, out.width)), soft_wrap=True)


def render_run(out: Console, bundle: Mapping[str, Any], path: str) -> None:
    """The summary printed after a run, from its bundle alone."""
    for part in (_speed_tasks(bundle), *_sweeps(bundle), _quality_suites(bundle)):
        if part is not None:
            out.print(part)
            out.print()
    if bundle["suites"].get("speed"):
        out.print(_speed_summary(bundle))
        out.print()
    out.print(_scores(bundle))
    out.print()
    _notes(out, bundle, path)


def run_summary(outcome) -> dict:
    """`benchloop run --json`: what the run measured, where its bundle is, which versions."""
    bundle = outcome.bundle
    return {
        "ok": outcome.status == "complete",
        "status": outcome.status,
        "run_id": bundle["run_id"],
        "client_run_id": bundle["client_run_id"],
        "path": str(outcome.path),
        "model": bundle["model"],
        "engine": bundle["engine"],
        "scoring_mode": bundle["scoring_mode"],
        "hardware_label": bundle["machine"]["hardware_label"],
        "versions": {
            "cli": bundle.get("version"),
            "benchmark": bundle.get("benchmark_version"),
            "score_schema": bundle.get("score_schema_version"),
        },
        "scores": {k: score_or_none(bundle, k) for k in SCORE_KEYS},
        "comparability": bundle["comparability"],
        "contention": bundle["contention"],
        "speed_summary": bundle["speed_summary"],
        "speed_metrics": bundle["speed_metrics"],
        "sweeps": bundle.get("sweeps"),
        "error": bundle.get("error"),
    }
