"""A run's bundle before and while its tasks run: the skeleton, then scores kept current.

Split from the orchestrator, which owns the run's flow; this module owns the bundle's fields.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from ..rules.comparability import IN_PROGRESS, assess, coverage_of
from ..rules.contract import (
    Bundle,
    BundleError,
    Comparability,
    EngineInfo,
    Hardware,
    Launch,
    Machine,
    SuiteRecord,
)
from ..rules.hardware import gpu_summary
from ..rules.reasoning import chosen_budget
from ..rules.scoring import (
    BENCHMARK_ID,
    BENCHMARK_VERSION,
    SCORE_SCHEMA_VERSION,
    SPEED_METHOD_VERSION,
    aggregate,
    manifest_hash,
    value_score,
)
from . import ENGINE_NAME, __version__
from .adaptive import speed_rule
from .bundle import BUNDLE_SCHEMA_VERSION, new_run_id
from .contention import unmeasured
from .detect import describe_model
from .hardware import detect_hardware, machine_id
from .matrix.programs import harness_version
from .metrics import speed_metrics_v3, speed_summary
from .paths import benchloop_home
from .preflight import DEFAULT_TRIALS
from .sweeps import sweeps_block

if TYPE_CHECKING:
    from .plan import PreparedRun


def _machine_block(prep: PreparedRun, hw: Hardware, home: Path) -> Machine:
    gpu, vram = gpu_summary(hw)
    same = prep.locality.same_machine
    return Machine(
        machine_id=machine_id(home),
        cpu=hw["cpu_model"],
        gpu=gpu,
        gpu_memory_gb=vram,
        system_memory_gb=float(hw["ram_gb"] or 0.0),
        os=hw["os"] if same else "remote",
        backend=prep.info.kind,
        is_remote=not same,
        remote_host="" if same else prep.locality.host,
        endpoint=prep.transport.base_url,
        hardware_label=hw["label"],
    )


def _launch(prep: PreparedRun) -> Launch:
    """What the server reports wins; the command line fills in what it does not report."""
    launch = Launch(**prep.info.launch)
    meta = prep.info.model_meta.get(prep.info.aliases.get(prep.model, prep.model), {})
    if meta.get("context_length") and "context_length" not in launch:
        launch["context_length"] = meta["context_length"]
    merged = dict(launch)
    for key, value in prep.stack.launch.items():
        merged.setdefault(key, value)
    # Both parts are Launch blocks, so their union is one too (mypy cannot follow the loop).
    return cast(Launch, merged)


def skeleton(prep: PreparedRun, started: datetime) -> Bundle:
    """The bundle before the first task: every field present, scores empty, status
    incomplete (a run broken off at any point leaves a valid bundle)."""
    config = prep.config
    hw = detect_hardware(
        attributed=prep.locality.same_machine,
        label=config.hardware_label,
        gpu=config.gpu,
        gpu_memory_gb=config.gpu_memory_gb,
    )
    client_run_id = uuid.uuid4().hex
    provider_name = "ollama" if prep.provider.api == "ollama" else "openai_compat"
    selected = [s.name for s in prep.suites]
    scoring_mode: Literal["local", "remote"] = "local" if prep.locality.scoring_local else "remote"
    return Bundle(
        bundle_schema_version=BUNDLE_SCHEMA_VERSION,
        version=__version__,
        benchmark_id=BENCHMARK_ID,
        benchmark_version=BENCHMARK_VERSION,
        speed_method_version=SPEED_METHOD_VERSION,
        benchmark_profile=prep.benchmark_profile,
        requested_profile=prep.profile_name,
        manifest_hash=_manifest(prep),
        score_schema_version=SCORE_SCHEMA_VERSION,
        coverage_score=0.0,
        comparable=False,
        comparability=_comparability(prep, "incomplete", None, {}),
        contention=unmeasured(
            IN_PROGRESS if prep.locality.same_machine else "the server runs on another machine"
        ),
        run_id=new_run_id(
            prep.model,
            local=prep.locality.scoring_local,
            provider=provider_name,
            client_run_id=client_run_id,
            when=started,
        ),
        client_run_id=client_run_id,
        status="incomplete",
        timestamp=started.isoformat(),
        finished_at=None,
        error=None,
        model={**describe_model(prep.info, prep.model), **prep.stack.model},
        machine=_machine_block(prep, hw, config.home or benchloop_home()),
        hardware=hw,
        engine=EngineInfo(
            name=prep.info.engine.get("name", prep.info.kind),
            version=str(prep.info.engine.get("version", "")),
            kind=prep.info.kind,
            client=f"{ENGINE_NAME}/{__version__}",
        ),
        launch=_launch(prep),
        provider=provider_name,
        harness=prep.config.harness,
        harness_version=harness_version(prep.config.harness),
        is_remote=not prep.locality.scoring_local,
        scoring_mode=scoring_mode,
        scoring_reason=prep.locality.reason,
        total_runtime_sec=0.0,
        overall_score=None,
        quality_score=None,
        speed_score=None,
        reliability_score=0.0,
        value_score=None,
        speed_metrics=speed_metrics_v3([]),
        speed_summary=speed_summary([]),
        settings={
            "trials": prep.config.trials,
            "speed_trial_rule": speed_rule(prep.config.trials),
            "harness": prep.config.harness,
            "harness_variant": prep.config.harness_variant,
            "max_tokens_cap": prep.config.max_tokens,
            **_limit_settings(prep),
            "timeout_s": prep.config.timeout,
            "selected_suites": selected,
            "task_filter": prep.config.tasks or [],
            "sweep_options": prep.config.sweep_options(),
            "ignore_eos": prep.info.supports_ignore_eos,
            # Quality tasks at once: asked, used, and where the default came from.
            "parallel": prep.parallel.as_dict(),
        },
        suites={},
    )


def _limit_settings(prep: PreparedRun) -> dict[str, Any]:
    """The run's output limits as settings (they are in the manifest's tasks as well)."""
    return {
        "thinking_budget": prep.limits.thinking_budget,
        "thinking_budget_source": prep.thinking_budget_source,
        "reasoning_detected": prep.reasoning_detected,
        "max_tokens_ceiling": prep.limits.ceiling,
    }


def _manifest(prep: PreparedRun) -> str:
    return manifest_hash(
        requested_profile=prep.profile_name,
        selected_suites=[s.name for s in prep.suites],
        tasks=prep.tasks,
    )


def refresh_limits(bundle: Bundle, prep: PreparedRun) -> None:
    """The manifest and settings after the warm-up set the run's thinking budget."""
    bundle["manifest_hash"] = _manifest(prep)
    bundle["settings"].update(_limit_settings(prep))
    bundle["comparability"] = _comparability(
        prep, bundle["status"], bundle["error"], bundle["suites"]
    )


def refresh_scores(bundle: Bundle, prep: PreparedRun, started_clock: float) -> None:
    """Scores, speed figures and comparability from the suites run so far."""
    suites = bundle["suites"]
    scores = aggregate(suites, prep.profile)
    bundle.update(scores)
    speed = suites.get("speed")
    speed_tasks = speed["tasks"] if speed is not None else []
    bundle["speed_metrics"] = speed_metrics_v3(speed_tasks)
    bundle["speed_summary"] = speed_summary(speed_tasks)
    decode = bundle["speed_summary"]["decode_tps"]["median"]
    bundle["value_score"] = value_score(
        scores["quality_score"], decode, scores["reliability_score"]
    )
    # No --trials: the speed suite's trials are adaptive and the sweeps run DEFAULT_TRIALS.
    sweeps = sweeps_block(suites, prep.config.trials or DEFAULT_TRIALS)
    if sweeps is not None:
        bundle["sweeps"] = sweeps
    block = _comparability(prep, bundle["status"], bundle["error"], suites)
    bundle["comparability"] = block
    bundle["comparable"] = block["comparable"]
    bundle["coverage_score"] = coverage_of(block)
    bundle["total_runtime_sec"] = round(time.perf_counter() - started_clock, 3)


def _comparability(
    prep: PreparedRun, status: str, error: BundleError | None, suites: dict[str, SuiteRecord]
) -> Comparability:
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
        thinking_budget=chosen_budget(_limit_settings(prep)),
        sweep_options=prep.config.sweep_options(),
    )
