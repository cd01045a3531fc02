"""Per-stack evidence for the stack and compare pages: every run, spread, suites, trend."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Avg, Count, Max, Min, Sum
from django.urls import reverse

from leaderboard import charts
from leaderboard.stats import Box, box
from runs.models import Run, RunQuerySet, ScoreScale, SuiteResult
from submissions.names import imported_label

# Cap on the runs drawn per stack: plenty for a distribution, bounded for a hot stack.
MAX_RUNS = 2000
RUN_VALUES = (
    "id",
    "stack_id",
    "score_scale",
    "comparable",
    "overall_score",
    "quality_score",
    "speed_score",
    "reliability_score",
    "value_score",
    "decode_tps_median",
    "decode_tps_mean",
    "decode_tps_stdev",
    "speed_sample_count",
    "prefill_tps_median",
    "ttft_ms_median",
    "engine_version",
    "started_at",
    "is_verified",
    "hardware__gpu_model",
    "hardware__gpu_count",
    "hardware__cpu_model",
    "submission__submitter__username",
    "submission__submitter_name",
)
SCORE_FIELDS = (
    ("overall_score", "Overall"),
    ("quality_score", "Quality"),
    ("speed_score", "Speed"),
    ("reliability_score", "Reliability"),
)
# Which run stands for a stack: comparable v3 first, then legacy v2, then speed-only
# (the same order runs.services uses for Stack.best_run).
_SCALE_ORDER = ((ScoreScale.V3, True), (ScoreScale.V2, None), (ScoreScale.SPEED_ONLY, None))


def submitter_of(row: dict) -> str:
    """The public credit, as Submission.display_submitter words it."""
    if row["submission__submitter__username"]:
        return row["submission__submitter__username"]
    if row["submission__submitter_name"]:
        return imported_label(row["submission__submitter_name"])
    return "anonymous"


def run_rows(runs: RunQuerySet) -> list[dict]:
    """Narrow dicts of the given runs, newest first, capped at MAX_RUNS per query."""
    rows = list(runs.order_by("-started_at", "-id").values(*RUN_VALUES)[:MAX_RUNS])
    for row in rows:
        row["submitter"] = submitter_of(row)
        row["decode"] = (
            row["decode_tps_median"]
            if row["decode_tps_median"] is not None
            else row["decode_tps_mean"]
        )
    return rows


def representative(rows: list[dict]) -> dict | None:
    """The best run by the leaderboard's own rule, or None."""
    for scale, comparable in _SCALE_ORDER:
        candidates = [
            r
            for r in rows
            if r["score_scale"] == scale and (comparable is None or r["comparable"] == comparable)
        ]
        if candidates:
            key = "decode" if scale == ScoreScale.SPEED_ONLY else "overall_score"
            return max(
                candidates,
                key=lambda r: (r[key] is not None, r[key] or 0, r["started_at"], -r["id"]),
            )
    return None


@dataclass
class StackEvidence:
    """Everything measured about one stack, from its published runs."""

    rows: list[dict]
    best: dict | None
    decode: Box | None
    scores: dict[str, Box | None] = field(default_factory=dict)
    by_submitter: list[tuple[str, int]] = field(default_factory=list)

    @property
    def run_count(self) -> int:
        return len(self.rows)

    @property
    def submitter_count(self) -> int:
        return len(self.by_submitter)

    @property
    def best_of(self) -> int:
        """Runs behind the displayed best, by the submitter who produced it."""
        if not self.best:
            return 0
        return dict(self.by_submitter).get(self.best["submitter"], 0)


def evidence(rows: list[dict]) -> StackEvidence:
    scored = [r for r in rows if r["score_scale"] == ScoreScale.V3] or rows
    return StackEvidence(
        rows=rows,
        best=representative(rows),
        decode=box(r["decode"] for r in rows),
        scores={name: box(r[name] for r in scored) for name, _ in SCORE_FIELDS},
        by_submitter=Counter(r["submitter"] for r in rows).most_common(),
    )


def suite_table(runs: RunQuerySet) -> dict[int, dict[str, dict]]:
    """{stack id: {suite: mean/min/max score, runs, pass rate}} over the given runs."""
    rows = (
        SuiteResult.objects.filter(run__in=runs)
        .values("run__stack_id", "suite")
        .annotate(
            mean=Avg("score"),
            low=Min("score"),
            high=Max("score"),
            runs=Count("run_id"),
            passed=Sum("pass_count"),
            tasks=Sum("task_count"),
        )
        .order_by("suite")
    )
    table: dict[int, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        row["pass_rate"] = 100.0 * row["passed"] / row["tasks"] if row["tasks"] else None
        table[row["run__stack_id"]][row["suite"]] = row
    return table


def decode_strip(rows: list[dict], *, group_by: str = "submitter", limit: int = 8):
    """Decode tok/s of every run, one lane per submitter (most active first) plus 'all runs'."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row[group_by]].append(row)
    ranked = sorted(groups.items(), key=lambda item: -len(item[1]))
    lanes = [("All runs", [dot(r, r["decode"], series=0) for r in rows])]
    for index, (name, members) in enumerate(ranked[:limit], start=1):
        lanes.append((name, [dot(r, r["decode"], series=index) for r in members]))
    return charts.strip(lanes, unit="decode tok/s", log=True)


def score_strip(rows: list[dict]):
    scored = [r for r in rows if r["score_scale"] != ScoreScale.SPEED_ONLY]
    if not any(r["overall_score"] is not None for r in scored):
        return None
    lanes = [
        (label, [dot(r, r[name], series=i) for r in scored if r[name] is not None])
        for i, (name, label) in enumerate(SCORE_FIELDS)
    ]
    return charts.strip(lanes, unit="score (0–100)", fixed=(0, 100))


def dot(row: dict, value, *, series: int) -> dict:
    when = row["started_at"].strftime("%Y-%m-%d")
    shown = f"{value:.1f}" if value is not None else "—"
    return {
        "value": value,
        "label": f"{shown} · {row['submitter']} · {when}",
        "href": reverse("leaderboard:run", args=[row["id"]]),
        "series": series,
    }


def engine_trend(rows: list[dict], metric: str = "decode", *, unit: str = "decode tok/s"):
    """Median of a metric per engine version, versions in order of first appearance."""
    first_seen: dict[str, object] = {}
    values: dict[str, list[float]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r["started_at"]):
        version = row["engine_version"] or "unknown"
        first_seen.setdefault(version, row["started_at"])
        if row[metric] is not None:
            values[version].append(row[metric])
    ordered = sorted(first_seen, key=lambda v: first_seen[v])
    return charts.trend([(v, values[v]) for v in ordered], unit=unit)


def published_runs_of(stack_ids: list[int]) -> RunQuerySet:
    return Run.objects.published().filter(stack_id__in=stack_ids)


def best_first(rows: list[dict]) -> list[dict]:
    return sorted(
        rows,
        key=lambda r: (r["overall_score"] is None, -(r["overall_score"] or 0), -r["id"]),
    )
