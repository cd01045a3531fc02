"""`benchloop info`: this machine, the servers answering here, and (with --all) the suites,
profiles, harnesses, reasoning limits and sweep figures the engine knows."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from worker.cli.formatting import fmt, print_json, say, versions
from worker.engine import __version__
from worker.engine.adaptive import speed_rule
from worker.engine.detect import scan_local
from worker.engine.hardware import detect_hardware
from worker.engine.matrix.bounds import mechanism
from worker.engine.matrix.programs import HARNESS_DESCRIPTIONS
from worker.engine.sandbox import current_isolation
from worker.engine.suites import available_suites, load_profiles
from worker.engine.sweeps import SWEEP_METRICS
from worker.rules.harnesses import HARNESSES
from worker.rules.reasoning import DEFAULT_THINKING_BUDGET, MAX_TOKENS_CEILING
from worker.rules.scoring import BENCHMARK_VERSION, SCORE_SCHEMA_VERSION

EXIT_OK = 0
out = Console(highlight=False)


def cmd_info(args: argparse.Namespace) -> int:
    data = _info_data()
    if args.json:
        print_json(data)
        return EXIT_OK
    out.print(f"[bold]benchloop {versions()}[/]")
    _print_machine(data["hardware"], data["sandbox"])
    servers = _servers_table(data["servers"])
    out.print(servers if data["servers"] else "No LLM server answers on the usual local ports.")
    if not getattr(args, "all", False):
        _print_short_info(data)
        return EXIT_OK
    out.print(_suites_table(data["suites"]))
    out.print(_profiles_table(data["profiles"]))
    out.print(_harnesses_table(data["harnesses"]))
    say(out, f"Harness cage bounds: {data['harness_cage']}", indent="  ")
    out.print("[bold]Reasoning models[/]")
    for line in data["reasoning"]["text"]:
        out.print(line)
    out.print(_sweep_metrics_table(data["sweep_metrics"]))
    return EXIT_OK


def _print_short_info(data: dict[str, Any]) -> None:
    """The suites and profiles in a few lines; the tables are behind `info --all`."""
    suites = ", ".join(f"{name} ({s['task_count']})" for name, s in data["suites"].items())
    say(out, f"Suites (tasks): {suites}", indent="  ")
    profiles = ", ".join(
        f"{name}{' (default)' if p['default'] else ''}: {p['task_count']} tasks"
        for name, p in data["profiles"].items()
    )
    say(out, f"Profiles: {profiles}", indent="  ")
    say(
        out,
        "More: `benchloop info --all` (each suite and profile, harnesses, reasoning models, "
        "sweep figures).",
        style="dim",
    )


def _reasoning_info() -> dict[str, Any]:
    """How quality tasks give a model room to think (docs/metrics.md, "Reasoning models")."""
    return {
        "default_thinking_budget": DEFAULT_THINKING_BUDGET,
        "max_tokens_ceiling": MAX_TOKENS_CEILING,
        "text": [
            "Each quality task asks for at most its answer cap plus the thinking budget. The "
            f"budget is {DEFAULT_THINKING_BUDGET} tokens when the warm-up answer carries "
            "reasoning (reasoning_content, reasoning, thinking or <think>), else 0; "
            "--thinking-budget N sets it, --max-tokens N sets the answer cap (up or down; "
            f"alone, the whole limit), never above {MAX_TOKENS_CEILING} or the server's context.",
            "Reasoning tokens are counted apart from answer tokens: the server's "
            "reasoning_tokens where it reports them, else one per stream event, else estimated "
            "from the text; each record says which (reasoning_token_source).",
            "ttft_answer_ms is the time to the first answer token, next to TTFT (the first "
            "token of any kind). A task cut off while still thinking says "
            "truncated_in_reasoning: raise --thinking-budget.",
        ],
    }


def _info_data() -> dict[str, Any]:
    """What `info --json` prints: this machine, its servers, and what the engine can run."""
    servers = [
        {"url": s.base_url, "kind": s.kind, "engine": s.engine, "models": s.models}
        for s in scan_local()
    ]
    suites: dict[str, dict[str, Any]] = {
        name: {
            "version": s.version,
            "task_count": len(s.tasks),
            "description": s.description,
            "tasks": [t["id"] for t in s.tasks],
        }
        for name, s in available_suites().items()
    }
    return {
        "version": __version__,
        "benchmark_version": BENCHMARK_VERSION,
        "score_schema_version": SCORE_SCHEMA_VERSION,
        "hardware": detect_hardware(),
        "servers": servers,
        "suites": suites,
        "profiles": _profile_rows({name: s["task_count"] for name, s in suites.items()}),
        "harnesses": {name: HARNESS_DESCRIPTIONS[name] for name in HARNESSES},
        "sandbox": current_isolation().as_dict(),
        "harness_cage": mechanism(),
        "reasoning": _reasoning_info(),
        "sweep_metrics": SWEEP_METRICS,
    }


def _profile_rows(task_counts: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Each profile with its task count and whether every suite it names is installed."""
    profiles = load_profiles()
    rows = {}
    for name, p in profiles["profiles"].items():
        missing = [s for s in p["suites"] if s not in task_counts]
        rows[name] = {
            "suites": p["suites"],
            "task_count": sum(task_counts[s] for s in p["suites"] if s in task_counts),
            "available": not missing,
            "missing_suites": missing,
            "default": name == profiles["default"],
            # None: adaptive (the rule says how many); the sweeps then run DEFAULT_TRIALS.
            "speed_trials": p.get("speed_trials"),
            "speed_trial_rule": speed_rule(p.get("speed_trials")),
        }
    return rows


def _print_machine(hardware: dict[str, Any], sandbox: dict[str, Any]) -> None:
    gpus = (
        ", ".join(f"{g['name']} ({fmt(g.get('vram_gb'))} GB)" for g in hardware["gpus"]) or "none"
    )
    out.print(
        f"CPU: {hardware['cpu_model']} ({hardware['cpu_physical_cores']} cores, "
        f"{hardware['cpu_logical_cores']} threads) · RAM {fmt(hardware['ram_gb'])} GB · "
        f"{hardware['os']} {hardware['os_version']}\nGPU: {gpus}"
    )
    for note in hardware["notes"]:
        out.print(f"[dim]{note}[/]")
    colour = {"os": "green", "weak": "yellow"}.get(sandbox["level"], "red")
    line = f"Code sandbox: [{colour}]{sandbox['level']}[/] · {escape(sandbox['detail'])}"
    if sandbox.get("reason"):
        line += f"\n[dim]{escape(sandbox['reason'])}; coding suites are refused[/]"
    out.print(line)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    return table


def _servers_table(servers: list[dict[str, Any]]) -> Table:
    table = _table("LLM servers on this machine", "url", "kind", "version", "models")
    for s in servers:
        table.add_row(
            s["url"], s["kind"], str(s["engine"].get("version", "")), ", ".join(s["models"])
        )
    return table


def _suites_table(suites: dict[str, dict[str, Any]]) -> Table:
    table = _table("Suites", "suite", "version", "tasks", "description")
    for name, s in suites.items():
        table.add_row(name, s["version"], str(s["task_count"]), s["description"])
    return table


def _profiles_table(profiles: dict[str, dict[str, Any]]) -> Table:
    table = _table("Profiles", "profile", "suites", "tasks", "speed trials", "status")
    for name, p in profiles.items():
        status = "available" if p["available"] else "needs " + ", ".join(p["missing_suites"])
        label = name + (" (default)" if p["default"] else "")
        rule = p["speed_trial_rule"]
        trials = str(p["speed_trials"] or f"{rule['floor']}–{rule['ceiling']}")
        table.add_row(label, ", ".join(p["suites"]), str(p["task_count"]), trials, status)
    return table


def _sweep_metrics_table(metrics: dict[str, str]) -> Table:
    table = _table("Depth and concurrency sweeps (suite speed_sweep)", "figure", "what it is")
    for name, text in metrics.items():
        table.add_row(name, text)
    return table


def _harnesses_table(harnesses: dict[str, str]) -> Table:
    table = _table("Harnesses (--harness)", "harness", "how tools are offered and read back")
    for name, description in harnesses.items():
        table.add_row(name + (" (default)" if name == "raw" else ""), description)
    return table


# ------------------------------------------------------------------------------- list, compare
