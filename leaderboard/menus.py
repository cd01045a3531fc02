"""The filter menus' values (facets) and the hardware classes on offer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from leaderboard import cache as board_cache
from leaderboard.queries import HardwareChoice
from leaderboard.scopes import class_runs
from runs import matrix
from runs.models import HardwareClass, HardwareKind, Stack

KIND_ORDER = [HardwareKind.GPU, HardwareKind.APPLE, HardwareKind.CPU, HardwareKind.REMOTE]


def hardware_choices() -> list[HardwareChoice]:
    """Hardware classes with published lanes: most runs first per kind (the API's order; the
    "your hardware" menu groups and orders them by name, leaderboard.hardware_menu)."""
    runs = class_runs()
    classes = HardwareClass.objects.filter(pk__in=list(runs))
    choices: list[HardwareChoice] = [
        {
            "id": c.id,
            "slug": c.slug,
            "label": c.label,
            "kind": c.kind,
            "vendor": c.vendor,
            "chip": c.chip,
            "count": c.count,
            "memory_gb": c.memory_gb,
            "runs": runs[c.id],
        }
        for c in classes
    ]
    order = {kind: i for i, kind in enumerate(KIND_ORDER)}
    return sorted(choices, key=lambda c: (order.get(c["kind"], 9), -c["runs"], c["label"]))


class Facets(TypedDict):
    """The filter menus' values (facets)."""

    engines: list[str]
    quants: list[str]
    families: list[str]
    harnesses: list[str]
    harness_groups: list[tuple[str, list[str]]]
    hardware: list[HardwareChoice]


def facets() -> Facets:
    """Values offered by the filter menus: only what appears on published stacks."""
    stack_rows = (
        Stack.objects.filter(published_run_count__gt=0)
        .values_list("engine", "quantization", "model_family", "harness")
        .distinct()
    )
    engines: set[str] = set()
    quants: set[str] = set()
    families: set[str] = set()
    harnesses: set[str] = set()
    for engine, quant, family, harness in stack_rows:
        engines.add(engine)
        quants.add(quant)
        families.add(family)
        harnesses.add(harness)
    return {
        "engines": sorted(e for e in engines if e),
        "quants": sorted(q for q in quants if q),
        "families": sorted(f for f in families if f),
        "harnesses": sorted((h for h in harnesses if h), key=matrix.harness_order),
        "harness_groups": harness_groups(harnesses),
        "hardware": cached_hardware_choices(),
    }


HARNESS_GROUPS = (
    ("baseline", "Baseline"),
    ("format", "Prompt formats (the engine's loop)"),
    ("program", "Agent programs"),
    ("other", "Other"),
)


def harness_groups(names: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The harnesses on offer as (group label, names): the baseline, the prompt formats and
    the real agent programs apart, so a format is never read as a program (empty groups
    left out)."""
    found = sorted({n for n in names if n}, key=matrix.harness_order)
    groups = [
        (label, [n for n in found if matrix.harness_kind(n) == kind])
        for kind, label in HARNESS_GROUPS
    ]
    return [(label, members) for label, members in groups if members]


def cached_hardware_choices() -> list[HardwareChoice]:
    return board_cache.cached("hardware-choices", "", hardware_choices)
