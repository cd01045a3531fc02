"""Compare two to four stacks: every metric with deltas, suites, spreads and a noise verdict."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_safe

from leaderboard import charts, queries, stats, summaries
from leaderboard.filters import BoardFilters
from runs.models import Stack

MAX_STACKS = 4
PICKER_LIMIT = 20
# (key in a run row, label, decimals, higher is better, is a score)
METRICS = [
    ("overall_score", "Overall", 1, True, True),
    ("quality_score", "Quality", 1, True, True),
    ("speed_score", "Speed score", 1, True, True),
    ("reliability_score", "Reliability", 1, True, True),
    ("value_score", "Value", 1, True, True),
    ("decode", "Decode tok/s (best run)", 1, True, False),
    ("prefill_tps_median", "Prefill tok/s (best run)", 0, True, False),
    ("ttft_ms_median", "TTFT ms (best run)", 0, False, False),
]


def parse_stack_ids(request: HttpRequest) -> list[int]:
    """Stack ids from ?stacks=1,2 (also repeated ?stacks=1&stacks=2), first four, no repeats."""
    ids: list[int] = []
    for value in request.GET.getlist("stacks"):
        for part in value.split(","):
            part = part.strip()
            if part.isdigit() and len(part) < 12 and int(part) not in ids:
                ids.append(int(part))
    return ids[:MAX_STACKS]


def compare_url(ids: list[int], extra: str = "") -> str:
    query = "stacks=" + ",".join(str(i) for i in ids) if ids else ""
    if extra:
        query = f"{query}&{extra}" if query else extra
    return reverse("leaderboard:compare") + (f"?{query}" if query else "")


@dataclass
class Cell:
    value: float | None
    delta: float | None = None
    percent: float | None = None
    better: bool | None = None  # compared with the first stack, taking direction into account


@dataclass
class Side:
    stack: Stack
    proof: summaries.StackEvidence
    series: int
    remove_url: str = ""


def _cells(sides: list[Side], key: str, higher_is_better: bool, is_score: bool) -> list[Cell]:
    base = sides[0].proof.best
    cells = []
    for index, side in enumerate(sides):
        best = side.proof.best
        value = best.get(key) if best else None
        cell = Cell(value)
        # Scores on different scales are never compared; speed is comparable across scales.
        same_scale = bool(base and best and base["score_scale"] == best["score_scale"])
        comparable = same_scale or not is_score
        if index and comparable and value is not None and base and base.get(key) is not None:
            cell.delta = value - base[key]
            cell.percent = 100.0 * cell.delta / base[key] if base[key] else None
            if cell.delta:
                cell.better = (cell.delta > 0) == higher_is_better
        cells.append(cell)
    return cells


def noise_verdict(base: Side, other: Side) -> stats.NoiseTest | None:
    """Welch's t-test on decode tok/s: per-run medians when both stacks have two or more runs,
    otherwise the trial summaries of the two best runs."""
    a = [r["decode"] for r in base.proof.rows if r["decode"] is not None]
    b = [r["decode"] for r in other.proof.rows if r["decode"] is not None]
    if len(a) >= 2 and len(b) >= 2:
        return stats.welch_samples(a, b, basis="runs")
    best_a, best_b = base.proof.best, other.proof.best
    if not best_a or not best_b:
        return None
    fields = ("decode_tps_mean", "decode_tps_stdev", "speed_sample_count")
    if any(best_a.get(f) is None or best_b.get(f) is None for f in fields):
        return None
    return stats.welch(
        best_a["decode_tps_mean"],
        best_a["decode_tps_stdev"],
        best_a["speed_sample_count"],
        best_b["decode_tps_mean"],
        best_b["decode_tps_stdev"],
        best_b["speed_sample_count"],
        basis="samples",
    )


@require_safe
def compare(request: HttpRequest) -> HttpResponse:
    """Stacks side by side; with fewer than two, a picker to add more."""
    ids = parse_stack_ids(request)
    filters = BoardFilters.from_query(request.GET)
    run_filter = filters.run_filter_query().urlencode()
    canonical = compare_url(ids, run_filter)
    # Ticked rows arrive as ?stacks=1&stacks=2 (plus empty fields); share one clean link.
    if len(request.GET.getlist("stacks")) > 1 or any(v == "" for _, v in request.GET.items()):
        return redirect(canonical)
    stacks = {s.id: s for s in Stack.objects.filter(id__in=ids, best_run__isnull=False)}
    ordered = [stacks[i] for i in ids if i in stacks]
    context: dict = {"ids": [s.id for s in ordered], "filters": filters, "run_filter": run_filter}
    query = request.GET.get("find", "").strip()[:100]
    if len(ordered) < MAX_STACKS:
        context["picker_query"] = query
        context["picker"] = [
            (s, compare_url([*context["ids"], s.id], run_filter))
            for s in _picker(query, exclude=[s.id for s in ordered])
        ]
    if len(ordered) < 2:
        context["stacks"] = ordered
        return render(request, "leaderboard/compare.html", context)

    runs = summaries.published_runs_of([s.id for s in ordered])
    if filters.restricts_runs:
        runs = queries.restrict_runs(runs, filters)
    rows = summaries.run_rows(runs)
    per_stack: dict[int, list[dict]] = {s.id: [] for s in ordered}
    for row in rows:
        per_stack[row["stack_id"]].append(row)
    sides = [
        Side(
            stack,
            summaries.evidence(per_stack[stack.id]),
            index,
            compare_url([i for i in context["ids"] if i != stack.id], run_filter),
        )
        for index, stack in enumerate(ordered)
    ]
    suites = summaries.suite_table(runs)
    suite_names = sorted({name for table in suites.values() for name in table})
    context.update(
        stacks=ordered,
        sides=sides,
        metrics=[
            (label, digits, _cells(sides, key, higher, is_score))
            for key, label, digits, higher, is_score in METRICS
        ],
        spread=[(s.proof.decode, s.proof.run_count, s.proof.submitter_count) for s in sides],
        suite_rows=[
            (name, [suites.get(s.stack.id, {}).get(name) for s in sides]) for name in suite_names
        ],
        verdicts=[(side, noise_verdict(sides[0], side)) for side in sides[1:]],
        chart=charts.strip(
            [
                (
                    side.stack.label,
                    [summaries.dot(r, r["decode"], series=side.series) for r in side.proof.rows],
                )
                for side in sides
            ],
            unit="decode tok/s",
            log=True,
        ),
        scales_differ=len({s.proof.best["score_scale"] for s in sides if s.proof.best}) > 1,
        share_qs="stacks=" + ",".join(str(s.id) for s in ordered),
        share=_share(request, sides),
    )
    return render(request, "leaderboard/compare.html", context)


def _picker(query: str, *, exclude: list[int]) -> list[Stack]:
    stacks = Stack.objects.filter(best_run__isnull=False).exclude(id__in=exclude)
    if query:
        stacks = stacks.filter(model_id__icontains=query)
    return list(
        stacks.select_related("best_run").order_by(
            F("best_run__overall_score").desc(nulls_last=True), "id"
        )[:PICKER_LIMIT]
    )


def _share(request: HttpRequest, sides: list[Side]) -> dict:
    base = f"{request.scheme}://{request.get_host()}"
    ids = ",".join(str(side.stack.id) for side in sides)
    title = " vs ".join(side.stack.label for side in sides)
    parts = []
    for side in sides:
        best = side.proof.best or {}
        overall = best.get("overall_score")
        decode = side.proof.decode.median if side.proof.decode else None
        text = side.stack.model_id
        if overall is not None:
            text += f" overall {overall:.1f}"
        if decode is not None:
            text += f", {decode:.1f} tok/s"
        parts.append(text)
    return {
        "title": title,
        "description": "; ".join(parts) + ".",
        "url": f"{base}{reverse('leaderboard:compare')}?stacks={ids}",
        "image": f"{base}{reverse('leaderboard:compare_image')}?stacks={ids}",
    }
