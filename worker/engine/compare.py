"""Compare two runs: medians, deltas, and whether speed differences beat the noise.

Significance is Welch's unequal-variance t-test on the per-trial samples of both runs, two-sided,
at α = 0.05. The 95% intervals shown are the runs' own mean intervals; they are reported, but
the verdict comes from the test.
"""

from __future__ import annotations

from .metrics import speed_samples
from .stats import percentile, summarize, welch_test

ALPHA = 0.05
METRICS = (
    ("decode_tps", "decode tok/s", True),
    ("prefill_tps", "prefill tok/s", True),
    ("ttft_ms", "TTFT ms", False),
)
SCORES = ("overall_score", "quality_score", "speed_score", "reliability_score", "value_score")


def _values(samples: list[dict], key: str, task: str | None = None) -> list[float]:
    return [
        float(s[key])
        for s in samples
        if s.get(key) is not None and (task is None or s.get("task_id") == task)
    ]


def _side(bundle: dict) -> dict:
    return {
        "run_id": bundle.get("run_id"),
        "client_run_id": bundle.get("client_run_id"),
        "model": (bundle.get("model") or {}).get("model_id"),
        "engine": (bundle.get("engine") or {}).get("name"),
        "engine_version": (bundle.get("engine") or {}).get("version"),
        "hardware_label": (bundle.get("machine") or {}).get("hardware_label"),
        "timestamp": bundle.get("timestamp"),
        "status": bundle.get("status"),
        "manifest_hash": bundle.get("manifest_hash"),
        "source_format": bundle.get("source_format", "bundle-1"),
    }


def _row(name: str, label: str, a: list[float], b: list[float], higher_is_better: bool) -> dict:
    sa = summarize(a, higher_is_better=higher_is_better)
    sb = summarize(b, higher_is_better=higher_is_better)
    delta = pct = None
    if sa["median"] is not None and sb["median"] is not None:
        delta = round(sb["median"] - sa["median"], 4)
        pct = round(100.0 * delta / sa["median"], 2) if sa["median"] else None
    test = welch_test(a, b)
    significant = bool(test and test["p_value"] < ALPHA)
    better = None
    if significant and delta:
        better = "b" if (delta > 0) == higher_is_better else "a"
    return {
        "metric": name,
        "label": label,
        "a": sa,
        "b": sb,
        "delta": delta,
        "delta_pct": pct,
        "p_value": test["p_value"] if test else None,
        "significant": significant,
        "better": better,
    }


def compare_bundles(a: dict, b: dict) -> dict:
    """Side-by-side comparison of two bundles (ours or legacy)."""
    samples_a, samples_b = speed_samples(a), speed_samples(b)
    metrics = [
        _row(key, label, _values(samples_a, key), _values(samples_b, key), hib)
        for key, label, hib in METRICS
    ]
    tasks = []
    ids_a = {s["task_id"] for s in samples_a}
    for task_id in [t for t in dict.fromkeys(s["task_id"] for s in samples_b) if t in ids_a]:
        row = _row(
            "decode_tps",
            task_id,
            _values(samples_a, "decode_tps", task_id),
            _values(samples_b, "decode_tps", task_id),
            True,
        )
        row["task_id"] = task_id
        tasks.append(row)
    scores = []
    for key in SCORES:
        va, vb = a.get(key), b.get(key)
        delta = (
            round(vb - va, 4)
            if isinstance(va, int | float) and isinstance(vb, int | float)
            else None
        )
        scores.append({"metric": key, "a": va, "b": vb, "delta": delta})
    ratios = {
        side: summarize(
            [s for s in (t.get("decode_ratio_vs_server") for t in _trials(doc)) if s is not None]
        )["median"]
        for side, doc in (("a", a), ("b", b))
    }
    return {
        "a": _side(a),
        "b": _side(b),
        "same_manifest": bool(a.get("manifest_hash"))
        and a.get("manifest_hash") == b.get("manifest_hash"),
        "method": f"Welch's t-test on per-trial samples, two-sided, alpha={ALPHA}",
        "metrics": metrics,
        "tasks": tasks,
        "scores": scores,
        "decode_ratio_vs_server": ratios,
    }


def _trials(doc: dict) -> list[dict]:
    out = []
    for task in (doc.get("suites", {}).get("speed") or {}).get("tasks") or []:
        out.extend((task.get("metadata") or {}).get("trials") or [])
    return out


def median_or_none(values: list[float]) -> float | None:
    clean = sorted(values)
    return percentile(clean, 0.5) if clean else None
