"""Adaptive trials: how many times a speed cell repeats (docs/metrics.md, "Trials").

A cell runs at least ``floor`` trials and at most ``ceiling``; between the two it stops as soon
as every figure it measures has a 95% interval for its median narrower than that figure's
target, relative to the median. The interval is the one every sample in the engine gets,
``stats.median_interval`` (the sign-test interval): from 3 to 8 values it is min–max, which
covers the median with probability 0.75 at 3 values, 0.875 at 4, 0.9375 at 5 and 0.95 or more
from 6; each decision records the coverage it had. ``--trials N`` is the fixed rule: floor and
ceiling both N, so exactly N trials run and the half-widths are still reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from ..rules.contract import TrialRule
from ..rules.stats import median_interval

ADAPTIVE_FLOOR = 3
ADAPTIVE_CEILING = 10
# Target half-width of each kind of figure, relative to its median.
TARGETS = {"decode": 0.02, "prefill": 0.03}
INTERVAL = "median sign-test interval (worker.rules.stats.median_interval), level 0.95"


def adaptive_rule(floor: int = ADAPTIVE_FLOOR, ceiling: int = ADAPTIVE_CEILING) -> TrialRule:
    return TrialRule(
        mode="adaptive", floor=floor, ceiling=ceiling, targets=dict(TARGETS), interval=INTERVAL
    )


def fixed_rule(trials: int) -> TrialRule:
    """Exactly ``trials`` trials (--trials N, or a profile's speed_trials)."""
    return TrialRule(
        mode="fixed", floor=trials, ceiling=trials, targets=dict(TARGETS), interval=INTERVAL
    )


def speed_rule(trials: int | None) -> TrialRule:
    """The speed suite's rule for a run: ``trials`` fixed (--trials, or the profile's
    speed_trials), else adaptive."""
    return adaptive_rule() if trials is None else fixed_rule(trials)


def figure_kind(figure: str) -> str:
    """ "decode_long" → "decode": a figure's kind names its target and the trial value read."""
    return figure.split("_", 1)[0]


class FigureCheck(TypedDict):
    n: int
    median: float | None
    # (high − low) / 2 / median of the median's interval; None below three values.
    half_width: float | None
    coverage: float | None
    target: float
    met: bool


class Decision(TypedDict):
    stop: bool
    # "target_met", "ceiling" (at the ceiling with a target missed), "fixed" (the fixed rule's
    # count reached) or "continue".
    reason: str
    trials_run: int
    figures: dict[str, FigureCheck]


def relative_half_width(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Half the width of the median's interval over the median, and the interval's coverage."""
    interval = median_interval(values)
    median, low, high = interval["median"], interval["low"], interval["high"]
    if median is None or low is None or high is None or median <= 0:
        return None, interval["coverage"]
    return (high - low) / 2 / median, interval["coverage"]


def check(rule: TrialRule, samples: Mapping[str, Sequence[float | None]]) -> dict[str, FigureCheck]:
    """Each measured figure's half-width against its target (``samples``: figure → values)."""
    out = {}
    for figure, values in samples.items():
        target = rule["targets"][figure_kind(figure)]
        half, coverage = relative_half_width(values)
        median = median_interval(values)["median"]
        out[figure] = FigureCheck(
            n=sum(1 for v in values if v is not None),
            median=None if median is None else round(median, 4),
            half_width=None if half is None else round(half, 5),
            coverage=coverage,
            target=target,
            met=half is not None and half <= target,
        )
    return out


def decide(
    rule: TrialRule, trials_run: int, samples: Mapping[str, Sequence[float | None]]
) -> Decision:
    """Whether a cell stops after ``trials_run`` trials (failed ones count towards the ceiling,
    not towards a figure's values). A cell that measures no figure stops at the floor."""
    figures = check(rule, samples)
    met = all(f["met"] for f in figures.values())
    if trials_run >= rule["ceiling"]:
        reason = "fixed" if rule["mode"] == "fixed" else ("target_met" if met else "ceiling")
        return Decision(stop=True, reason=reason, trials_run=trials_run, figures=figures)
    if trials_run >= rule["floor"] and met and rule["mode"] == "adaptive":
        return Decision(stop=True, reason="target_met", trials_run=trials_run, figures=figures)
    return Decision(stop=False, reason="continue", trials_run=trials_run, figures=figures)


def describe(decision: Decision) -> str:
    """One line for the record: what was reached, and a missed target said plainly."""
    parts = []
    for figure, f in decision["figures"].items():
        reached = "n too small" if f["half_width"] is None else f"±{f['half_width']:.1%}"
        parts.append(f"{figure} {reached} (target ±{f['target']:.0%})")
    figures = "; ".join(parts) or "no figure targeted"
    n = decision["trials_run"]
    if decision["reason"] == "target_met":
        return f"target met after {n} trials: {figures}"
    if decision["reason"] == "ceiling":
        return f"ceiling reached, noisy: {n} trials, {figures}"
    return f"fixed {n} trials: {figures}"
