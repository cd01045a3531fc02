"""Run orchestration: preflight, warm-up, suites, checkpoints, final bundle, progress events.

Events (dicts with a ``type``) follow the names of the earlier product: ``run_started``,
``suite_started``, ``task_completed``, ``suite_completed``, ``run_completed``, ``run_failed``;
plus ``task_started``, ``task_progress`` and ``trial_completed`` for live displays.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from . import ENGINE_NAME, __version__
from .bundle import BUNDLE_SCHEMA_VERSION, new_run_id, write_bundle
from .detect import EndpointInfo, describe_model, detect_endpoint, resolve_model
from .errors import BundleWriteError, EngineError, UsageError
from .hardware import detect_hardware, gpu_summary, machine_id
from .harnesses import HARNESS_VERSION, HARNESSES, HarnessProvider, with_harness
from .locality import Locality, classify
from .metrics import measured_trials, speed_metrics_v3, speed_summary
from .paths import benchloop_home
from .providers import ChatRequest, Provider, make_provider
from .scoring import (
    BENCHMARK_ID,
    BENCHMARK_VERSION,
    SCORE_SCHEMA_VERSION,
    aggregate,
    coverage,
    manifest_hash,
    value_score,
)
from .stats import percentile
from .suites import RunCancelled, RunContext, Suite, available_suites, load_profiles
from .transport import Transport

log = logging.getLogger(__name__)

EventCallback = Callable[[dict], None]
OLLAMA_SPEED_NUM_CTX = 4096
DEFAULT_TRIALS = 5


@dataclass
class RunConfig:
    """Everything a run needs; mirrors the `benchloop run` flags."""

    url: str
    model: str | None = None
    provider: str = "auto"
    suites: list[str] | None = None
    profile: str | None = None
    tasks: list[str] | None = None
    # None: the profile's ``speed_trials`` (5 where it names none).
    trials: int | None = None
    harness: str = "raw"
    scoring: str | None = None
    hardware_label: str | None = None
    gpu: str | None = None
    gpu_memory_gb: float | None = None
    api_key: str | None = None
    timeout: float = 300.0
    max_tokens: int | None = None
    home: Path | None = None


@dataclass
class PreparedRun:
    """A run that passed preflight: endpoint known, model served, suites resolved."""

    config: RunConfig
    transport: Transport
    info: EndpointInfo
    model: str
    provider: Provider
    locality: Locality
    profile_name: str
    profile: dict
    benchmark_profile: str
    suites: list[Suite]
    tasks: dict[str, list[dict]] = field(default_factory=dict)


@dataclass
class RunOutcome:
    """``status``: "complete", "incomplete" (Ctrl-C), "failed" or "cancelled" (should_stop)."""

    bundle: dict
    path: Path
    status: str


def _select_tasks(suite: Suite, patterns: list[str] | None, cap: int | None) -> list[dict]:
    tasks = suite.effective_tasks(cap)
    if not patterns:
        return tasks
    return [t for t in tasks if any(fnmatch.fnmatch(t["id"], p) for p in patterns)]


def prepare_run(config: RunConfig) -> PreparedRun:
    """Resolve suites and profile, probe the endpoint and check the model (raises EngineError)."""
    profiles = load_profiles()
    profile_name = config.profile or profiles["default"]
    if profile_name not in profiles["profiles"]:
        raise UsageError(
            f"unknown profile {profile_name!r}",
            hint=f"Profiles: {', '.join(profiles['profiles'])}.",
        )
    profile = profiles["profiles"][profile_name]
    if config.trials is None:
        config.trials = int(profile.get("speed_trials", DEFAULT_TRIALS))
    if config.trials < 1 or config.trials > 50:
        raise UsageError("--trials must be between 1 and 50")
    if config.harness not in HARNESSES:
        raise UsageError(
            f"unknown harness {config.harness!r}", hint=f"Harnesses: {', '.join(HARNESSES)}."
        )
    selected = list(config.suites) if config.suites else list(profile["suites"])
    installed = available_suites()
    missing = [name for name in selected if name not in installed]
    if missing:
        raise UsageError(
            f"suite(s) not installed: {', '.join(missing)}",
            hint=f"Installed suites: {', '.join(installed)}.",
        )
    benchmark_profile = next(
        (n for n, p in profiles["profiles"].items() if set(p["suites"]) == set(selected)), "custom"
    )
    suites = [installed[name] for name in selected]
    tasks = {s.name: _select_tasks(s, config.tasks, config.max_tokens) for s in suites}
    if not any(tasks.values()):
        raise UsageError("no task matches --tasks", hint="`benchloop info` lists task ids.")
    transport = Transport(config.url, api_key=config.api_key, timeout=config.timeout)
    try:
        info = detect_endpoint(transport, provider=config.provider)
        model = resolve_model(info, config.model)
    except BaseException:
        transport.close()
        raise
    api = "openai" if config.provider == "openai" else info.api
    provider = make_provider(
        api,
        transport,
        model,
        supports_ignore_eos=info.supports_ignore_eos,
        num_ctx=OLLAMA_SPEED_NUM_CTX if "speed" in selected else None,
    )
    return PreparedRun(
        config=config,
        transport=transport,
        info=info,
        model=model,
        provider=provider,
        locality=classify(transport.base_url, override=config.scoring),
        profile_name=profile_name,
        profile=profile,
        benchmark_profile=benchmark_profile,
        suites=suites,
        tasks=tasks,
    )


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


def _skeleton(prep: PreparedRun, started: datetime) -> dict:
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
        "coverage_score": coverage(prep.profile, selected),
        "comparable": False,
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
        "model": describe_model(prep.info, prep.model),
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
        "overall_score": 0.0,
        "quality_score": 0.0,
        "speed_score": 0.0,
        "reliability_score": 0.0,
        "value_score": 0.0,
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


def _suite_record(suite: Suite, records: list[dict], metadata: dict) -> dict:
    latencies = sorted(r["latency_ms"] for r in records if r["latency_ms"] > 0)
    passes = sum(1 for r in records if r["passed"])
    return {
        "suite": suite.name,
        "version": suite.version,
        "score": suite.score(records),
        "task_count": len(records),
        "pass_count": passes,
        "fail_count": len(records) - passes,
        "median_latency_ms": round(percentile(latencies, 0.5), 3) if latencies else 0.0,
        "tasks": records,
        "metadata": metadata,
    }


def _refresh_scores(bundle: dict, prep: PreparedRun, started_clock: float) -> None:
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
    bundle["coverage_score"] = coverage(prep.profile, list(suites))
    bundle["total_runtime_sec"] = round(time.perf_counter() - started_clock, 3)


def execute(
    prep: PreparedRun,
    on_event: EventCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> RunOutcome:
    """Run every selected task (see ``_execute``); a bundle that cannot be saved ends the run.

    The disk filling up is the one failure with no bundle to show for it, so listeners (a lab
    job's event stream, the CLI's display) get ``run_failed`` before the error propagates.
    """
    try:
        return _execute(prep, on_event, should_stop)
    except BundleWriteError as exc:
        if on_event is not None:
            with contextlib.suppress(Exception):
                on_event(
                    {
                        "type": "run_failed",
                        "error": exc.message,
                        "exception_class": "BundleWriteError",
                        "status": "failed",
                        "path": exc.filename,
                    }
                )
        raise


def _execute(
    prep: PreparedRun,
    on_event: EventCallback | None,
    should_stop: Callable[[], bool] | None,
) -> RunOutcome:
    """Run every selected task; the bundle is on disk before any terminal event is emitted.

    ``should_stop`` is asked before each task and each speed trial (a lab job's cancel button);
    a true answer ends the run with the finished tasks kept: the outcome is "cancelled", and the
    bundle says status "incomplete" with error kind "cancelled" (bundle-1 has three statuses).
    """
    started = datetime.now(UTC)
    clock = time.perf_counter()
    bundle = _skeleton(prep, started)
    home = prep.config.home or benchloop_home()
    path = home / "runs" / bundle["run_id"] / "run.json"

    def emit(kind: str, payload: dict) -> None:
        if on_event is None:
            return
        try:
            on_event({"type": kind, **payload})
        except Exception:  # a broken display must not lose a benchmark run
            log.exception("progress callback failed on %s", kind)

    total = sum(len(t) for t in prep.tasks.values())
    write_bundle(bundle, path)
    emit(
        "run_started",
        {
            "run_id": bundle["run_id"],
            "client_run_id": bundle["client_run_id"],
            "total_tasks": total,
            "suites": [s.name for s in prep.suites],
            "suite_task_counts": {name: len(t) for name, t in prep.tasks.items()},
            "benchmark_profile": bundle["benchmark_profile"],
            "requested_profile": bundle["requested_profile"],
            "manifest_hash": bundle["manifest_hash"],
            "speed_trials": prep.config.trials,
            "model": prep.model,
            "engine": bundle["engine"],
            "scoring_mode": bundle["scoring_mode"],
        },
    )
    completed = 0
    try:
        try:
            prep.provider.chat(
                ChatRequest(messages=[{"role": "user", "content": "Say OK."}], max_tokens=4)
            )
        except EngineError as exc:
            return _finish_failed(bundle, path, prep, clock, exc, emit)
        for suite in prep.suites:
            tasks = prep.tasks[suite.name]
            if not tasks:
                continue
            # Speed measures the bare endpoint: a harness prompt would skew its calibrated lengths.
            provider = (
                prep.provider
                if suite.name == "speed"
                else with_harness(prep.provider, prep.config.harness)
            )
            ctx = RunContext(
                provider=provider,
                trials=prep.config.trials or DEFAULT_TRIALS,
                scoring_local=prep.locality.scoring_local,
                max_tokens_cap=prep.config.max_tokens,
                emit=emit,
                should_stop=should_stop or (lambda: False),
            )
            emit("suite_started", {"suite": suite.name, "task_count": len(tasks)})
            suite.prepare(ctx)
            records: list[dict] = []
            for task in tasks:
                if should_stop is not None and should_stop():
                    raise RunCancelled()
                emit("task_started", {"suite": suite.name, "task_id": task["id"]})
                records.append(_run_one(suite, task, ctx))
                completed += 1
                bundle["suites"][suite.name] = _suite_record(suite, records, ctx.suite_metadata)
                _refresh_scores(bundle, prep, clock)
                write_bundle(bundle, path)
                last = records[-1]
                emit(
                    "task_completed",
                    {
                        "suite": suite.name,
                        "task_id": last["task_id"],
                        "score": last["score"],
                        "passed": last["passed"],
                        "latency_ms": last["latency_ms"],
                        "error": last["error"],
                        "completed_tasks": completed,
                        "total_tasks": total,
                        "decode_tps": last["metadata"]
                        .get("speed_metrics", {})
                        .get("generation_tok_per_sec"),
                    },
                )
            suite_record = bundle["suites"][suite.name]
            if isinstance(provider, HarnessProvider):
                suite_record["metadata"]["harness_malformed_blocks"] = provider.malformed
                write_bundle(bundle, path)
            emit(
                "suite_completed",
                {
                    "suite": suite.name,
                    "score": suite_record["score"],
                    "pass_count": suite_record["pass_count"],
                    "task_count": suite_record["task_count"],
                },
            )
    except RunCancelled:
        reason = f"cancelled after {completed} of {total} tasks"
        bundle["status"] = "incomplete"
        bundle["error"] = {"kind": "cancelled", "message": reason, "hint": ""}
        _refresh_scores(bundle, prep, clock)
        bundle["finished_at"] = datetime.now(UTC).isoformat()
        write_bundle(bundle, path)
        emit("cancelled", {"reason": reason, "status": "incomplete", "path": str(path)})
        return RunOutcome(bundle, path, "cancelled")
    except KeyboardInterrupt:
        bundle["status"] = "incomplete"
        bundle["error"] = {
            "kind": "interrupted",
            "message": f"interrupted after {completed} of {total} tasks",
            "hint": "The finished tasks are kept; run again for a complete result.",
        }
        _refresh_scores(bundle, prep, clock)
        bundle["finished_at"] = datetime.now(UTC).isoformat()
        write_bundle(bundle, path)
        emit(
            "run_failed",
            {
                "error": bundle["error"]["message"],
                "exception_class": "KeyboardInterrupt",
                "status": "incomplete",
                "path": str(path),
            },
        )
        return RunOutcome(bundle, path, "incomplete")
    _refresh_scores(bundle, prep, clock)
    tasks_done = [t for s in bundle["suites"].values() for t in s["tasks"]]
    if tasks_done and not any(t["execution_ok"] or t["passed"] for t in tasks_done):
        first = next((t["error"] for t in tasks_done if t["error"]), "every task failed")
        bundle["status"] = "failed"
        bundle["error"] = {"kind": "all_tasks_failed", "message": first, "hint": ""}
    else:
        bundle["status"] = "complete"
    bundle["comparable"] = (
        bundle["status"] == "complete"
        and bundle["benchmark_profile"] != "custom"
        and bundle["coverage_score"] >= 100.0
        and not prep.config.tasks
        and prep.config.max_tokens is None
    )
    bundle["finished_at"] = datetime.now(UTC).isoformat()
    write_bundle(bundle, path)
    if bundle["status"] == "failed":
        emit(
            "run_failed",
            {
                "error": bundle["error"]["message"],
                "exception_class": "TaskErrors",
                "status": "failed",
                "path": str(path),
            },
        )
    else:
        emit(
            "run_completed",
            {
                key: bundle[key]
                for key in (
                    "overall_score",
                    "quality_score",
                    "speed_score",
                    "reliability_score",
                    "total_runtime_sec",
                    "benchmark_profile",
                    "coverage_score",
                    "comparable",
                    "status",
                )
            }
            | {"path": str(path), "run_id": bundle["run_id"]},
        )
    return RunOutcome(bundle, path, bundle["status"])


def _run_one(suite: Suite, task: dict, ctx: RunContext) -> dict:
    """Run a task; a bug in suite code becomes a task error instead of ending the run."""
    from .suites.base import task_record

    try:
        return suite.run_task(task, ctx)
    except RunCancelled:
        raise
    except EngineError as exc:
        return task_record(task, suite.name, error=exc.message, metadata={"error_kind": exc.kind})
    except Exception as exc:
        log.exception("suite %s crashed on %s", suite.name, task["id"])
        return task_record(
            task,
            suite.name,
            error=f"internal error: {type(exc).__name__}: {exc}",
            metadata={"error_kind": "internal"},
        )


def _finish_failed(
    bundle: dict, path: Path, prep: PreparedRun, clock: float, exc: EngineError, emit
) -> RunOutcome:
    bundle["status"] = "failed"
    bundle["error"] = exc.to_dict()
    _refresh_scores(bundle, prep, clock)
    bundle["finished_at"] = datetime.now(UTC).isoformat()
    write_bundle(bundle, path)
    emit(
        "run_failed",
        {
            "error": exc.message,
            "exception_class": type(exc).__name__,
            "status": "failed",
            "path": str(path),
        },
    )
    return RunOutcome(bundle, path, "failed")


def run_benchmark(config: RunConfig, on_event: EventCallback | None = None) -> RunOutcome:
    """Preflight and execute in one call (the provider is closed afterwards)."""
    prep = prepare_run(config)
    try:
        return execute(prep, on_event)
    finally:
        prep.provider.close()
