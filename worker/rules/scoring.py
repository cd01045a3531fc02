"""Score curves and run-level aggregates (score schema 3.1.0)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

BENCHMARK_ID = "benchloop"
# Our task set is new (original prompts), so it gets its own benchmark version; the score schema
# keeps v3's shape with the fixes listed in docs/metrics.md. 4.1.0: the speed suite's method 2
# (suite 2.0.0) changes the speed score inside the overall, so v3 lanes, keyed by this version
# (runs.lanes.version_column), never pool a run of either speed method with the other's.
BENCHMARK_VERSION = "4.1.0"
SCORE_SCHEMA_VERSION = "3.1.0"
# How the speed suite measures (its grid, trials and clock), versioned apart from the benchmark:
# a speed is comparable with another measured by the same method, whatever the quality tasks'
# version, so the site ranks speed-only boards on this (issue 29). Bump it when the method
# changes; earlier products' formats have their own ("cli-0.3", "cli-0.2", runs.methods).
SPEED_METHOD_VERSION = "2"
# Suites that are measured, never scored: the depth and concurrency sweeps. They add no quality,
# speed, reliability or overall score, so a run's scores are the same with or without them.
MEASURED_ONLY = frozenset({"speed_sweep"})
# Suites that measure the bare endpoint (no harness prompt) and speak of speed, not quality.
SPEED_SUITES = frozenset({"speed"}) | MEASURED_ONLY


def _clamp(value: float) -> float:
    return max(0.0, min(100.0, value))


def local_speed_score(decode_tps: float | None) -> float:
    """Local curve: 12.54·log2(tok/s) + 0.9, clamped to 0–100 (60 tok/s ≈ 75)."""
    if not decode_tps or decode_tps <= 0:
        return 0.0
    return round(_clamp(12.54 * math.log2(decode_tps) + 0.9), 2)


def cloud_ttft_score(ttft_ms: float | None) -> float:
    if not ttft_ms or ttft_ms <= 0:
        return 0.0
    if ttft_ms <= 200:
        return 100.0
    return 100.0 * math.exp(-0.000507 * (ttft_ms - 200))


def cloud_decode_score(decode_tps: float | None) -> float:
    """4·tok/s up to 10 tok/s, then 12·log2(tok/s ÷ 10) + 40: continuous at 10 (the old curve
    jumped from 40 down to 28 there)."""
    if not decode_tps or decode_tps <= 0:
        return 0.0
    if decode_tps < 10:
        return 4.0 * decode_tps
    return _clamp(12.0 * math.log2(decode_tps / 10.0) + 40.0)


def cloud_speed_score(ttft_ms: float | None, decode_tps: float | None) -> float:
    """Remote curve: 60% time to first token, 40% decode rate."""
    return round(_clamp(0.6 * cloud_ttft_score(ttft_ms) + 0.4 * cloud_decode_score(decode_tps)), 2)


def is_speed_only(suites: Iterable[str], *, speed_suite: str = "speed") -> bool:
    """Whether a run holds no quality suite: it then has no quality, overall or value score.

    One rule for the engine, the legacy reader and the site's importers. The measured-only
    sweeps are speed too: a run of them alone (profile ``speed-deep``) is speed-only.
    """
    return not any(name != speed_suite and name not in MEASURED_ONLY for name in suites)


def quality_weights(
    profile: Mapping[str, Any],
    suites_present: list[str],
    *,
    speed_suite: str = "speed",
    fallback_weights: dict[str, float] | None = None,
) -> dict[str, float]:
    """Weights of the quality suites actually run, renormalised to sum to 1.

    A suite the profile does not weight (a custom ``--suites`` selection) takes its weight from
    ``fallback_weights`` (normally the ``full`` profile), else the mean of the weights found, so
    ``--suites speed,agent`` under ``core`` is no longer scored quality 0.
    """
    weights = profile.get("quality_weights", {})
    fallback = fallback_weights or {}
    quality = [s for s in suites_present if s != speed_suite and s not in MEASURED_ONLY]
    raw = {s: weights[s] for s in quality if s in weights}
    missing = [s for s in quality if s not in raw]
    for name in missing:
        if name in fallback:
            raw[name] = fallback[name]
    still = [s for s in missing if s not in raw]
    if still:
        share = sum(raw.values()) / len(raw) if raw else 1.0
        raw.update(dict.fromkeys(still, share))
    total = sum(raw.values())
    return {s: w / total for s, w in raw.items()} if total > 0 else {}


class Scores(TypedDict):
    """The bundle's run-level score fields (value_score apart: it needs the decode rate)."""

    overall_score: float | None
    quality_score: float | None
    speed_score: float | None
    reliability_score: float


def aggregate(
    suites: Mapping[str, Mapping[str, Any]],
    profile: Mapping[str, Any],
    *,
    speed_suite: str = "speed",
    fallback_weights: dict[str, float] | None = None,
) -> Scores:
    """Run-level quality, speed, reliability and overall scores.

    Speed presence is the speed suite being in the run, not its score being above zero. A run
    without a quality suite (speed-only, or stopped before its first quality suite) has no
    quality and no overall score: None, never a 0 that would rank it. Likewise a run without
    the speed suite (quality only, or the measured-only sweeps alone) has no speed score. The
    keys are exactly the bundle's score fields (the bundle schema allows nothing else).
    """
    has_speed = speed_suite in suites
    speed = suites[speed_suite]["score"] if has_speed else None
    scored = {name: s for name, s in suites.items() if name not in MEASURED_ONLY}
    # A run of the sweeps alone still says how many of its cells ran.
    tasks = [t for s in (scored or suites).values() for t in s.get("tasks", [])]
    reliability = (
        100.0 * sum(1 for t in tasks if t.get("execution_ok")) / len(tasks) if tasks else 0.0
    )
    scores = Scores(
        overall_score=None,
        quality_score=None,
        speed_score=round(speed, 2) if speed is not None else None,
        reliability_score=round(reliability, 2),
    )
    if is_speed_only(suites, speed_suite=speed_suite):
        return scores
    weights = quality_weights(
        profile, list(suites), speed_suite=speed_suite, fallback_weights=fallback_weights
    )
    quality = sum(scored[name]["score"] * w for name, w in weights.items())
    if speed is not None:
        overall = 0.70 * quality + 0.25 * speed + 0.05 * reliability
    else:
        overall = 0.90 * quality + 0.10 * reliability
    scores["overall_score"] = round(overall, 2)
    scores["quality_score"] = round(quality, 2)
    return scores


def value_score(
    quality: float | None, decode_tps: float | None, reliability: float
) -> float | None:
    """Q × min(decode/100, 1) × R/100; None without a quality score."""
    if quality is None:
        return None
    factor = min((decode_tps or 0.0) / 100.0, 1.0) if decode_tps else 0.5
    return round(quality * factor * reliability / 100.0, 2)


def manifest_hash(
    *,
    requested_profile: str,
    selected_suites: list[str],
    tasks: Mapping[str, list[dict[str, Any]]],
) -> str:
    """sha256 over the canonical JSON of what defines the benchmark (tasks after overrides)."""
    manifest = {
        "benchmark_id": BENCHMARK_ID,
        "benchmark_version": BENCHMARK_VERSION,
        "score_schema_version": SCORE_SCHEMA_VERSION,
        "requested_profile": requested_profile,
        "selected_suites": selected_suites,
        "tasks": tasks,
    }
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
