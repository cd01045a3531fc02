"""Labels that tell stacks apart when they are shown together (no Django imports).

A stack's identity has many parts (runs.normalize.stack_identity); its short label names only
the model, quantization and engine. Two stacks on one page, image or export may share that
label, so each part that differs between such neighbours is added to all of them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from runs.public import public_launch_settings

SHORT_DIGEST = 8


class Labelled(Protocol):
    """What a stack needs for its labels (runs.models.Stack has all of it). Read-only
    members, so that a model's fields and its `label` property both satisfy them."""

    @property
    def pk(self) -> Any: ...
    @property
    def label(self) -> str: ...
    @property
    def harness(self) -> str: ...
    @property
    def context_length(self) -> int | None: ...
    @property
    def kv_cache_type(self) -> str: ...
    @property
    def draft_model(self) -> str: ...
    @property
    def model_sha256(self) -> str: ...
    @property
    def launch_settings(self) -> dict[str, Any]: ...
    @property
    def comparability_key(self) -> str: ...


def context_text(tokens: int | None) -> str:
    """'ctx 32K' for 32768 tokens, 'ctx 1000' for 1000; 'ctx default' when not recorded."""
    if not tokens:
        return "ctx default"
    if tokens % 1024 == 0:
        return f"ctx {tokens // 1024}K"
    return f"ctx {tokens}"


def _setting_text(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 40 else text[:39] + "…"


def _simple_part(
    read: Callable[[Labelled], object], write: Callable[[Labelled], str]
) -> Callable[[Sequence[Labelled]], dict[Any, list[str]]]:
    """A part written for every stack of a group in which its value is not all the same."""

    def parts(group: Sequence[Labelled]) -> dict[Any, list[str]]:
        if len({json.dumps(read(s), sort_keys=True) for s in group}) < 2:
            return {}
        return {s.pk: [write(s)] for s in group}

    return parts


def _launch_parts(group: Sequence[Labelled]) -> dict[Any, list[str]]:
    """Per stack, the launch settings whose value is not the same on every stack in the group."""
    # Labels are public: only the settings a public page may show, their text redacted.
    shown = {s.pk: public_launch_settings(s.launch_settings) for s in group}
    keys = sorted({key for settings in shown.values() for key in settings})
    parts: dict[Any, list[str]] = defaultdict(list)
    for key in keys:
        values = {json.dumps(shown[s.pk].get(key), sort_keys=True) for s in group}
        if len(values) < 2:
            continue
        for s in group:
            settings = shown[s.pk]
            if key in settings:
                parts[s.pk].append(f"{key}={_setting_text(settings[key])}")
    return parts


# The distinguishing parts, in the order a label lists them.
_PARTS = [
    _simple_part(lambda s: s.harness or "raw", lambda s: f"{s.harness or 'raw'} harness"),
    _simple_part(lambda s: s.context_length, lambda s: context_text(s.context_length)),
    _simple_part(
        lambda s: (s.kv_cache_type or "").lower(), lambda s: f"KV {s.kv_cache_type or 'default'}"
    ),
    _launch_parts,
    _simple_part(
        lambda s: (s.model_sha256 or "").lower(),
        lambda s: f"sha256 {s.model_sha256[:SHORT_DIGEST]}" if s.model_sha256 else "no digest",
    ),
]


def distinct_labels(stacks: Iterable[Labelled]) -> list[str]:
    """One label per stack, in the order given, such that different stacks never share one.

    The label is the stack's own (``model quant · engine``, with its draft model if any), plus,
    for stacks that share it with a neighbour in ``stacks``, each part that differs among
    them: harness, context, KV-cache type, launch settings (``key=value``), short weights
    digest. Parts that every such neighbour has in common are left out. Should two stacks
    still read alike (their settings differ only in case or spelling), the first characters
    of their comparability keys are added. The same stack given twice gets the same label.
    """
    items = list(stacks)
    groups: dict[str, list[Labelled]] = defaultdict(list)
    seen: set[Any] = set()
    for stack in items:
        if stack.pk not in seen:
            seen.add(stack.pk)
            groups[stack.label].append(stack)
    labels: dict[Any, str] = {}
    for base, group in groups.items():
        if len(group) == 1:
            labels[group[0].pk] = base
            continue
        extra: dict[Any, list[str]] = defaultdict(list)
        for part in _PARTS:
            for pk, texts in part(group).items():
                extra[pk].extend(texts)
        labelled = {s.pk: " · ".join([base, *extra[s.pk]]) for s in group}
        if len(set(labelled.values())) < len(group):
            labelled = {
                s.pk: f"{labelled[s.pk]} · #{s.comparability_key[:SHORT_DIGEST]}" for s in group
            }
        labels.update(labelled)
    return [labels[stack.pk] for stack in items]


def labels_by_id(stacks: Iterable[Labelled]) -> dict[Any, str]:
    """distinct_labels keyed by each stack's primary key."""
    shown = list(stacks)
    return dict(zip([stack.pk for stack in shown], distinct_labels(shown), strict=True))
