"""A lane's figures from plain run rows, for the pages that read runs themselves.

A lane is one stack on one hardware class, on one score scale and benchmark version. Speed (and
the overall score, which includes speed) belongs to the hardware class and is never pooled
across classes; quality does not depend on the machine and is pooled across every class of the
same scale and version. A figure is its runs' median, with an interval from three runs up
(runs.figures.Interval, the rule every surface uses).

The pages that read runs (stack, compare, run context, share images, the stack API) group them
here; runs.lanes keeps the stored Lane rows, and which runs count is its rule (counts_in_lane).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from runs.figures import Interval
from runs.lanes import counts_in_lane, version_column

V3 = "v3"
# (name on a lane, key in a run row); the row keys fall back to the mean as Run's properties do.
SPEED = (("decode", "decode"), ("prefill", "prefill"), ("ttft", "ttft"))

LaneKey = tuple[int, str, str]  # hardware class id, score scale, benchmark version
ScopeKey = tuple[str, str]  # score scale, benchmark version


def with_headlines(row: dict) -> dict:
    """Adds decode/prefill/ttft to a row of run values: the median, or the mean where only a
    mean was published (the same rule as Run.decode_tps and friends)."""
    for name, median, mean in (
        ("decode", "decode_tps_median", "decode_tps_mean"),
        ("prefill", "prefill_tps_median", "prefill_tps_mean"),
        ("ttft", "ttft_ms_median", "ttft_ms_mean"),
    ):
        row[name] = row[median] if row.get(median) is not None else row.get(mean)
    return row


def counts(row: dict) -> bool:
    """Whether a run row counts in its lane (runs.lanes.counts_in_lane)."""
    return counts_in_lane(row["score_scale"], bool(row["comparable"]))


def lane_key(row: dict) -> LaneKey | None:
    """The lane a counted run belongs to; None for a run with no hardware class (no lane)."""
    if row["hardware_class_id"] is None:
        return None
    return (row["hardware_class_id"], row["score_scale"], lane_version(row))


def scope_key(row: dict) -> ScopeKey:
    return (row["score_scale"], lane_version(row))


def lane_version(row: dict) -> str:
    """The version a run's lane is keyed by (runs.lanes.version_column)."""
    return row.get(version_column(row["score_scale"])) or ""


@dataclass
class Lane:
    """One stack on one hardware class (and scale and benchmark version), from its rows."""

    key: LaneKey
    rows: list[dict]
    decode: Interval
    prefill: Interval
    ttft: Interval
    overall: Interval
    submitters: int

    @property
    def run_count(self) -> int:
        return len(self.rows)

    @property
    def hardware_class_id(self) -> int:
        return self.key[0]

    @property
    def scope(self) -> ScopeKey:
        return self.key[1:]


def lane(key: LaneKey, rows: list[dict]) -> Lane:
    return Lane(
        key=key,
        rows=rows,
        **{name: Interval.of(r[column] for r in rows) for name, column in SPEED},
        overall=Interval.of(r["overall_score"] for r in rows),
        submitters=len({r["submitter"] for r in rows}),
    )


def lanes(rows: Iterable[dict]) -> list[Lane]:
    """The lanes of the given rows (one stack's, or several stacks' keyed apart by the
    caller), most runs first; runs that do not count or have no class are in none."""
    grouped: dict[LaneKey, list[dict]] = defaultdict(list)
    for row in rows:
        key = lane_key(row)
        if key is not None and counts(row):
            grouped[key].append(row)
    found = [lane(key, members) for key, members in grouped.items()]
    return sorted(found, key=lambda x: (-x.run_count, x.key))


def pooled_quality(rows: Iterable[dict]) -> dict[ScopeKey, Interval]:
    """Quality per scale and benchmark version, pooled across every machine (it does not
    depend on the machine), from the runs that count."""
    grouped: dict[ScopeKey, list[float | None]] = defaultdict(list)
    for row in rows:
        if counts(row):
            grouped[scope_key(row)].append(row["quality_score"])
    return {scope: Interval.of(values) for scope, values in grouped.items()}
