"""Share images (PNG) for stack, compare and run pages, cached by their content."""

from __future__ import annotations

import hashlib
import json

from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_safe

from leaderboard import share, summaries
from leaderboard.views.compare import parse_stack_ids
from leaderboard.views.pages import get_public_stack
from runs.models import Run, Stack

CACHE_SECONDS = 24 * 3600
BROWSER_CACHE_SECONDS = 3600


def _fmt(value: float | None, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}{unit}"


def _png(kicker: str, columns: list[share.Column], footer: str) -> HttpResponse:
    """Render once per distinct content: the cache key is a hash of everything drawn."""
    spec = json.dumps([kicker, [c.__dict__ for c in columns], footer], default=str)
    key = "share-png:" + hashlib.sha256(spec.encode()).hexdigest()
    data = cache.get(key)
    if data is None:
        data = share.render_card(kicker=kicker, columns=columns, footer=footer)
        cache.set(key, data, CACHE_SECONDS)
    response = HttpResponse(data, content_type="image/png")
    response["Cache-Control"] = f"public, max-age={BROWSER_CACHE_SECONDS}"
    return response


def _run_metrics(run: Run | dict | None, *, runs: int | None = None) -> tuple[share.Metric, ...]:
    def get(name: str):
        if run is None:
            return None
        return run.get(name) if isinstance(run, dict) else getattr(run, name)

    decode = get("decode_tps_median")
    if decode is None:
        decode = get("decode_tps_mean")
    metrics = [
        share.Metric("overall", _fmt(get("overall_score"))),
        share.Metric("quality", _fmt(get("quality_score"))),
        share.Metric("decode tok/s", _fmt(decode)),
        share.Metric("TTFT ms", _fmt(get("ttft_ms_median"), 0)),
        share.Metric("reliability", _fmt(get("reliability_score"))),
    ]
    if runs is not None:
        metrics.append(share.Metric("approved runs", str(runs)))
    return tuple(metrics)


def _hardware_label(row: dict) -> str:
    gpu = row.get("hardware__gpu_model")
    if gpu:
        count = row.get("hardware__gpu_count") or 1
        return f"{count}× {gpu}" if count > 1 else gpu
    return row.get("hardware__cpu_model") or "remote endpoint"


@require_safe
def stack_image(request: HttpRequest, pk: int) -> HttpResponse:
    stack = get_public_stack(pk)
    rows = summaries.run_rows(Run.objects.published().filter(stack=stack))
    proof = summaries.evidence(rows)
    best = proof.best or {}
    subtitle = f"best run on {_hardware_label(best)}" if best else "no scored runs"
    column = share.Column(stack.label, subtitle, _run_metrics(best, runs=proof.run_count))
    footer = f"{proof.run_count} runs from {proof.submitter_count} submitters · BenchLoop"
    return _png("Stack", [column], footer)


@require_safe
def run_image(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("stack", "hardware"), pk=pk)
    if not run.published:
        raise Http404("no such run")
    hardware = run.hardware.label if run.hardware else "remote endpoint"
    subtitle = f"{hardware} · {run.started_at:%Y-%m-%d}"
    column = share.Column(run.stack.label, subtitle, _run_metrics(run))
    evidence = "verified" if run.is_verified else "self-reported"
    return _png("Run", [column], f"{run.get_score_scale_display()} · {evidence} · BenchLoop")


@require_safe
def compare_image(request: HttpRequest) -> HttpResponse:
    ids = parse_stack_ids(request)
    stacks = {s.id: s for s in Stack.objects.filter(id__in=ids, best_run__isnull=False)}
    ordered = [stacks[i] for i in ids if i in stacks]
    if len(ordered) < 2:
        raise Http404("compare needs two stacks")
    rows = summaries.run_rows(summaries.published_runs_of([s.id for s in ordered]))
    columns = []
    for stack in ordered:
        mine = [r for r in rows if r["stack_id"] == stack.id]
        best = summaries.representative(mine) or {}
        metrics = _run_metrics(best)
        columns.append(
            share.Column(
                stack.model_id,
                " · ".join(part for part in (stack.quantization, stack.engine) if part),
                (metrics[0], metrics[1], metrics[2], metrics[3]),
            )
        )
    return _png("Compare", columns, "Best run of each stack · BenchLoop")
