"""Share images (PNG) for stack, compare and run pages, cached by their content.

Like the pages, a card never pools speed across hardware: a stack's card shows one hardware
class (the page's ?hw=, or the class with most runs), a compare card the class the page
compares on, a run's card the run's own figures.
"""

from __future__ import annotations

import hashlib
import json

from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_safe

from leaderboard import share, summaries
from leaderboard.views.compare import comparison, parse_stack_ids
from leaderboard.views.pages import filtered_runs, get_public_stack, stack_filters
from runs.figures import Interval, runs_text
from runs.models import Run, Stack

CACHE_SECONDS = 24 * 3600
BROWSER_CACHE_SECONDS = 3600


def _fmt(value: float | None, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}{unit}"


def _png(card: share.Card) -> HttpResponse:
    """Render once per distinct content: the cache key is a hash of everything drawn."""
    spec = json.dumps([card.kicker, [c.__dict__ for c in card.columns], card.footer], default=str)
    key = "share-png:" + hashlib.sha256(spec.encode()).hexdigest()
    data = cache.get(key)
    if data is None:
        data = share.render_card(kicker=card.kicker, columns=list(card.columns), footer=card.footer)
        cache.set(key, data, CACHE_SECONDS)
    response = HttpResponse(data, content_type="image/png")
    response["Cache-Control"] = f"public, max-age={BROWSER_CACHE_SECONDS}"
    return response


def _metric(name: str, value: Interval | None, digits: int = 1) -> share.Metric:
    """A lane's median as a card metric, its interval (or its run count) in the label."""
    if value is None or value.n == 0 or value.median is None:
        return share.Metric(name, "—")
    if not value.has_interval:
        return share.Metric(f"{name} · {runs_text(value.n)}", _fmt(value.median, digits))
    interval = f"95% CI {_fmt(value.low, digits)}–{_fmt(value.high, digits)}"
    return share.Metric(f"{name} · {interval}", _fmt(value.median, digits))


@require_safe
def stack_image(request: HttpRequest, pk: int) -> HttpResponse:
    return _png(stack_card(request, pk))


def stack_card(request: HttpRequest, pk: int) -> share.Card:
    stack = get_public_stack(pk)
    filters, hw = stack_filters(request)
    runs = filtered_runs(Run.objects.published().filter(stack=stack), filters, hw)
    proof = summaries.evidence(summaries.run_rows(runs), summaries.attempts_of([stack.id]))
    scope = proof.scopes[0] if proof.scopes else None
    focus = scope.lanes[0] if scope and scope.lanes else None
    metrics = [_metric("quality, all hardware", scope.quality if scope else None)]
    if focus:
        figures = focus.figures
        metrics += [
            _metric("decode tok/s", figures.decode),
            _metric("TTFT ms", figures.ttft, 0),
            _metric("prefill tok/s", figures.prefill, 0),
            share.Metric("runs on this hardware", str(focus.run_count)),
        ]
        if focus.attempts is not None:
            metrics.append(share.Metric("attempts (best of)", str(focus.attempts)))
        subtitle = f"on {focus.hardware}"
    else:
        subtitle = "no runs on a known hardware class"
    others = len(scope.lanes) - 1 if scope else 0
    footer = f"{proof.run_count} runs from {proof.submitter_count} submitters"
    if others > 0:
        footer += f" · speeds on this hardware only; {others} other class{'es' * (others > 1)}"
    column = share.Column(stack.label, subtitle, tuple(metrics))
    return share.Card("Stack", (column,), footer + " · BenchLoop")


@require_safe
def run_image(request: HttpRequest, pk: int) -> HttpResponse:
    return _png(run_card(request, pk))


def run_card(request: HttpRequest, pk: int) -> share.Card:
    run = get_object_or_404(Run.objects.select_related("stack", "hardware_class"), pk=pk)
    if not run.published:
        raise Http404("no such run")
    hardware = run.hardware_class.label if run.hardware_class else "unclassified hardware"
    subtitle = f"{hardware} · {run.started_at:%Y-%m-%d}"
    metrics = (
        share.Metric("overall", _fmt(run.overall_score)),
        share.Metric("quality", _fmt(run.quality_score)),
        share.Metric("decode tok/s", _fmt(run.decode_tps)),
        share.Metric("TTFT ms", _fmt(run.ttft_ms, 0)),
        share.Metric("prefill tok/s", _fmt(run.prefill_tps, 0)),
        share.Metric("reliability", _fmt(run.reliability_score)),
    )
    column = share.Column(run.stack.label, subtitle, metrics)
    evidence = "verified" if run.is_verified else "self-reported"
    footer = f"One run · {run.get_score_scale_display()} · {evidence} · BenchLoop"
    return share.Card("Run", (column,), footer)


@require_safe
def compare_image(request: HttpRequest) -> HttpResponse:
    return _png(compare_card(request))


def compare_card(request: HttpRequest) -> share.Card:
    ids = parse_stack_ids(request)
    stacks = {s.id: s for s in Stack.objects.filter(id__in=ids, best_run__isnull=False)}
    ordered = [stacks[i] for i in ids if i in stacks]
    if len(ordered) < 2:
        raise Http404("compare needs two stacks")
    found = comparison(request, ordered)
    on = found.chosen_label
    columns = []
    for side in found.sides:
        lane = side.lane
        columns.append(
            share.Column(
                side.label,
                f"{lane.run_count} runs on {on}" if lane else "no runs in common",
                (
                    _metric("quality, all hardware", side.quality),
                    _metric("decode tok/s", lane.figures.decode if lane else None),
                    _metric("TTFT ms", lane.figures.ttft if lane else None, 0),
                    share.Metric(
                        "attempts (best of)",
                        str(lane.attempts) if lane and lane.attempts is not None else "—",
                    ),
                ),
            )
        )
    footer = f"Speeds on {on} only · BenchLoop" if on else "No hardware in common · BenchLoop"
    return share.Card("Compare", tuple(columns), footer)


# The card each share-image route draws, by URL name (for tests that read what is drawn).
CARDS = {"stack_image": stack_card, "run_image": run_card, "compare_image": compare_card}
