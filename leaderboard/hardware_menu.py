"""The "your hardware" menu of the landing page and the board: (group, [(value, label)]).

Classes with runs come first, grouped by vendor and kind and ordered by name, count and
memory, so a visitor finds "RTX 4090" beside "RTX 3090" rather than where its run count put
it. Then the choices that name no one class: any GPU with N GB, what fits in N GB, a kind
of machine, and the all-hardware view (BoardFilters.from_query reads the prefixed values).
"""

from __future__ import annotations

import re

from leaderboard import filters as board_filters
from leaderboard.queries import HardwareChoice
from leaderboard.scopes import vram_range
from runs.models import HardwareKind

Menu = list[tuple[str, list[tuple[str, str]]]]
# A natural-order key: (0, number, "") for each run of digits, (1, 0.0, text) for the rest.
NameKey = tuple[tuple[int, float, str], ...]

GPU_VENDORS = (("nvidia", "NVIDIA"), ("amd", "AMD"), ("intel", "Intel"))
OTHER_GPUS = "Other GPUs"
KIND_GROUPS = (
    (HardwareKind.APPLE, "Apple silicon"),
    (HardwareKind.CPU, "CPU only"),
)
REMOTE_GROUP = "Remote endpoints (not your machine)"
VRAM_GROUP = "Any GPU with this much memory"
FITS_GROUP = "Fits in this much memory"
KINDS_GROUP = "Any machine of a kind"
ACROSS_GROUP = "Across machines"
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")


def name_key(name: str) -> NameKey:
    """Natural order: "RTX 3060" before "RTX 3090" before "RTX 4060 Ti", "M2" before "M10"."""
    parts = _NUMBER.split(name.casefold())
    return tuple((0, float(part), "") if i % 2 else (1, 0.0, part) for i, part in enumerate(parts))


def class_order(choice: HardwareChoice) -> tuple[NameKey, int, float, str]:
    """One chip's sizes and counts together: RTX 4090 24 GB, then 2× RTX 4090, then RTX 5090."""
    return (
        name_key(choice["chip"] or choice["label"]),
        choice["count"],
        choice["memory_gb"] or 0.0,
        choice["label"],
    )


def class_group(choice: HardwareChoice) -> str | None:
    """The group a class is listed under; None for classes no visitor can pick (unknown)."""
    kind = choice["kind"]
    if kind == HardwareKind.GPU:
        return dict(GPU_VENDORS).get(choice["vendor"], OTHER_GPUS)
    if kind == HardwareKind.REMOTE:
        return REMOTE_GROUP
    return dict(KIND_GROUPS).get(kind)


def size_choices(
    choices: list[HardwareChoice],
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The entries "any GPU with N GB", one for each VRAM size some GPU class has, and "fits in
    N GB", one for each size that holds a GPU or Apple class (a smaller one would be empty)."""
    gpus = [c["memory_gb"] for c in choices if c["kind"] == HardwareKind.GPU and c["memory_gb"]]
    fitting = [
        c["memory_gb"]
        for c in choices
        if c["kind"] in (HardwareKind.GPU, HardwareKind.APPLE) and c["memory_gb"]
    ]
    vram = [
        (f"vram:{key}", f"any GPU with {label}")
        for key, label in board_filters.VRAM_CHOICES
        if any(low < m <= high for m in gpus for low, high in [vram_range(key)])
    ]
    smallest = min(fitting, default=None)
    fits = [
        (f"fits:{key}", f"fits in {label}")
        for key, label in board_filters.FITS_CHOICES
        if smallest is not None and smallest <= float(key)
    ]
    return vram, fits


def hardware_menu(choices: list[HardwareChoice]) -> Menu:
    """The menu for these classes (leaderboard.menus.hardware_choices)."""
    by_group: dict[str, list[HardwareChoice]] = {}
    for choice in choices:
        group = class_group(choice)
        if group is not None:
            by_group.setdefault(group, []).append(choice)
    order = [label for _, label in GPU_VENDORS] + [OTHER_GPUS]
    order += [label for _, label in KIND_GROUPS]
    menu: Menu = [
        (group, [(c["slug"], c["label"]) for c in sorted(by_group[group], key=class_order)])
        for group in order
        if by_group.get(group)
    ]
    vram, fits = size_choices(choices)
    if vram:
        menu.append((VRAM_GROUP, vram))
    if fits:
        menu.append((FITS_GROUP, fits))
    kinds = [
        (f"kind:{kind}", label)
        for kind, label in (("cpu", "any CPU-only machine"), ("apple", "any Apple chip"))
        if any(c["kind"] == kind for c in choices)
    ]
    if kinds:
        menu.append((KINDS_GROUP, kinds))
    if by_group.get(REMOTE_GROUP):
        remote = sorted(by_group[REMOTE_GROUP], key=class_order)
        menu.append((REMOTE_GROUP, [(c["slug"], c["label"]) for c in remote]))
    menu.append((ACROSS_GROUP, [(board_filters.ALL_HARDWARE, "All hardware (quality only)")]))
    return menu
