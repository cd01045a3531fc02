"""Where a run stands (issue 29): among its stack's other runs on its hardware class, and against
the class's other stacks of similar size.

Each comparison stays inside one hardware class, one score scale, one benchmark version and one
measurement method (runs.methods; a stack's method is part of its identity), and reads only the
runs a lane counts (runs.lanes.counted_runs). Figures come from the runs themselves rather than
from stored Lane rows, whose thresholds for a median may change.

A percentile is the run's place by rank ÷ (n + 1) (ties share their middle rank), so the 4th
lowest of 9 is p40, and no run of a small lane is called p100 or p0. It needs the run and at least
two others; with one other the run is compared with it plainly, with none it says so.

Who may see a run's standing (its owner, or everyone once published) is the caller's rule.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, cast

from django.db.models import F, Q, QuerySet
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce

from runs import methods, roofline
from runs.figures import Interval
from runs.lanes import counted_runs, lane_version
from runs.models import Run, RunQuerySet, ScoreScale, Stack

if TYPE_CHECKING:  # a type of django-stubs, a development dependency
    from django_stubs_ext import WithAnnotations

# What a lane ranks by (runs.lanes: a hardware lane's best_score): the overall score on the
# scored scales, the decode rate on the speed-only scale. Higher is better for both.
RANKED_BY: dict[str, tuple[str, str, str]] = {
    ScoreScale.V3: ("overall", "overall score", ""),
    ScoreScale.V2: ("overall", "overall score", ""),
    ScoreScale.SPEED_ONLY: ("decode", "decode speed", "tok/s"),
}
# "Similar size": active parameters within this factor of the run's model, either way.
SIMILAR_FACTOR = 1.5
# A percentile needs this many figures, the run's included.
MIN_PERCENTILE_N = 3
SCALE_WORDS: dict[str, str] = {
    ScoreScale.V3: "v3",
    ScoreScale.V2: "legacy v2",
    ScoreScale.SPEED_ONLY: "speed-only",
}


def _figure_expression(name: str) -> Combinable:
    if name == "decode":
        return Coalesce("decode_tps_median", "decode_tps_mean")
    return F("overall_score")


@dataclass(frozen=True)
class Place:
    """Where a value falls among others' (higher is better)."""

    value: float
    others: int
    below: int
    level: int

    @classmethod
    def among(cls, value: float, others: list[float]) -> Place:
        below = sum(1 for other in others if other < value)
        level = sum(1 for other in others if other == value)
        return cls(value, len(others), below, level)

    @property
    def n(self) -> int:
        return self.others + 1

    @property
    def percentile(self) -> int | None:
        if self.n < MIN_PERCENTILE_N:
            return None
        rank = self.below + 1 + self.level / 2  # the middle of the ranks it ties for
        return round(100 * rank / (self.n + 1))


@dataclass
class LaneStanding:
    """The run among its stack's other counted runs on its class (same scale and version)."""

    place: Place
    others_median: float | None


@dataclass
class SimilarStanding:
    """The run's figure among the medians of the class's other stacks of similar size."""

    active_b: float
    low_b: float
    high_b: float
    place: Place | None
    # With a single other stack: its label and median, to compare with plainly.
    only: tuple[str, float] | None = None


@dataclass
class Standing:
    run: Run
    figure: str = ""
    figure_label: str = ""
    unit: str = ""
    value: float | None = None
    lane: LaneStanding | None = None
    similar: SimilarStanding | None = None
    note: str = ""
    sentences: list[str] = field(default_factory=list)

    @property
    def placed(self) -> bool:
        return self.lane is not None


def _fmt(value: float, unit: str) -> str:
    text = f"{value:,.1f}"
    return f"{text} {unit}" if unit else text


def _a(label: str) -> str:
    return f"an {label}" if label[:1] in "aeiou" else f"a {label}"


def _compared(value: float, other: float, figure: str) -> str:
    if value == other:
        return "level with it"
    if figure == "decode":
        return "faster" if value > other else "slower"
    return "higher" if value > other else "lower"


def _note(run: Run) -> str:
    if run.published:
        return ""
    submission = getattr(run, "submission", None)
    if submission is not None and submission.status in ("pending", "flagged"):
        return (
            "This run waits for review: these are the places it would take once approved, "
            "among the runs published now."
        )
    return (
        "This run is not published, so no lane counts it: these are the places it would take "
        "if it were, among the runs published now."
    )


def standing_of(run: Run) -> Standing:
    """Where ``run`` stands; its sentences say why wherever it cannot be placed."""
    found = Standing(run=run, note=_note(run))
    klass = run.hardware_class
    if klass is None or not klass.has_speed:
        # Runs are compared within one class of machine only.
        found.sentences.append(
            "This run's hardware was not recorded, so it is not placed against other runs: "
            "they are compared within one class of machine only."
            if klass is not None
            else "This run has no hardware class, so it is not placed against other runs: "
            "they are compared within one class of machine only."
        )
        return found
    if run.score_scale == ScoreScale.V3 and not run.comparable:
        found.sentences.append(
            "This run is not comparable (it skipped or changed part of the benchmark), so it "
            "is not placed against other runs."
        )
        return found
    name, label, unit = RANKED_BY.get(run.score_scale, RANKED_BY[ScoreScale.V3])
    value = run.decode_tps if name == "decode" else run.overall_score
    found.figure, found.figure_label, found.unit, found.value = name, label, unit, value
    if value is None:
        found.sentences.append(f"This run has no {label} to place against other runs.")
        return found
    found.lane = _lane(run, name, value)
    found.sentences.append(_lane_sentence(found, klass.label))
    found.similar = _similar(run, name, value)
    found.sentences.extend(_similar_sentences(found, klass.label))
    return found


class _Figure(TypedDict):
    """What _peers annotates."""

    figure: float | None


def _peers(run: Run, name: str) -> QuerySet[WithAnnotations[Run, _Figure]]:
    """The counted runs of the run's class, scale and version with their figure, not the run."""
    counted: RunQuerySet = counted_runs(Run)  # (runs.lanes reads historical models too: Any)
    # The annotation is _Figure by construction; django-stubs name the type they infer apart
    # from any declared TypedDict (as leaderboard.queries.newest_approved says).
    peers = cast(
        "QuerySet[WithAnnotations[Run, _Figure]]",
        counted.of_version(run.score_scale, lane_version(run))
        .filter(hardware_class_id=run.hardware_class_id)
        .exclude(pk=run.pk)
        .annotate(figure=_figure_expression(name)),
    )
    return peers.filter(figure__isnull=False)


def _lane(run: Run, name: str, value: float) -> LaneStanding:
    others = list(_peers(run, name).filter(stack_id=run.stack_id).values_list("figure", flat=True))
    median = Interval.of(others).median  # the lane rule (runs.figures), the run left out
    return LaneStanding(Place.among(value, others), median)


def _lane_sentence(found: Standing, where: str) -> str:
    lane, run = found.lane, found.run
    assert lane is not None and found.value is not None
    value = _fmt(found.value, found.unit)
    place = lane.place
    if place.others == 0:
        return (
            f"No other run of this stack on {where} (on this scale and benchmark version) to "
            "place it against yet."
        )
    if place.others == 1:
        assert lane.others_median is not None
        other = _fmt(lane.others_median, found.unit)
        compared = _compared(found.value, lane.others_median, found.figure)
        return (
            f"The one other run of this stack on {where} has {_a(found.figure_label)} of {other}; "
            f"this run's {value} is {compared}. Two runs are too few for a percentile."
        )
    verb = "is" if run.published else "would be"
    assert lane.others_median is not None
    return (
        f"This run {verb} p{place.percentile} of {place.n} runs of this stack on {where} by "
        f"{found.figure_label} ({value}, against a median of "
        f"{_fmt(lane.others_median, found.unit)} for the other {place.others})."
    )


def _active_b(model_id: str, params_b: float | None) -> float | None:
    weights = roofline.model_weights(model_id, params_b)
    return weights.active_b if weights else None


def _similar(run: Run, name: str, value: float) -> SimilarStanding | None:
    active = _active_b(run.stack.model_id, run.stack.params_b)
    if not active:
        return None
    low, high = active / SIMILAR_FACTOR, active * SIMILAR_FACTOR
    rows = (
        _peers(run, name)
        .filter(stack__method=run.stack.method)
        .exclude(stack_id=run.stack_id)
        # A model's active parameters never exceed its total: smaller totals cannot qualify.
        .filter(Q(stack__params_b__gte=low) | Q(stack__params_b__isnull=True))
        .values_list("stack_id", "stack__model_id", "stack__params_b", "figure")
        .order_by()
    )
    figures: dict[int, list[float]] = defaultdict(list)
    sizes: dict[int, float | None] = {}
    for stack_id, model_id, params_b, figure in rows.iterator(chunk_size=2000):
        if stack_id not in sizes:
            sizes[stack_id] = _active_b(model_id, params_b)
        size = sizes[stack_id]
        if size is not None and low <= size <= high:
            figures[stack_id].append(figure)
    # Each stack's lane median, by the rule the board ranks with (runs.figures).
    medians = {
        stack_id: median
        for stack_id, values in figures.items()
        if (median := Interval.of(values).median) is not None
    }
    similar = SimilarStanding(active, low, high, place=None)
    if len(medians) == 1:
        ((stack_id, median),) = medians.items()
        similar.only = (Stack.objects.get(pk=stack_id).label, median)
    elif medians:
        similar.place = Place.among(value, list(medians.values()))
    return similar


def _size(billions: float) -> str:
    if billions < 1:
        return f"{billions * 1000:.3g}M"
    return f"{billions:.3g}B" if billions < 100 else f"{billions:,.0f}B"


def _above(place: Place, label: str) -> str:
    """Which of the others' medians the run's figure is above, in words."""
    if place.level == 0 and place.below in (0, place.others):
        return f"{'above' if place.below else 'below'} the median {label} of every one"
    level = f", level with {place.level}" if place.level else ""
    return f"above the median {label} of {place.below} of them{level}"


def _similar_sentences(found: Standing, where: str) -> list[str]:
    run, similar = found.run, found.similar
    if similar is None:
        return [
            "This model's parameter count is not known, so it is not set against other "
            "stacks by size."
        ]
    assert found.value is not None
    value = _fmt(found.value, found.unit)
    version = (
        methods.speed_version_label(run.speed_version)
        if run.score_scale == ScoreScale.SPEED_ONLY
        else f"benchmark {run.benchmark_version or 'version not recorded'}"
    )
    scope = (
        f"Similar size: {_size(similar.low_b)} to {_size(similar.high_b)} active parameters, "
        f"within {SIMILAR_FACTOR:g}× of this model's {_size(similar.active_b)}. Compared only "
        f"with runs on the {SCALE_WORDS.get(run.score_scale, run.score_scale)} scale, "
        f"{version}, measured by {methods.method_label(run.stack.method)}, as this one."
    )
    if similar.only is not None:
        label, median = similar.only
        compared = _compared(found.value, median, found.figure)
        first = (
            f"The one other stack of similar size on {where}, {label}, has a median "
            f"{found.figure_label} of {_fmt(median, found.unit)}; this run's {value} is "
            f"{compared}."
        )
    elif similar.place is None:
        first = f"No other stack of similar size has runs on {where} to set this run against yet."
    else:
        place = similar.place
        first = (
            f"Against {place.others} other stacks of similar size on {where}, this run's "
            f"{value} would be p{place.percentile}: {_above(place, found.figure_label)}."
        )
    return [first, scope]
