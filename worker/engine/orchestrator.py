"""Run orchestration: preflight, warm-up, suites, checkpoints, final bundle, progress events.

Events (dicts with a ``type``, typed in worker.rules.contract) follow the names of the earlier
product: ``run_started``, ``suite_started``, ``task_completed``, ``suite_completed``,
``run_completed``, ``run_failed``; plus ``task_started``, ``task_progress`` and
``trial_completed`` for live displays.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..rules.contract import (
    Bundle,
    BundleError,
    Cancelled,
    RunCallback,
    RunCompleted,
    RunEvent,
    RunFailed,
    RunStarted,
    RunStatus,
    SuiteCompleted,
    SuiteRecord,
    SuiteStarted,
    TaskCompleted,
    TaskRecord,
)
from ..rules.scoring import SPEED_SUITES
from ..rules.stats import percentile
from .adaptive import speed_rule
from .bundle import write_bundle
from .contention import ContentionMonitor
from .errors import BundleWriteError, EngineError
from .harnesses import HarnessProvider, with_harness
from .locality import classify
from .parallel import check as check_parallel
from .parallel import choose as choose_parallel
from .parallel import run_tasks, workers_for
from .paths import benchloop_home
from .plan import PreparedRun, RunConfig
from .power import PowerMonitor
from .preflight import DEFAULT_TRIALS, after_warmup, output_limits, probe, retask, select
from .providers import ChatRequest, ChatResponse, Provider, make_provider
from .resources import cold_start_block, ollama_model_loaded, resources_block, start_power
from .skeleton import refresh_limits
from .skeleton import refresh_scores as _refresh_scores
from .skeleton import skeleton as _skeleton
from .suites import RunCancelled, RunContext, Suite
from .sweeps import SWEEP_SUITE, depth_provider, server_facts
from .transport import Transport

log = logging.getLogger(__name__)

# prepare_run's and execute's listener (a name kept for callers of the engine).
EventCallback = RunCallback
Emit = Callable[[RunEvent], None]
OLLAMA_SPEED_NUM_CTX = 4096


@dataclass
class RunOutcome:
    """``status``: "complete", "incomplete" (Ctrl-C), "failed" or "cancelled" (should_stop)."""

    bundle: Bundle
    path: Path
    status: str


def prepare_run(config: RunConfig, on_event: EventCallback | None = None) -> PreparedRun:
    """Resolve suites and profile, probe the endpoint, check the model and name the stack.

    Raises EngineError. ``on_event`` hears ``hashing_weights`` before a weights file that is not
    in the hash cache yet is read (a large one takes a while, once).
    """
    selection = select(config)
    check_parallel(config.parallel)
    transport = Transport(config.url, api_key=config.api_key, timeout=config.timeout)
    locality = classify(transport.base_url, override=config.scoring)
    try:
        info, model, stack = probe(config, transport, locality, on_event)
    except BaseException:
        transport.close()
        raise
    api = "openai" if config.provider == "openai" else info.api
    provider = make_provider(
        api,
        transport,
        model,
        supports_ignore_eos=info.supports_ignore_eos,
        num_ctx=OLLAMA_SPEED_NUM_CTX if SPEED_SUITES & set(selection.tasks) else None,
    )
    prep = PreparedRun(
        config=config,
        transport=transport,
        info=info,
        model=model,
        provider=provider,
        locality=locality,
        profile_name=selection.profile_name,
        profile=selection.profile,
        benchmark_profile=selection.benchmark_profile,
        suites=selection.suites,
        tasks=selection.tasks,
        expected=selection.expected,
        stack=stack,
        limits=selection.limits,
    )
    # No limit above the server's context, where it says what that is.
    context = info.launch.get("context_length") or stack.launch.get("context_length")
    retask(
        prep, *output_limits(config, context_length=context if isinstance(context, int) else None)
    )
    prep.parallel = choose_parallel(config.parallel, server_facts(prep))
    return prep


def _suite_record(suite: Suite, records: list[TaskRecord], ctx: RunContext) -> SuiteRecord:
    latencies = sorted(r["latency_ms"] for r in records if r["latency_ms"] > 0)
    passes = sum(1 for r in records if r["passed"])
    return SuiteRecord(
        suite=suite.name,
        version=suite.version,
        score=suite.score(records),
        task_count=len(records),
        pass_count=passes,
        fail_count=len(records) - passes,
        median_latency_ms=round(percentile(latencies, 0.5), 3) if latencies else 0.0,
        tasks=records,
        metadata={**ctx.suite_metadata, **suite.summary(records, ctx)},
    )


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
                    RunFailed(
                        type="run_failed",
                        error=exc.message,
                        exception_class="BundleWriteError",
                        status="failed",
                        path=str(exc.filename),
                    )
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

    def emit(event: RunEvent) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:  # a broken display must not lose a benchmark run
            log.exception("progress callback failed on %s", event["type"])

    total = sum(len(t) for t in prep.tasks.values())
    write_bundle(bundle, path)
    monitor = _monitor(prep)
    power, power_note = start_power(prep, bundle["hardware"])

    def finish() -> None:
        """The last write: sampling stopped, scores and comparability for the final status."""
        if monitor is not None:
            bundle["contention"] = monitor.stop()
        if power is not None:
            power.stop()
        bundle["resources"] = resources_block(power, bundle, bundle["hardware"])
        _refresh_scores(bundle, prep, clock)
        bundle["finished_at"] = datetime.now(UTC).isoformat()
        write_bundle(bundle, path)

    sampling = _Sampling(power, power_note)
    try:
        return _run_suites(prep, bundle, path, total, emit, should_stop, finish, clock, sampling)
    finally:
        if monitor is not None:
            monitor.stop()  # a no-op after finish(); stops the thread if the run broke off
        if power is not None:
            power.stop()


@dataclass(frozen=True)
class _Sampling:
    """The power monitor the speed suite integrates its trials over, or why there is none."""

    power: PowerMonitor | None
    note: str


def _first_request(prep: PreparedRun, bundle: Bundle) -> None:
    """The run's first request, a short warm-up timed as the cold start's first request (its
    load time too where the server reports one); a failure here ends the run (EngineError)."""
    loaded_before = ollama_model_loaded(prep)
    started = time.perf_counter()
    response: ChatResponse | None = None
    try:
        response = prep.provider.chat(
            # 16 tokens: room for a reasoning model to open its thinking (a grammar-forced or
            # plain-text <think> takes several), which sets the run's thinking budget.
            ChatRequest(messages=[{"role": "user", "content": "Say OK."}], max_tokens=16)
        )
    finally:
        elapsed = (time.perf_counter() - started) * 1000 if response is not None else None
        bundle["cold_start"] = cold_start_block(prep, response, elapsed, loaded_before)
    # A reasoning model gets its thinking budget here, before any task: the manifest follows.
    after_warmup(prep, response)
    refresh_limits(bundle, prep)


def _monitor(prep: PreparedRun) -> ContentionMonitor | None:
    """Sampling for a server on this machine; a remote one's load is not ours to see."""
    if not prep.locality.same_machine:
        return None
    server = prep.stack.server
    return ContentionMonitor(
        server_pids=server.tree if server is not None else None,
        interval=prep.config.contention_interval,
    ).start()


def _run_suites(
    prep: PreparedRun,
    bundle: Bundle,
    path: Path,
    total: int,
    emit: Emit,
    should_stop: Callable[[], bool] | None,
    finish: Callable[[], None],
    clock: float,
    sampling: _Sampling,
) -> RunOutcome:
    """The body of ``_execute``: warm-up, every suite's tasks, then the one ending."""
    emit(
        RunStarted(
            type="run_started",
            run_id=bundle["run_id"],
            client_run_id=bundle["client_run_id"],
            total_tasks=total,
            suites=[s.name for s in prep.suites],
            suite_task_counts={name: len(t) for name, t in prep.tasks.items()},
            benchmark_profile=bundle["benchmark_profile"],
            requested_profile=bundle["requested_profile"],
            manifest_hash=bundle["manifest_hash"],
            speed_trials=prep.config.trials or DEFAULT_TRIALS,
            speed_trial_rule=speed_rule(prep.config.trials),
            model=prep.model,
            engine=bundle["engine"],
            scoring_mode=bundle["scoring_mode"],
        )
    )
    progress = _Progress(prep, bundle, path, total, emit, should_stop, clock, sampling)
    try:
        try:
            _first_request(prep, bundle)
        except EngineError as exc:
            ending = _Ending("failed", exc.to_dict(), type(exc).__name__)
        else:
            for suite in prep.suites:
                progress.run_suite(suite)
            ending = _verdict(bundle)
    except RunCancelled:
        reason = f"cancelled after {progress.completed} of {total} tasks"
        ending = _Ending("incomplete", {"kind": "cancelled", "message": reason, "hint": ""})
    except KeyboardInterrupt:
        ending = _Ending(
            "incomplete",
            {
                "kind": "interrupted",
                "message": f"interrupted after {progress.completed} of {total} tasks",
                "hint": "The finished tasks are kept; run again for a complete result.",
            },
            "KeyboardInterrupt",
        )
    return _end(bundle, path, ending, emit, finish)


@dataclass
class _Progress:
    """The running part of a run: each suite's tasks, the bundle rewritten after each one."""

    prep: PreparedRun
    bundle: Bundle
    path: Path
    total: int
    emit: Emit
    should_stop: Callable[[], bool] | None
    clock: float
    sampling: _Sampling
    completed: int = 0

    def run_suite(self, suite: Suite) -> None:
        prep, bundle, emit = self.prep, self.bundle, self.emit
        tasks = prep.tasks[suite.name]
        if not tasks:
            return
        # Speed measures the bare endpoint: a harness prompt would skew its calibrated lengths.
        bare = suite.name in SPEED_SUITES
        provider = prep.provider if bare else with_harness(prep.provider, prep.config.harness)
        facts = server_facts(prep) if suite.name == SWEEP_SUITE else {}
        opened: list[Provider] = []  # parallel workers' providers (their harness counts)

        def fresh() -> Provider:
            """The run's provider on a connection of its own, harnessed like ``provider``."""
            new = _new_provider(prep)
            if not bare:
                new = with_harness(new, prep.config.harness)
            opened.append(new)
            return new

        ctx = RunContext(
            provider=provider,
            trials=prep.config.trials or DEFAULT_TRIALS,
            trial_rule=speed_rule(prep.config.trials),
            scoring_local=prep.locality.scoring_local,
            max_tokens_cap=prep.config.max_tokens,
            emit=emit,
            should_stop=self.should_stop or (lambda: False),
            power=self.sampling.power,
            power_note=self.sampling.note or RunContext.power_note,
            server=facts,
            depth_provider=depth_provider(prep, facts),
            new_provider=fresh,
            harness=prep.config.harness,
            harness_variant=prep.config.harness_variant,
            endpoint=prep.transport.base_url,
            model=prep.model,
            api_key=prep.config.api_key,
        )
        emit(SuiteStarted(type="suite_started", suite=suite.name, task_count=len(tasks)))
        suite.prepare(ctx)
        done: dict[int, TaskRecord] = {}
        # Completions may come out of order (--parallel); the bundle keeps the tasks' order.
        for index, record in run_tasks(suite, tasks, ctx, workers_for(suite, prep.parallel)):
            done[index] = record
            self.completed += 1
            records = [done[i] for i in sorted(done)]
            bundle["suites"][suite.name] = _suite_record(suite, records, ctx)
            _refresh_scores(bundle, prep, self.clock)
            write_bundle(bundle, self.path)
            self._task_completed(suite.name, record)
        suite_record = bundle["suites"][suite.name]
        harnessed = [p for p in (provider, *opened) if isinstance(p, HarnessProvider)]
        if harnessed:
            malformed = sum(p.malformed for p in harnessed)
            suite_record["metadata"]["harness_malformed_blocks"] = malformed
            write_bundle(bundle, self.path)
        emit(
            SuiteCompleted(
                type="suite_completed",
                suite=suite.name,
                score=suite_record["score"],
                pass_count=suite_record["pass_count"],
                task_count=suite_record["task_count"],
            )
        )

    def _task_completed(self, suite: str, last: TaskRecord) -> None:
        speed = last["metadata"].get("speed_metrics", {})
        self.emit(
            TaskCompleted(
                type="task_completed",
                suite=suite,
                task_id=last["task_id"],
                score=last["score"],
                passed=last["passed"],
                latency_ms=last["latency_ms"],
                error=last["error"],
                completed_tasks=self.completed,
                total_tasks=self.total,
                decode_tps=speed.get("generation_tok_per_sec"),
            )
        )


@dataclass(frozen=True)
class _Ending:
    """How a run ended: the bundle's status, its error (None when complete) and, for a
    failure, what raised it (the run_failed event names it)."""

    status: RunStatus
    error: BundleError | None = None
    exception_class: str = ""


def _verdict(bundle: Bundle) -> _Ending:
    """A run that got through every task: complete, unless no task ran at all."""
    tasks_done = [t for s in bundle["suites"].values() for t in s["tasks"]]
    if tasks_done and not any(t["execution_ok"] or t["passed"] for t in tasks_done):
        first = next((t["error"] for t in tasks_done if t["error"]), "every task failed")
        return _Ending(
            "failed", {"kind": "all_tasks_failed", "message": first, "hint": ""}, "TaskErrors"
        )
    return _Ending("complete")


def _end(
    bundle: Bundle,
    path: Path,
    ending: _Ending,
    emit: Emit,
    finish: Callable[[], None],
) -> RunOutcome:
    """The one finish step: status and error into the bundle, the last write, then the
    terminal event (the bundle is on disk before anyone hears the run ended)."""
    bundle["status"] = ending.status
    if ending.error is not None:
        bundle["error"] = ending.error
    finish()
    where = str(path)
    if ending.status == "complete":
        emit(_completed(bundle, where))
        return RunOutcome(bundle, path, "complete")
    assert ending.error is not None
    if ending.error["kind"] == "cancelled":
        emit(
            Cancelled(
                type="cancelled", reason=ending.error["message"], status=ending.status, path=where
            )
        )
        return RunOutcome(bundle, path, "cancelled")
    emit(
        RunFailed(
            type="run_failed",
            error=ending.error["message"],
            exception_class=ending.exception_class,
            status=ending.status,
            path=where,
        )
    )
    return RunOutcome(bundle, path, ending.status)


def _completed(bundle: Bundle, where: str) -> RunCompleted:
    """The run_completed event: the bundle's results, where it is, and its id."""
    return RunCompleted(
        type="run_completed",
        overall_score=bundle["overall_score"],
        quality_score=bundle["quality_score"],
        speed_score=bundle["speed_score"],
        reliability_score=bundle["reliability_score"],
        total_runtime_sec=bundle["total_runtime_sec"],
        benchmark_profile=bundle["benchmark_profile"],
        coverage_score=bundle["coverage_score"],
        comparable=bundle["comparable"],
        status=bundle["status"],
        path=where,
        run_id=bundle["run_id"],
    )


def _new_provider(prep: PreparedRun) -> Provider:
    """The run's provider again on a connection of its own (one per concurrent stream)."""
    config = prep.config
    transport = Transport(config.url, api_key=config.api_key, timeout=config.timeout)
    return make_provider(
        prep.provider.api,
        transport,
        prep.model,
        supports_ignore_eos=prep.info.supports_ignore_eos,
        num_ctx=getattr(prep.provider, "num_ctx", None),
    )


def run_benchmark(config: RunConfig, on_event: EventCallback | None = None) -> RunOutcome:
    """Preflight and execute in one call (the provider is closed afterwards)."""
    prep = prepare_run(config)
    try:
        return execute(prep, on_event)
    finally:
        prep.provider.close()
