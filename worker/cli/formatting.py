"""How the CLI writes figures, labels and lines: one format per unit, lines that fit the width."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Mapping
from numbers import Real
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from worker.engine import __version__
from worker.rules.scoring import BENCHMARK_VERSION, SCORE_SCHEMA_VERSION

# Decimals per unit, everywhere the CLI prints one: a figure never shows as 0 here and 0.00 there.
DIGITS = {"tok/s": 1, "ms": 0, "tokens": 0, "n": 0, "score": 1, "ratio": 3, "GB": 1}

# What users read instead of the bundle's field names.
SCORE_LABELS = {
    "overall_score": "overall",
    "quality_score": "quality",
    "speed_score": "speed",
    "reliability_score": "reliability",
    "value_score": "value",
}
SCORE_KEYS = tuple(SCORE_LABELS)


def fmt(value: object, digits: int = 1) -> str:
    """A figure as the CLI prints it: "–" when missing, numbers with thousands separators."""
    if value is None:
        return "–"
    if isinstance(value, Real) and not isinstance(value, bool):
        return f"{float(value):,.{digits}f}"
    return str(value)


def fmt_unit(value: object, unit: str) -> str:
    """``fmt`` with the unit's decimals (see DIGITS)."""
    return fmt(value, DIGITS[unit])


def fmt_signed(value: object, digits: int = 1) -> str:
    """A difference: "+5.8", "-3.2", "0.0"; "–" when missing."""
    if value is None:
        return "–"
    text = fmt(value, digits)
    zero = isinstance(value, Real) and float(value) == 0
    return text if text.startswith("-") or zero else "+" + text


def fmt_p(value: float | None) -> str:
    """A p-value to four places; below that, "<0.0001" (never a bare 0)."""
    if value is None:
        return "–"
    return "<0.0001" if value < 0.00005 else f"{value:.4f}"


def fmt_range(low: object, high: object, unit: str) -> str:
    """An interval as "low to high" (a dash would read as a minus sign before a number)."""
    if low is None or high is None:
        return "–"
    return f"{fmt_unit(low, unit)} to {fmt_unit(high, unit)}"


def versions(cli: str = __version__, benchmark: str = BENCHMARK_VERSION, schema: str = "") -> str:
    """Each version with its name: "CLI 0.4.0 · benchmark 4.0.0 · score schema 3.1.0"."""
    return f"CLI {cli} · benchmark {benchmark} · score schema {schema or SCORE_SCHEMA_VERSION}"


def bundle_versions(bundle: Mapping[str, Any]) -> str:
    """The versions a run was measured with, as the bundle records them."""
    return versions(
        str(bundle.get("version") or "?"),
        str(bundle.get("benchmark_version") or "?"),
        str(bundle.get("score_schema_version") or "?"),
    )


def fit(text: str, width: int, indent: str = "", first: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` columns, broken between words where it can."""
    return textwrap.wrap(
        text,
        width=max(width, 20),
        initial_indent=first or indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def say(out: Console, text: str, *, style: str = "", indent: str = "", first: str = "") -> None:
    """Print ``text`` wrapped to the console's width by us, so Rich never breaks it mid-word."""
    for line in fit(text, out.width, indent=indent, first=first):
        out.print(Text(line, style=style), soft_wrap=True)


def table(title: str = "") -> Table:
    """A borderless table: two spaces between columns, so eight fit in 80 columns."""
    return Table(
        title=title or None,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        header_style="bold",
    )


def whole_path(label: str, path: str, width: int) -> str:
    """ "label: path" in lines no wider than ``width``: on one line if it fits, else the path on
    a line of its own, as ~/… or as its folder if that is what fits (a terminal wraps a longer
    line, and a path broken so cannot be pasted); a path longer than any line, whole."""
    line = f"{label}: {path}"
    if len(line) <= width:
        return line
    home = str(Path.home())
    short = "~" + path[len(home) :] if home != "/" and path.startswith(home + "/") else path
    choices = (
        (label, path),
        (label, short),
        (f"{label} folder", str(Path(path).parent)),
        (f"{label} folder", str(Path(short).parent)),
    )
    for name, shown in choices:
        if len(shown) <= width:
            return f"{name}:\n{shown}"
    return f"{label}:\n{path}"


def print_json(data: object) -> None:
    """A command's --json answer on stdout, whole."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
