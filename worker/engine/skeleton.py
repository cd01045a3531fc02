"""A run's bundle before and while its tasks run: the skeleton, then scores kept current.

Split from the orchestrator, which owns the run's flow; this module owns the bundle's fields.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from . import ENGINE_NAME, __version__
from .bundle import BUNDLE_SCHEMA_VERSION, new_run_id
from .comparability import IN_PROGRESS, assess, coverage_of
from .contention import unmeasured
from .detect import describe_model
from .hardware import detect_hardware, gpu_summary, machine_id
from .harnesses import HARNESS_VERSION
from .metrics import measured_trials, speed_metrics_v3, speed_summary
from .paths import benchloop_home
from .scoring import (
    BENCHMARK_ID,
    BENCHMARK_VERSION,
    SCORE_SCHEMA_VERSION,
    aggregate,
    manifest_hash,
    value_score,
)

if TYPE_CHECKING:
    from .orchestrator import PreparedRun


def _machine_block(prep: PreparedRun, hw: dict, home: Path) -> dict:
    gpu, vram = gpu_summary(hw)
    same = prep.locality.same_machine
    return {
        "machine_id": machine_id(home),
        "cpu": hw.get("cpu_model", ""),
        "gpu": gpu,
        "gpu_memory_gb": vram,
        "system_memory_gb": float(hw.get("ram_gb") or 0.0),
        "os": hw.get("os", "") if same else "remote",
        "backend": prep.info.kind,
        "is_remote": not same,
        "remote_host": "" if same else prep.locality.host,
        "endpoint": prep.transport.base_url,
        "hardware_label": hw.get("label", ""),
    }


def skeleton(prep: PreparedRun, started: datetime) -> dict:
    config = prep.config
    home = config.home or benchloop_home()
    hw = detect_hardware(
        attributed=prep.locality.same_machine,
        label=config.hardware_label,
        gpu=config.gpu,
        gpu_memory_gb=config.gpu_memory_gb,
    )
    client_run_id = uuid.uuid4().hex
    provider_name = "ollama" if prep.provider.api == "ollama" else "openai_compat"
    selected = [s.name for s in prep.suites]
    launch = dict(prep.info.launch)
    meta = prep.info.model_meta.get(prep.info.aliases.get(prep.model, prep.model), {})
    if meta.get("context_length") and "context_length" not in launch:
        launch["context_length"] = meta["context_length"]
    # What the server reports wins; the command line fills in what it does not report.
    for key, value in prep.stack.launch.items():
        launch.setdefault(key, value)
    return {
        "bundle_schema_version": BUNDLE_SCHEMA_VERSION,
        "version": __version__,
        "benchmark_id": BENCHMARK_ID,
        "benchmark_version": BENCHMARK_VERSION,
        "benchmark_profile": prep.benchmark_profile,
        "requested_profile": prep.profile_name,
        "manifest_hash": manifest_hash(
            requested_profile=prep.profile_name, selected_suites=selected, tasks=prep.tasks
        ),
        "score_schema_version": SCORE_SCHEMA_VERSION,
        "coverage_score": 0.0,
        "comparable": False,
        "comparability": _comparability(prep, "incomplete", None, {}),
        "contention": unmeasured(
            IN_PROGRESS if prep.locality.same_machine else "the server runs on another machine"
        ),
        "run_id": new_run_id(
            prep.model,
            local=prep.locality.scoring_local,
            provider=provider_name,
            client_run_id=client_run_id,
            when=started,
        ),
        "client_run_id": client_run_id,
        "status": "incomplete",
        "timestamp": started.isoformat(),
        "finished_at": None,
        "error": None,
        "model": describe_model(prep.info, prep.model) | prep.stack.model,
        "machine": _machine_block(prep, hw, home),
        "hardware": hw,
        "engine": {
            "name": prep.info.engine.get("name", prep.info.kind),
            "version": str(prep.info.engine.get("version", "")),
            "kind": prep.info.kind,
            "client": f"{ENGINE_NAME}/{__version__}",
        },
        "launch": launch,
        "provider": provider_name,
        "harness": prep.config.harness,
        "harness_version": HARNESS_VERSION,
        "is_remote": not prep.locality.scoring_local,
        "scoring_mode": "local" if prep.locality.scoring_local else "remote",
        "scoring_reason": prep.locality.reason,
        "total_runtime_sec": 0.0,
        "overall_score": None,
        "quality_score": None,
        "speed_score": 0.0,
        "reliability_score": 0.0,
        "value_score": None,
        "speed_metrics": speed_metrics_v3([]),
        "speed_summary": speed_summary([]),
        "settings": {
            "trials": prep.config.trials,
            "harness": prep.config.harness,
            "max_tokens_cap": prep.config.max_tokens,
            "timeout_s": prep.config.timeout,
            "selected_suites": selected,
            "task_filter": prep.config.tasks or [],
            "ignore_eos": prep.info.supports_ignore_eos,
        },
        "suites": {},
    }


def refresh_scores(bundle: dict, prep: PreparedRun, started_clock: float) -> None:
    suites = bundle["suites"]
    scores = aggregate(suites, prep.profile)
    bundle.update(scores)
    trials = measured_trials(suites.get("speed", {}).get("tasks", []))
    bundle["speed_metrics"] = speed_metrics_v3(trials)
    bundle["speed_summary"] = speed_summary(trials)
    decode = bundle["speed_summary"]["decode_tps"]["median"]
    bundle["value_score"] = value_score(
        scores["quality_score"], decode, scores["reliability_score"]
    )
    block = _comparability(prep, bundle["status"], bundle["error"], suites)
    bundle["comparability"] = block
    bundle["comparable"] = block["comparable"]
    bundle["coverage_score"] = coverage_of(block)
    bundle["total_runtime_sec"] = round(time.perf_counter() - started_clock, 3)


def _comparability(prep: PreparedRun, status: str, error: dict | None, suites: dict) -> dict:
    """The `comparability` block for the bundle's state now (assess() says what counts)."""
    context = prep.info.launch.get("context_length") or prep.stack.launch.get("context_length")
    return assess(
        status=status,
        error=error,
        expected=prep.expected,
        suites=suites,
        custom_selection=prep.benchmark_profile == "custom",
        task_filter=prep.config.tasks or [],
        max_tokens_cap=prep.config.max_tokens,
        context_length=context if isinstance(context, int) else None,
    )
