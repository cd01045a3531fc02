"""Read run.json files written by benchloop-cli 0.2.3 (v2) and 0.3.0 (v3) as bundle-1 documents."""

from __future__ import annotations

import uuid
from typing import Any

from ..rules.scoring import is_speed_only
from ..rules.stats import summarize
from . import __version__
from .metrics import speed_samples
from .paths import slug

# A legacy file has none of the 1.1 blocks (comparability, contention): it reads as a 1.0 bundle.
LEGACY_BUNDLE_VERSION = "1.0"

_NAMESPACE = uuid.UUID("6f1d8c52-3c1e-4d0c-9a55-2b7f3f4a9e10")
_MACHINE_DEFAULTS = {
    "machine_id": "",
    "cpu": "",
    "gpu": "",
    "gpu_memory_gb": 0.0,
    "system_memory_gb": 0.0,
    "os": "",
    "backend": "",
    "is_remote": False,
    "remote_host": "",
    "endpoint": "",
    "hardware_label": "",
}
_SPEED_DEFAULTS = {
    "ttft_ms": 0.0,
    "prompt_eval_tok_per_sec": 0.0,
    "generation_tok_per_sec": 0.0,
    "total_latency_ms": 0.0,
}
_EXTRA_KEYS = ("profile", "command_used", "user_id", "requested_suites", "traceback", "events")


def source_format(doc: dict) -> str:
    if str(doc.get("score_schema_version", "")).startswith("3") or doc.get("benchmark_id"):
        return "benchloop-cli-0.3.0"
    return "benchloop-cli-0.2.3"


def _hardware(machine: dict) -> dict:
    names = [n.strip() for n in str(machine.get("gpu") or "").split(",") if n.strip()]
    vram = machine.get("gpu_memory_gb") or None
    gpus = [
        {"index": i, "name": name, "vram_gb": vram if i == 0 else None}
        for i, name in enumerate(names)
    ]
    attributed = not machine.get("is_remote", False)
    return {
        "attributed": attributed,
        "os": str(machine.get("os") or "") if attributed else "",
        "os_version": "",
        "architecture": str(machine.get("architecture") or ""),
        "cpu_model": str(machine.get("cpu") or ""),
        "cpu_physical_cores": machine.get("cpu_physical_cores"),
        "cpu_logical_cores": machine.get("cpu_logical_cores"),
        "ram_gb": machine.get("system_memory_gb") or None,
        "gpus": gpus,
        "gpu_driver_version": "",
        "cuda_version": "",
        "apple_silicon": "Apple" in str(machine.get("cpu") or ""),
        "gpu_source": "legacy",
        "notes": ["converted from a legacy run.json; hardware as the old CLI recorded it"],
        "overrides": {},
        "label": str(machine.get("hardware_label") or ""),
    }


def _suites(doc: dict) -> dict[str, dict]:
    """The old suites with the task keys bundle-1 requires, filled as the old CLI meant them."""
    suites = {}
    for name, suite in (doc.get("suites") or {}).items():
        tasks = []
        for task in suite.get("tasks") or []:
            task = dict(task)
            # 0.2.3 had no execution_ok; an empty error is the closest it recorded.
            task.setdefault("execution_ok", not task.get("error"))
            task.setdefault("finish_reason", None)
            task.setdefault("metadata", {})
            tasks.append(task)
        suites[name] = {**suite, "tasks": tasks}
    return suites


def _model(doc: dict) -> dict:
    model = dict(doc.get("model") or {})
    model.setdefault("model_id", "")
    for key in ("family", "parameter_count", "quantization"):
        model[key] = str(model.get(key) or "")
    return model


def _speed_summary(doc: dict) -> dict:
    """What the old files' trials allow: no server-side figures (they recorded none)."""
    trials = speed_samples(doc)
    return {
        "decode_tps": summarize(t["decode_tps"] for t in trials),
        "prefill_tps": summarize(t["prefill_tps"] for t in trials),
        "ttft_ms": summarize((t["ttft_ms"] for t in trials), higher_is_better=False),
        "server_decode_tps": summarize([]),
        "server_prefill_tps": summarize([]),
        "decode_ratio_vs_server": None,
    }


def from_legacy(doc: dict, *, folder: str = "") -> dict:
    """Convert a v2/v3 run.json; unknown legacy extras are kept under ``extras``."""
    fmt = source_format(doc)
    model = _model(doc)
    raw_machine = dict(doc.get("machine") or {})
    # Failed-run records carried the full hardware dict; keep the v3 keys in machine.
    machine = {key: raw_machine.get(key, default) for key, default in _MACHINE_DEFAULTS.items()}
    run_id = str(
        doc.get("run_id") or folder or f"{doc.get('timestamp', '')}-{slug(model['model_id'])}"
    )
    backend = str(machine.get("backend") or doc.get("provider") or "")
    is_v3 = fmt.endswith("0.3.0")
    suites = _suites(doc)
    bundle: dict[str, Any] = {
        "bundle_schema_version": LEGACY_BUNDLE_VERSION,
        "source_format": fmt,
        "version": str(doc.get("version") or ""),
        "benchmark_id": doc.get("benchmark_id") or "benchloop-legacy",
        "benchmark_version": doc.get("benchmark_version") or "legacy",
        "benchmark_profile": doc.get("benchmark_profile") or "legacy",
        "requested_profile": doc.get("requested_profile") or "legacy",
        "manifest_hash": doc.get("manifest_hash") or "",
        # Pre-0.3 runs carry no score schema: theirs is the v2 scale ("2.0.0" on the site too).
        "score_schema_version": doc.get("score_schema_version") or "2.0.0",
        "coverage_score": float(doc.get("coverage_score") or 0.0),
        "comparable": bool(doc.get("comparable", False)),
        "run_id": run_id,
        "client_run_id": uuid.uuid5(_NAMESPACE, f"{fmt}:{run_id}:{doc.get('timestamp')}").hex,
        "status": "failed" if doc.get("status") == "failed" else "complete",
        "timestamp": str(doc.get("timestamp") or ""),
        "finished_at": None,
        "error": {"kind": "legacy", "message": str(doc["error"]), "hint": ""}
        if doc.get("error")
        else None,
        "model": model,
        "machine": machine,
        "hardware": _hardware(raw_machine),
        "engine": {"name": backend.split(":", 1)[0], "version": ""},
        "launch": {},
        "provider": str(doc.get("provider") or ""),
        "harness": str(doc.get("harness") or "raw"),
        "harness_version": str(doc.get("harness_version") or "v1"),
        "is_remote": bool(doc.get("is_remote", machine.get("is_remote", False))),
        "scoring_mode": "remote" if doc.get("is_remote") else "local",
        "total_runtime_sec": float(doc.get("total_runtime_sec") or 0.0),
        "overall_score": doc.get("overall_score") or 0.0,
        "quality_score": doc.get("quality_score") or 0.0,
        "speed_score": doc.get("speed_score") or 0.0,
        "reliability_score": doc.get("reliability_score") or 0.0,
        "value_score": doc.get("value_score") or 0.0,
        "speed_metrics": {**_SPEED_DEFAULTS, **(doc.get("speed_metrics") or {})},
        "speed_summary": _speed_summary(doc),
        "settings": {"trials": None, "selected_suites": list(suites), "reader": __version__},
        "suites": suites,
        "extras": {k: doc[k] for k in _EXTRA_KEYS if k in doc},
    }
    if not is_v3:
        bundle["extras"]["v2_unrounded_scores"] = True
    if suites and is_speed_only(suites):
        # The old CLIs gave speed-only runs a quality of 0 and an overall score; they have none.
        bundle.update(overall_score=None, quality_score=None, value_score=None)
    return bundle
