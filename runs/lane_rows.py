"""A lane's figures from plain run rows, for the pages that read runs themselves.

A lane is one stack on one hardware class, on one score scale and benchmark version. Speed (and
the overall score, which includes speed) belongs to the hardware class and is never pooled
across classes; quality does not depend on the machine and is pooled across every class of the
same scale and version. A figure is its runs' median, with an interval from three runs up
(runs.figures.Interval, the rule every surface uses).

The pages that read runs (stack, compare, run context, share images, the stack API) group them
here; runs.lanes keeps the stored Lane rows and holds the rules: which runs count
(counts_in_lane), the version a lane is keyed by (lane_version) and a lane's figures
(aggregate).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from runs.figures import Interval
from runs.lanes import LaneRun, aggregate, counts_in_lane, lane_version

V3 = "v3"
# The figures of a class's lane here; quality is pooled across classes (pooled_quality).
LANE_FIGURES = ("decode", "prefill", "ttft", "overall")

LaneKey = tuple[int, str, str]  # hardware class id, score scale, benchmark version
ScopeKey = tuple[str, str]  # score scale, benchmark version


def with_headlines(row: dict[str, Any]) -> dict[str, Any]:
    """Adds decode/prefill/ttft to a row of run values: the median, or the mean where only a
    mean was published (the same rule as Run.decode_tps and friends)."""
    for name, median, mean in (
        ("decode", "decode_tps_median", "decode_tps_mean"),
        ("prefill", "prefill_tps_median", "prefill_tps_mean"),
        ("ttft", "ttft_ms_median", "ttft_ms_mean"),
    ):
        row[name] = row[median] if row.get(median) is not None else row.get(mean)
    return row


def counts(row: dict[str, Any]) -> bool:
    """Whether a run row counts in its lane (runs.lanes.counts_in_lane)."""
    return counts_in_lane(row["score_scale"], bool(row["comparable"]))


def lane_key(row: dict[str, Any]) -> LaneKey | None:
    """The lane a counted run belongs to; None for a run with no hardware class (no lane)."""
    if row["hardware_class_id"] is None:
        return None
    return (row["hardware_class_id"], row["score_scale"], lane_version(row))


def scope_key(row: dict[str, Any]) -> ScopeKey:
    return (row["score_scale"], lane_version(row))


def lane_run(row: dict[str, Any]) -> LaneRun:
    """A row (with_headlines applied) as runs.lanes.aggregate reads it."""
    return LaneRun(
        row["id"],
        row["overall_score"],
        row["quality_score"],
        row["decode"],
        row["prefill"],
        row["ttft"],
        row["started_at"],
        row["submitter"],
        row,
    )


@dataclass
class Lane:
    """One stack on one hardware class (and scale and benchmark version), from its rows."""

    key: LaneKey
    rows: list[dict[str, Any]]
    decode: Interval
    prefill: Interval
    ttft: Interval
    overall: Interval
    submitters: int
    # The lane's best run (runs.lanes.aggregate): the highest overall score, or the fastest
    # decode on the speed-only scale; ties go to the newest run.
    best: dict[str, Any]

    @property
    def run_count(self) -> int:
        return len(self.rows)

    @property
    def hardware_class_id(self) -> int:
        return self.key[0]

    @property
    def scope(self) -> ScopeKey:
        return self.key[1:]


def lane(key: LaneKey, rows: list[dict[str, Any]]) -> Lane:
    found = aggregate([lane_run(r) for r in rows], scale=key[1], pooled=False, figures=LANE_FIGURES)
    return Lane(
        key=key,
        rows=rows,
        **{name: found.figures[name] for name in LANE_FIGURES},
        submitters=found.submitters,
        best=found.best.source,
    )


def lanes(rows: Iterable[dict[str, Any]]) -> list[Lane]:
    """The lanes of the given rows (one stack's, or several stacks' keyed apart by the
    caller), most runs first; runs that do not count or have no class are in none."""
    grouped: dict[LaneKey, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        key = lane_key(row)
        if key is not None and counts(row):
            grouped[key].append(row)
    found = [lane(key, members) for key, members in grouped.items()]
    return sorted(found, key=lambda x: (-x.run_count, x.key))


def pooled_quality(rows: Iterable[dict[str, Any]]) -> dict[ScopeKey, Interval]:
    """Quality per scale and benchmark version, pooled across every machine (it does not
    depend on the machine), from the runs that count."""
    grouped: dict[ScopeKey, list[LaneRun]] = defaultdict(list)
    for row in rows:
        if counts(row):
            grouped[scope_key(row)].append(lane_run(row))
    return {
        scope: aggregate(runs, scale=scope[0], pooled=True, figures=("quality",)).figures["quality"]
        for scope, runs in grouped.items()
    }
