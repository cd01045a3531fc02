"""The arithmetic behind one estimated, not measured, speed (leaderboard.estimated)."""

from __future__ import annotations

import math

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_safe

from leaderboard import cache as board_cache
from leaderboard import estimated
from runs import estimates
from runs.models import HardwareClass, Stack


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


def _context(stack: Stack, hw_class: HardwareClass) -> dict:
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


def _decode_ceiling(found: estimated.Estimated) -> list[dict]:
    source = found.ceilings.source
    accelerator = source.accelerator
    return [
        {
            "step": "Memory bandwidth",
            "value": source.bandwidth_gbps,
            "unit": "GB/s",
            "where": f"{accelerator.name}: {accelerator.source_of('bandwidth_gbps')}"
            + (f"; {source.bandwidth_text()}" if source.count > 1 else ""),
        },
        {
            "step": "Weights read per token",
            "value": found.bytes_per_token_gb,
            "unit": "GB",
            "where": _weights_text(found),
        },
        {
            "step": "Ceiling = bandwidth ÷ weights per token",
            "value": found.lane.decode_ceiling,
            "unit": "tok/s",
            "where": "no decode can read its weights faster than the memory delivers them",
        },
    ]


def _prefill_ceiling(found: estimated.Estimated) -> list[dict]:
    peak = found.ceilings.peak
    if peak is None or not found.lane.prefill_ceiling:
        return []
    # The peak × devices runs.roofline.ceilings divided by 2 × active parameters, read back.
    compute = found.lane.prefill_ceiling * 2 * found.active_b / 1e3
    accelerator = found.ceilings.source.accelerator
    figure = "int8_tops" if peak[1].startswith("INT8") else "fp16_tflops"
    return [
        {
            "step": "Compute peak",
            "value": compute,
            "unit": peak[1],
            "where": f"{accelerator.name}: {accelerator.source_of(figure)}",
        },
        {
            "step": "Operations per prompt token",
            "value": 2 * found.active_b,
            "unit": "G operations",
            "where": f"2 per active parameter, {found.active_b:g}B active",
        },
        {
            "step": "Ceiling = peak ÷ operations per token",
            "value": found.lane.prefill_ceiling,
            "unit": "tok/s",
            "where": "no prefill can compute faster than the chip's peak",
        },
    ]


def _metric(title: str, found: estimates.Estimate | None, metric: str, ceiling: list[dict]) -> dict:
    """One metric's arithmetic, in the order the page reads it."""
    lanes, error, coverage = estimated.ACCURACY[metric]
    out = {"title": title, "metric": metric, "est": found, "ceiling": ceiling, "published": None}
    if lanes:
        out["published"] = {"lanes": lanes, "error": error * 100, "coverage": coverage * 100}
    if found is None:
        return out
    group = found.group
    out.update(
        group=group,
        group_text=" · ".join(group.key) or "every measured lane",
        hierarchy_efficiency=math.exp(found.levels[-1].centre),
        shifts=[s for s in found.shifts if s.n],
        bounded=found.low > 0 and math.isfinite(found.high),
    )
    return out
