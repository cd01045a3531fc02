"""`benchloop harness` (install and list the real harness programs) and `benchloop matrix`.

`matrix` runs the matrix profile once per harness (one bundle each: the harness is part of the
stack), then prints the matrix: each harness's suite scores and what it cost against the ``raw``
baseline, from the proxy's records.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from worker.engine.errors import UsageError
from worker.engine.matrix import cage, install
from worker.engine.matrix.adapters import variants
from worker.engine.matrix.programs import PROGRAMS
from worker.rules.harnesses import FORMATS, HARNESSES, canonical

out = Console(highlight=False)
EXIT_OK = 0

Command = Callable[[str, str], argparse.ArgumentParser]


def cmd_harness(args: argparse.Namespace) -> int:
    if args.action == "install":
        names = args.names or list(PROGRAMS)
        for name in names:
            if name not in PROGRAMS:
                raise UsageError(f"{name!r} is not a harness program", hint=_programs_hint())
            spec = PROGRAMS[name]
            found = install.program_path(spec)
            if found and not args.force:
                out.print(f"{name}: already installed ({found})")
                continue
            out.print(f"installing {spec.package}=={spec.version} into {cage.harness_prefix(spec)}")
            path = install.install(spec, quiet=not args.verbose)
            out.print(f"  {name}: {path}")
        return EXIT_OK
    rows = [_program_row(name) for name in PROGRAMS]
    if args.json:
        print(json.dumps({"programs": rows, "formats": list(FORMATS)}, indent=2))
        return EXIT_OK
    table = Table(title="Harness programs (--harness, matrix suites only)")
    for column in ("harness", "package", "variants", "installed"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            f"{row['package']}=={row['version']}",
            ", ".join(row["variants"]) or "-",
            row["path"] or "no: benchloop harness install " + row["name"],
        )
    out.print(table)
    out.print(f"Prompt formats (our own loop): {', '.join(FORMATS)}")
    return EXIT_OK


def _program_row(name: str) -> dict[str, Any]:
    spec = PROGRAMS[name]
    path = install.program_path(spec)
    return {
        "name": name,
        "package": spec.package,
        "version": spec.version,
        "variants": list(variants(name)),
        "path": str(path) if path else None,
    }


def _programs_hint() -> str:
    return f"Programs: {', '.join(PROGRAMS)}."


def _harness_list(value: str) -> list[tuple[str, str]]:
    """``raw,aider:whole,mini-swe-agent`` as (harness, variant) pairs."""
    pairs = []
    for item in value.split(","):
        name, _, variant = item.strip().partition(":")
        name = canonical(name)
        if name not in HARNESSES:
            raise argparse.ArgumentTypeError(f"unknown harness {name!r}")
        pairs.append((name, variant))
    if not pairs:
        raise argparse.ArgumentTypeError("no harness given")
    return pairs


def cmd_matrix(args: argparse.Namespace, run: Callable[[argparse.Namespace], tuple]) -> int:
    results: list[tuple[str, str, dict]] = []
    worst = EXIT_OK
    for name, variant in args.harnesses:
        one = copy.copy(args)
        one.harness, one.harness_variant = name, variant
        one.profile = args.profile or "matrix"
        code, outcome = run(one)
        worst = max(worst, code)
        results.append((name, variant, outcome.bundle))
    if not args.json:
        out.print(matrix_table(results))
    return worst


def matrix_table(results: list[tuple[str, str, dict]]) -> Table:
    """Rows = harnesses, columns = matrix suites: score, and tokens sent against raw's."""
    suites = sorted({s for _, _, b in results for s in b.get("suites", {})})
    baseline = next((b for n, _, b in results if n == "raw"), None)
    table = Table(
        title="Harness matrix: score · tokens sent (× raw) · requests · format/sandbox fails"
    )
    table.add_column("harness")
    for suite in suites:
        table.add_column(suite)
    for name, variant, bundle in results:
        cells = []
        for suite in suites:
            record = bundle.get("suites", {}).get(suite)
            if record is None:
                cells.append("-")
                continue
            meta = record.get("metadata", {})
            sent = meta.get("overhead", {}).get("prompt_tokens_total", 0)
            base = (baseline or {}).get("suites", {}).get(suite, {}).get("metadata", {})
            base_sent = base.get("overhead", {}).get("prompt_tokens_total")
            ratio = f" (×{sent / base_sent:.1f})" if base_sent else ""
            fails = meta.get("failures", {})
            cells.append(
                f"{record['score']:.0f} · {sent:.0f}{ratio} · "
                f"{meta.get('overhead', {}).get('requests_total', 0):.0f} req · "
                f"{fails.get('format', 0)}/{fails.get('sandbox', 0)}"
            )
        table.add_row(f"{name}{':' + variant if variant else ''}", *cells)
    return table


def add_commands(
    command: Command,
    add_run_options: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], tuple],
) -> None:
    harness = command("harness", "install or list the real harness programs (matrix suites)")
    harness.add_argument("action", choices=("list", "install"))
    harness.add_argument("names", nargs="*", metavar="NAME", help="programs (default: all)")
    harness.add_argument("--verbose", action="store_true", help="show pip's output")
    harness.add_argument("--force", action="store_true", help="install again even if present")
    harness.set_defaults(handler=cmd_harness)

    matrix = command("matrix", "run the matrix suites once per harness and compare them")
    add_run_options(matrix)
    matrix.add_argument(
        "--harnesses",
        type=_harness_list,
        default=[("raw", ""), *((name, "") for name in PROGRAMS)],
        help="comma-separated harnesses, NAME or NAME:VARIANT (default: raw and every program)",
    )
    matrix.set_defaults(handler=lambda args: cmd_matrix(args, run))
