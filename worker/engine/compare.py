"""Compare two runs like for like: the same speed tasks, as a ratio, with its noise.

Only the speed tasks both runs ran are compared, so a run with long prompts is never set against
one with short ones. Each side's figure is its median with the median's 95% interval
(stats.summarize). The difference is the ratio B ÷ A, tested per task with Welch's t-test on the
log scale and combined over the shared tasks (stats.ratio_test): its interval is always
positive, and a difference is significant when the two-sided p-value is below α = 0.05.
"""

from __future__ import annotations

from typing import TypeGuard

from ..rules.stats import ratio_test, summarize
from .metrics import speed_samples

ALPHA = 0.05
METRICS = (
    ("decode_tps", "decode tok/s", True),
    ("prefill_tps", "prefill tok/s", True),
    ("ttft_ms", "TTFT ms", False),
)
SCORES = ("overall_score", "quality_score", "speed_score", "reliability_score", "value_score")
METHOD = (
    "ratio B/A on the speed tasks both runs ran: Welch's t-test on log values per task, "
    f"combined over tasks, two-sided, alpha={ALPHA}"
)


def _values(samples: list[dict], key: str, tasks: list[str]) -> list[list[float]]:
    """Per task (in ``tasks`` order), the sample values of ``key``."""
    return [
        [float(s[key]) for s in samples if s.get("task_id") == task and s.get(key) is not None]
        for task in tasks
    ]


def _side(bundle: dict) -> dict:
    comparability = bundle.get("comparability") or {}
    return {
        "run_id": bundle.get("run_id"),
        "client_run_id": bundle.get("client_run_id"),
        "model": (bundle.get("model") or {}).get("model_id"),
        "model_sha256": (bundle.get("model") or {}).get("sha256"),
        "engine": (bundle.get("engine") or {}).get("name"),
        "engine_version": (bundle.get("engine") or {}).get("version"),
        "hardware_label": (bundle.get("machine") or {}).get("hardware_label"),
        "timestamp": bundle.get("timestamp"),
        "status": bundle.get("status"),
        "manifest_hash": bundle.get("manifest_hash"),
        "benchmark_version": bundle.get("benchmark_version"),
        "comparable": bundle.get("comparable"),
        "noncomparable_reasons": list(comparability.get("reasons") or []),
        "contention": (bundle.get("contention") or {}).get("status", "unknown"),
        "contention_reasons": list((bundle.get("contention") or {}).get("reasons") or []),
        "source_format": bundle.get("source_format", "bundle-1"),
    }


def _row(
    name: str, label: str, a: list[list[float]], b: list[list[float]], higher_is_better: bool
) -> dict:
    flat_a = [v for group in a for v in group]
    flat_b = [v for group in b for v in group]
    sa = summarize(flat_a, higher_is_better=higher_is_better)
    sb = summarize(flat_b, higher_is_better=higher_is_better)
    delta = None
    if sa["median"] is not None and sb["median"] is not None:
        delta = round(sb["median"] - sa["median"], 4)
    test = ratio_test(a, b)
    significant = bool(test and test["p_value"] is not None and test["p_value"] < ALPHA)
    better = None
    if significant and test is not None and test["ratio"] != 1:
        better = "b" if (test["ratio"] > 1) == higher_is_better else "a"
    return {
        "metric": name,
        "label": label,
        "higher_is_better": higher_is_better,
        "a": sa,
        "b": sb,
        "delta": delta,
        "ratio": test["ratio"] if test else None,
        "ratio_ci95_low": test["low"] if test else None,
        "ratio_ci95_high": test["high"] if test else None,
        "ratio_pct": round(100.0 * (test["ratio"] - 1), 2) if test else None,
        "p_value": test["p_value"] if test else None,
        "tasks": test["groups"] if test else 0,
        "significant": significant,
        "better": better,
    }


def _warnings(a: dict, b: dict, only_a: list[str], only_b: list[str]) -> list[str]:
    out = []
    if a["hardware_label"] != b["hardware_label"]:
        out.append(
            f"different hardware ({a['hardware_label'] or '?'} vs {b['hardware_label'] or '?'}): "
            "speed differences include the machine"
        )
    if not (a["manifest_hash"] and a["manifest_hash"] == b["manifest_hash"]):
        out.append("the runs used different task manifests")
    if a["benchmark_version"] != b["benchmark_version"]:
        out.append("different benchmark versions: their scores are not on one scale")
    for side, info in (("A", a), ("B", b)):
        if info["noncomparable_reasons"]:
            out.append(f"{side} is not comparable: " + "; ".join(info["noncomparable_reasons"]))
        if info["contention"] == "contended":
            out.append(
                f"{side} was measured under contention: " + "; ".join(info["contention_reasons"])
            )
    for side, missing in (("A", only_a), ("B", only_b)):
        if missing:
            out.append(f"{len(missing)} speed task(s) only in {side} are left out")
    return out


def compare_bundles(a: dict, b: dict) -> dict:
    """Side-by-side comparison of two bundles (ours or legacy) on their shared speed tasks."""
    samples_a, samples_b = speed_samples(a), speed_samples(b)
    ids_a = list(dict.fromkeys(s["task_id"] for s in samples_a))
    ids_b = list(dict.fromkeys(s["task_id"] for s in samples_b))
    shared = [t for t in ids_a if t in ids_b]
    metrics = [
        _row(key, label, _values(samples_a, key, shared), _values(samples_b, key, shared), hib)
        for key, label, hib in METRICS
    ]
    tasks = []
    for task_id in shared:
        row = _row(
            "decode_tps",
            task_id,
            _values(samples_a, "decode_tps", [task_id]),
            _values(samples_b, "decode_tps", [task_id]),
            True,
        )
        row["task_id"] = task_id
        tasks.append(row)
    scores = []
    for key in SCORES:
        va, vb = a.get(key), b.get(key)
        delta = round(vb - va, 4) if _is_number(va) and _is_number(vb) else None
        scores.append({"metric": key, "a": va, "b": vb, "delta": delta})
    side_a, side_b = _side(a), _side(b)
    only_a = [t for t in ids_a if t not in shared]
    only_b = [t for t in ids_b if t not in shared]
    return {
        "a": side_a,
        "b": side_b,
        "same_manifest": bool(a.get("manifest_hash"))
        and a.get("manifest_hash") == b.get("manifest_hash"),
        "shared_tasks": shared,
        "only_a": only_a,
        "only_b": only_b,
        "warnings": _warnings(side_a, side_b, only_a, only_b),
        "method": METHOD,
        "metrics": metrics,
        "tasks": tasks,
        "scores": scores,
        "decode_ratio_vs_server": {
            side: summarize([t.get("decode_ratio_vs_server") for t in _trials(doc)])["median"]
            for side, doc in (("a", a), ("b", b))
        },
    }


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _trials(doc: dict) -> list[dict]:
    out: list[dict] = []
    for task in (doc.get("suites", {}).get("speed") or {}).get("tasks") or []:
        out.extend((task.get("metadata") or {}).get("trials") or [])
    return out
