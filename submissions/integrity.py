"""Checks run on every upload; failures flag the run for a moderator, they never reject it."""

from __future__ import annotations

import statistics

from django.db.models import Q

from runs.importers.records import RunRecord
from runs.models import Run, ScoreScale

# Quality weights of the 3.0.0 profiles (the earlier product's published design).
V3_QUALITY_WEIGHTS = {
    "smoke": {"toolcall": 0.45, "reasonmath": 0.55},
    "core": {
        "toolcall": 0.20,
        "coding": 0.25,
        "dataextract": 0.15,
        "instructfollow": 0.15,
        "reasonmath": 0.25,
    },
    "full": {
        "toolcall": 0.12,
        "coding": 0.18,
        "dataextract": 0.10,
        "instructfollow": 0.10,
        "reasonmath": 0.15,
        "longcontext": 0.15,
        "agent": 0.20,
    },
}
# Beyond these no single-stream local run has been seen; such a number is a bug or a lie.
PHYSICAL_LIMITS = {"decode_tps_median": 3000.0, "prefill_tps_median": 200_000.0}
MIN_TTFT_MS = 1.0
ROBUST_Z_LIMIT = 3.5
MIN_PEERS = 3
SCORE_TOLERANCE = 0.05
PEER_METRICS = [
    ("decode_tps_median", "decode speed", "tok/s"),
    ("prefill_tps_median", "prefill speed", "tok/s"),
    ("ttft_ms_median", "time to first token", "ms"),
]


def check_run(record: RunRecord, *, model_key: str, gpu_model: str) -> list[str]:
    """Readable reasons to flag this run; an empty list means nothing looked wrong."""
    reasons = _physical(record) + _consistency(record)
    reasons += _against_peers(record, model_key=model_key, gpu_model=gpu_model)
    return reasons


def _physical(record: RunRecord) -> list[str]:
    reasons = []
    for field, limit in PHYSICAL_LIMITS.items():
        value = record.speed.get(field)
        if value is not None and value > limit:
            reasons.append(
                f"{field.replace('_', ' ')} of {value:,.0f} tok/s exceeds the physical "
                f"sanity bound of {limit:,.0f} tok/s"
            )
    ttft = record.speed.get("ttft_ms_median")
    if ttft is not None and 0 < ttft < MIN_TTFT_MS:
        reasons.append(f"time to first token of {ttft:.3f} ms is below {MIN_TTFT_MS} ms")
    return reasons


def _consistency(record: RunRecord) -> list[str]:
    """Recompute what the payload's own suites and tasks imply and compare."""
    reasons = []
    q, s, r = record.quality_score, record.speed_score, record.reliability_score
    if record.outcome != "complete" or None in (q, s, r, record.overall_score):
        return reasons
    has_speed = any(suite.suite == "speed" for suite in record.suites)
    if record.score_scale == ScoreScale.V3:
        expected = 0.70 * q + 0.25 * s + 0.05 * r if has_speed else 0.90 * q + 0.10 * r
    else:
        expected = 0.55 * q + 0.20 * s + 0.25 * r
    if abs(expected - record.overall_score) > SCORE_TOLERANCE + 0.01:
        reasons.append(
            f"overall score {record.overall_score:g} does not follow from quality "
            f"{q:g}, speed {s:g} and reliability {r:g} (expected {expected:.2f})"
        )
    weights = (
        V3_QUALITY_WEIGHTS.get(record.profile)
        if record.score_schema_version.startswith("3.0")
        else None
    )
    scores = {suite.suite: suite.score for suite in record.suites if suite.score is not None}
    if weights and set(weights) <= set(scores):
        expected_q = sum(scores[name] * w for name, w in weights.items()) / sum(weights.values())
        if abs(expected_q - q) > SCORE_TOLERANCE + 0.01:
            reasons.append(
                f"quality score {q:g} does not match its suite scores "
                f"(weighted mean {expected_q:.2f})"
            )
    tasks = [task for suite in record.suites for task in suite.tasks]
    if (
        record.score_scale == ScoreScale.V3
        and tasks
        and all(t.execution_ok is not None for t in tasks)
    ):
        expected_r = 100 * sum(bool(t.execution_ok) for t in tasks) / len(tasks)
        if abs(expected_r - r) > SCORE_TOLERANCE + 0.01:
            reasons.append(
                f"reliability {r:g} does not match its tasks "
                f"({expected_r:.2f}% executed without error)"
            )
    for suite in record.suites:
        if suite.tasks and suite.task_count != len(suite.tasks):
            reasons.append(
                f"suite {suite.suite} claims {suite.task_count} tasks but lists {len(suite.tasks)}"
            )
    return reasons


def _against_peers(record: RunRecord, *, model_key: str, gpu_model: str) -> list[str]:
    """Robust z-score (median and MAD) against approved runs of the same model, quant and GPU."""
    if not gpu_model:
        return []
    peers = (
        Run.objects.published()
        .filter(
            Q(stack__model_id__iexact=model_key),
            stack__quantization=record.quantization.upper(),
            hardware__gpu_model=gpu_model,
        )
        .values_list(*[field for field, _label, _unit in PEER_METRICS])[:500]
    )
    rows = list(peers)
    reasons = []
    for index, (field, label, unit) in enumerate(PEER_METRICS):
        value = record.speed.get(field)
        values = [row[index] for row in rows if row[index] is not None]
        if value is None or len(values) < MIN_PEERS:
            continue
        median = statistics.median(values)
        mad = statistics.median(abs(v - median) for v in values)
        # With identical peers the MAD is 0; fall back to 5% of the median as the scale.
        scale = 1.4826 * mad if mad > 0 else 0.05 * median
        if scale <= 0:
            continue
        z = (value - median) / scale
        if abs(z) > ROBUST_Z_LIMIT:
            ratio = value / median if median else float("inf")
            reasons.append(
                f"{label} {value:,.1f} {unit} is {ratio:.1f}× the median of {len(values)} "
                f"approved peers on {gpu_model} ({median:,.1f} {unit}; robust z = {z:+.1f})"
            )
    return reasons
