"""Per-stack evidence for the stack, compare and run pages: lanes, suites, strips and trends.

Every speed figure here belongs to one hardware class (runs.lane_rows groups the runs); quality is
pooled across machines and labelled so. Charts draw one scope at a time: one score scale, one
benchmark version and one profile, from the runs that count (comparable ones on v3).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Avg, Count, Max, Min, Sum
from django.urls import reverse

from leaderboard import charts
from runs import lane_rows as lane_rules
from runs.figures import Interval
from runs.lane_rows import Lane, LaneKey, ScopeKey
from runs.models import Lane as StoredLane
from runs.models import Run, RunQuerySet, ScoreScale, SuiteResult
from runs.names import imported_label
from worker.rules.scoring import SPEED_SUITES

# Cap on the runs drawn per stack: plenty for a distribution, bounded for a hot stack.
MAX_RUNS = 2000
RUN_VALUES = (
    "id",
    "stack_id",
    "hardware_class_id",
    "hardware_class__label",
    "hardware_class__slug",
    "score_scale",
    "benchmark_version",
    "speed_version",
    "profile",
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
    "prefill_tps_mean",
    "ttft_ms_median",
    "ttft_ms_mean",
    "engine_version",
    "started_at",
    "is_verified",
    "submission__submitter__username",
    "submission__submitter_name",
)
SCALE_NAMES = dict(ScoreScale.choices)
MAX_CHART_LANES = 12
MAX_DOTS = 60  # dots drawn per strip lane; its box and median use every run

# A run's RUN_VALUES, with its submitter and headline figures added (run_rows): the dicts
# runs.lane_rows groups.
RunRow = dict[str, Any]
# (stack id, hardware class id, score scale, benchmark version): a stored lane's key.
AttemptKey = tuple[int, int, str, str]


def submitter_of(row: RunRow) -> str:
    """The public credit, as Submission.display_submitter words it."""
    username: str | None = row["submission__submitter__username"]
    if username:
        return username
    if row["submission__submitter_name"]:
        return imported_label(row["submission__submitter_name"])
    return "anonymous"


def run_rows(runs: RunQuerySet) -> list[RunRow]:
    """Narrow dicts of the given runs, newest first, capped at MAX_RUNS per query."""
    rows = list(runs.order_by("-started_at", "-id").values(*RUN_VALUES)[:MAX_RUNS])
    for row in rows:
        row["submitter"] = submitter_of(row)
        lane_rules.with_headlines(row)
    return rows


@dataclass
class ShownLane:
    """A lane as a page shows it: its figures, its class, its best run and its attempts."""

    figures: Lane
    hardware: str
    slug: str
    best: RunRow | None
    attempts: int | None = None
    # (rank, rows) on the class's board, where the page shows every run (queries.lane_place).
    place: tuple[int, int] | None = None

    @property
    def run_count(self) -> int:
        return self.figures.run_count

    @property
    def scope(self) -> ScopeKey:
        return self.figures.scope

    @property
    def rows(self) -> list[RunRow]:
        return self.figures.rows


@dataclass
class Scope:
    """One score scale and benchmark version: the lanes on it and its quality, pooled."""

    key: ScopeKey
    lanes: list[ShownLane]
    quality: Interval

    @property
    def title(self) -> str:
        scale, version = self.key
        name = SCALE_NAMES.get(scale, scale)
        return f"{name}, benchmark {version}" if version else name


@dataclass
class StackEvidence:
    """Everything measured about one stack (or one side of a compare page), from its runs."""

    rows: list[RunRow]
    scopes: list[Scope]
    unclassified: int  # counted runs on no hardware class, so in no lane
    by_submitter: list[tuple[str, int]] = field(default_factory=list)

    @property
    def run_count(self) -> int:
        return len(self.rows)

    @property
    def submitter_count(self) -> int:
        return len(self.by_submitter)

    @property
    def lanes(self) -> list[ShownLane]:
        return [lane for scope in self.scopes for lane in scope.lanes]

    def lane(self, key: LaneKey) -> ShownLane | None:
        return next((x for x in self.lanes if x.figures.key == key), None)

    def scope(self, key: ScopeKey) -> Scope | None:
        return next((s for s in self.scopes if s.key == key), None)


def _scope_order(key: ScopeKey) -> tuple[int, tuple[int, ...]]:
    """v3 first, then legacy v2, then speed only; newer benchmark versions first."""
    order: dict[str, int] = {ScoreScale.V3: 0, ScoreScale.V2: 1, ScoreScale.SPEED_ONLY: 2}
    version = tuple(int(p) if p.isdigit() else 0 for p in key[1].split("."))
    return (order.get(key[0], 3), tuple(-p for p in version))


def evidence(rows: list[RunRow], attempts: dict[AttemptKey, int] | None = None) -> StackEvidence:
    """One stack's rows grouped into scopes and lanes; attempts as attempts_of gives them."""
    attempts = attempts or {}
    quality = lane_rules.pooled_quality(rows)
    shown: dict[ScopeKey, list[ShownLane]] = defaultdict(list)
    for found in lane_rules.lanes(rows):
        first = found.rows[0]
        stack_id = first["stack_id"]
        shown[found.scope].append(
            ShownLane(
                figures=found,
                hardware=first["hardware_class__label"],
                slug=first["hardware_class__slug"],
                best=found.best,
                attempts=attempts.get((stack_id, *found.key)),
            )
        )
    scopes = [
        Scope(key, shown.get(key, []), quality[key]) for key in sorted(quality, key=_scope_order)
    ]
    unclassified = sum(1 for r in rows if lane_rules.counts(r) and lane_rules.lane_key(r) is None)
    return StackEvidence(
        rows=rows,
        scopes=scopes,
        unclassified=unclassified,
        by_submitter=Counter(r["submitter"] for r in rows).most_common(),
    )


def stored_interval(lane: StoredLane | None, name: str) -> Interval | None:
    """A stored lane's figure as an Interval (its n is the lane's run count)."""
    if lane is None:
        return None
    return Interval(
        lane.run_count,
        getattr(lane, f"{name}_median"),
        getattr(lane, f"{name}_low"),
        getattr(lane, f"{name}_high"),
    )


@dataclass
class StoredRow:
    """A stored lane on one class with its stack's quality across all hardware (model page)."""

    lane: StoredLane
    pooled: StoredLane | None
    stack: object = None
    label: str = ""

    @property
    def decode(self) -> Interval | None:
        return stored_interval(self.lane, "decode")

    @property
    def ttft(self) -> Interval | None:
        return stored_interval(self.lane, "ttft")

    @property
    def quality(self) -> Interval:
        return stored_interval(self.pooled, "quality") or Interval(0)

    def order(self) -> tuple[tuple[int, tuple[int, ...]], bool, float, float, int]:
        quality, decode = self.quality.median, self.lane.decode_median
        return (
            _scope_order((self.lane.score_scale, self.lane.benchmark_version or "")),
            quality is None,
            -(quality or 0),
            -(decode or 0),
            self.lane.stack_id,
        )


def attempts_of(stack_ids: Iterable[int]) -> dict[AttemptKey, int]:
    """{(stack id, class id, scale, version): uploads} from the stored lanes, which count every
    upload of a stack on a class, flagged, rejected and withdrawn ones included."""
    rows = StoredLane.objects.filter(
        stack_id__in=list(stack_ids), hardware_class__isnull=False
    ).values_list(
        "stack_id", "hardware_class_id", "score_scale", "benchmark_version", "attempt_count"
    )
    return {(s, c, scale, version or ""): n for s, c, scale, version, n in rows}


def chart_rows(
    proof: StackEvidence, scope: ScopeKey, profile: str = ""
) -> tuple[list[RunRow], str]:
    """The runs one chart may draw together: one scope, one profile (the one asked for, else
    the one with the most runs), counted runs only; and that profile."""
    rows = [
        r
        for r in proof.rows
        if lane_rules.counts(r) and lane_rules.scope_key(r) == scope and r["hardware_class_id"]
    ]
    if not profile:
        common = Counter(r["profile"] for r in rows).most_common(1)
        profile = common[0][0] if common else ""
    return [r for r in rows if r["profile"] == profile], profile


def _by_class(rows: list[RunRow]) -> list[tuple[str, list[RunRow]]]:
    """(class label, its rows), the classes with most runs first, at most MAX_CHART_LANES."""
    groups: dict[int, list[RunRow]] = defaultdict(list)
    for row in rows:
        groups[row["hardware_class_id"]].append(row)
    ranked = sorted(groups.values(), key=lambda members: -len(members))[:MAX_CHART_LANES]
    return [(members[0]["hardware_class__label"], members) for members in ranked]


def strip_lane(
    label: str, members: list[RunRow], key: str, series: int, href: str
) -> tuple[str, list[charts.StripItem], list[float | None]]:
    """(label, dots, every value) for a strip lane: a busy lane draws MAX_DOTS of its runs,
    spread evenly over its range (the lowest and highest always), its box uses them all."""
    present = sorted((r for r in members if r[key] is not None), key=lambda r: r[key])
    shown = present
    if len(present) > MAX_DOTS:
        step = (len(present) - 1) / (MAX_DOTS - 1)
        shown = [present[round(i * step)] for i in range(MAX_DOTS)]
    dots = [dot(r, r[key], series=series, href=href) for r in shown]
    return label, dots, [r[key] for r in present]


def decode_strip(rows: list[RunRow]) -> charts.Strip | None:
    """Decode tok/s of every run, one lane per hardware class: classes are never pooled."""
    href = run_href()
    lanes = [
        strip_lane(label, members, "decode", i, href)
        for i, (label, members) in enumerate(_by_class(rows))
    ]
    return charts.strip(lanes, unit="decode tok/s", log=True)


def score_strip(rows: list[RunRow]) -> charts.Strip | None:
    """Quality pooled across hardware (labelled so), then the overall score, which includes
    speed, one lane per hardware class."""
    if not any(r["quality_score"] is not None for r in rows):
        return None
    href = run_href()
    lanes: list[charts.StripLane] = [
        strip_lane("Quality · all hardware", rows, "quality_score", 0, href)
    ]
    for i, (label, members) in enumerate(_by_class(rows), start=1):
        lanes.append(strip_lane(f"Overall · {label}", members, "overall_score", i, href))
    return charts.strip(lanes, unit="score (0–100)", fixed=(0, 100))


def run_href() -> str:
    """A run page's path with {} for its id: one reverse() per chart, not one per dot."""
    return reverse("leaderboard:run", args=[0]).replace("/0/", "/{}/")


def dot(row: RunRow, value: float | None, *, series: int, href: str = "") -> charts.StripItem:
    when = row["started_at"].strftime("%Y-%m-%d")
    shown = f"{value:.1f}" if value is not None else "—"
    return {
        "value": value,
        "label": f"{shown} · {row['submitter']} · {when}",
        "href": (href or run_href()).format(row["id"]),
        "series": series,
    }


def _versions(rows: list[RunRow]) -> list[str]:
    first_seen: dict[str, datetime] = {}
    for row in sorted(rows, key=lambda r: r["started_at"]):
        first_seen.setdefault(row["engine_version"] or "unknown", row["started_at"])
    return sorted(first_seen, key=lambda v: first_seen[v])


def class_trend(rows: list[RunRow]) -> charts.TrendLines | None:
    """Median decode tok/s per engine version, one line per hardware class."""
    versions = _versions(rows)
    series: list[tuple[str, list[tuple[str, list[float]]]]] = []
    for label, members in _by_class(rows):
        values: dict[str, list[float]] = defaultdict(list)
        for row in members:
            if row["decode"] is not None:
                values[row["engine_version"] or "unknown"].append(row["decode"])
        series.append((label, [(v, values.get(v, [])) for v in versions]))
    return charts.trend_lines(series, unit="decode tok/s")


def quality_trend(rows: list[RunRow]) -> charts.Trend | None:
    """Median quality per engine version, pooled across hardware (quality is the software's)."""
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row["quality_score"] is not None:
            values[row["engine_version"] or "unknown"].append(row["quality_score"])
    return charts.trend([(v, values.get(v, [])) for v in _versions(rows)], unit="quality")


def suite_table(runs: RunQuerySet) -> dict[int, dict[str, dict[str, Any]]]:
    """{stack id: {suite: mean/min/max score, runs, pass rate}} over the given runs, which may
    come from every machine: so the suites that score speed are left out (speed belongs to
    one hardware class, and the pages show it per class)."""
    rows = (
        SuiteResult.objects.filter(run__in=runs)
        .exclude(suite__in=SPEED_SUITES)
        .values("run__stack_id", "suite")
        .annotate(
            mean=Avg("score"),
            low=Min("score"),
            high=Max("score"),
            runs=Count("run_id"),
            passed=Sum("pass_count"),
            # django-stubs take `tasks` for SuiteResult's reverse relation; after values()
            # Django checks an annotation's name against the values() fields only.
            tasks=Sum("task_count"),  # type: ignore[no-redef]
        )
        .order_by("suite")
    )
    table: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        row["pass_rate"] = 100.0 * row["passed"] / row["tasks"] if row["tasks"] else None
        table[row["run__stack_id"]][row["suite"]] = row
    return table


def counted_in(runs: RunQuerySet, scope: ScopeKey, profile: str) -> RunQuerySet:
    """The runs of one chart scope, as a queryset (for the per-suite table)."""
    scale, version = scope
    runs = runs.of_version(scale, version).filter(profile=profile)
    return runs.filter(comparable=True) if scale == ScoreScale.V3 else runs


def published_runs_of(stack_ids: list[int]) -> RunQuerySet:
    return Run.objects.published().filter(stack_id__in=stack_ids)
