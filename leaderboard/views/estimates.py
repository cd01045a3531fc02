"""The arithmetic behind one estimated, not measured, speed (leaderboard.estimated)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_safe

from leaderboard import cache as board_cache
from leaderboard import estimated
from runs import estimates
from runs.models import HardwareClass, Stack


@dataclass(frozen=True)
class Step:
    """One line of a ceiling's arithmetic: a number, its unit and where it comes from."""

    step: str
    value: float | None
    unit: str
    where: str


@dataclass(frozen=True)
class HeldOut:
    """How far held-out estimates of a metric missed (percent), over how many lanes."""

    lanes: int
    error: float
    coverage: float


@dataclass(frozen=True)
class Arithmetic:
    """One metric's arithmetic, in the order the page reads it; the efficiency lines are
    there only with an estimate."""

    title: str
    metric: str
    est: estimates.Estimate | None
    ceiling: list[Step]
    published: HeldOut | None
    group: estimates.Level | None = None
    group_text: str = ""
    hierarchy_efficiency: float | None = None
    shifts: tuple[estimates.Shift, ...] = ()
    bounded: bool = False


@require_safe
def estimate_detail(request: HttpRequest, pk: int, hw: str) -> HttpResponse:
    """Ceiling × efficiency = estimate for a stack on a class it has no runs on, each number
    with where it came from; a measured lane goes to its stack page instead."""
    stack = get_object_or_404(Stack.objects.select_related("best_run"), pk=pk)
    hw_class = get_object_or_404(HardwareClass, slug=hw)
    if estimated.measured_here(stack, hw_class):
        return redirect(f"{reverse('leaderboard:stack', args=[pk])}?hw={hw_class.slug}")
    if stack.best_run_id is None:
        raise Http404("no published runs of this stack")
    return board_cache.render_page(
        request,
        "leaderboard/estimate.html",
        f"estimate|{pk}|{hw_class.pk}",
        lambda: _context(stack, hw_class),
    )


def _context(stack: Stack, hw_class: HardwareClass) -> dict[str, Any]:
    found = estimated.estimate(stack, hw_class)
    if found is None:
        raise Http404("no estimate can be made for this stack on this hardware")
    return {
        "est": found,
        "stack": stack,
        "hw_class": hw_class,
        "metrics": [
            _metric("Decode", found.decode, "decode", _decode_ceiling(found)),
            _metric("Prefill", found.prefill, "prefill", _prefill_ceiling(found)),
        ],
        "lab": estimated.lab_measures(hw_class),
    }


def _weights_text(found: estimated.Estimated) -> str:
    ceilings = found.ceilings
    if found.name_states_moe:
        return (
            f"{found.active_b:g}B of {ceilings.weights.total_b:g}B parameters active, as the "
            f"model's name states (a mixture of experts), at {ceilings.bits.bits:g} bits per "
            f"weight ({ceilings.bits.label})"
        )
    if ceilings.weights_bytes:
        return (
            f"the weights file's {ceilings.weights_bytes / 1e9:.2f} GB as a run reported it, × "
            f"the active share {ceilings.weights.active_b:g}B of {ceilings.weights.total_b:g}B"
        )
    bits = ceilings.bits
    return f"{ceilings.weights.note}, at {bits.bits:g} bits per weight ({bits.label})"


def _decode_ceiling(found: estimated.Estimated) -> list[Step]:
    source = found.ceilings.source
    accelerator = source.accelerator
    return [
        Step(
            "Memory bandwidth",
            source.bandwidth_gbps,
            "GB/s",
            f"{accelerator.name}: {accelerator.source_of('bandwidth_gbps')}"
            + (f"; {source.bandwidth_text()}" if source.count > 1 else ""),
        ),
        Step("Weights read per token", found.bytes_per_token_gb, "GB", _weights_text(found)),
        Step(
            "Ceiling = bandwidth ÷ weights per token",
            found.lane.decode_ceiling,
            "tok/s",
            "no decode can read its weights faster than the memory delivers them",
        ),
    ]


def _prefill_ceiling(found: estimated.Estimated) -> list[Step]:
    peak = found.ceilings.peak
    if peak is None or not found.lane.prefill_ceiling:
        return []
    # The peak × devices runs.roofline.ceilings divided by 2 × active parameters, read back.
    compute = found.lane.prefill_ceiling * 2 * found.active_b / 1e3
    accelerator = found.ceilings.source.accelerator
    figure = "int8_tops" if peak[1].startswith("INT8") else "fp16_tflops"
    return [
        Step(
            "Compute peak", compute, peak[1], f"{accelerator.name}: {accelerator.source_of(figure)}"
        ),
        Step(
            "Operations per prompt token",
            2 * found.active_b,
            "G operations",
            f"2 per active parameter, {found.active_b:g}B active",
        ),
        Step(
            "Ceiling = peak ÷ operations per token",
            found.lane.prefill_ceiling,
            "tok/s",
            "no prefill can compute faster than the chip's peak",
        ),
    ]


def _metric(
    title: str, found: estimates.Estimate | None, metric: str, ceiling: list[Step]
) -> Arithmetic:
    """One metric's arithmetic, in the order the page reads it."""
    lanes, error, coverage = estimated.ACCURACY[metric]
    published = HeldOut(lanes, error * 100, coverage * 100) if lanes else None
    if found is None:
        return Arithmetic(title, metric, None, ceiling, published)
    group = found.group
    return Arithmetic(
        title,
        metric,
        found,
        ceiling,
        published,
        group=group,
        group_text=" · ".join(group.key) or "every measured lane",
        hierarchy_efficiency=math.exp(found.levels[-1].centre),
        shifts=tuple(s for s in found.shifts if s.n),
        bounded=found.low > 0 and math.isfinite(found.high),
    )
