"""What a lab worker does with one job: claim, run the engine, stream events, store the run."""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from lab import services
from lab.models import BenchmarkJob, WorkerHost

log = logging.getLogger(__name__)


class TransientJobError(Exception):
    """Worth another attempt (the endpoint was briefly unreachable); the task retries."""


@dataclass
class JobRun:
    """Per-attempt state, kept off the shared task instance."""

    job: BenchmarkJob
    attempt: int
    # The attempt's own folder (engine home, server log), removed when the attempt ends.
    folder: Path
    seq: itertools.count = field(default_factory=lambda: itertools.count(1))
    stop: threading.Event = field(default_factory=threading.Event)

    def emit(self, event: dict) -> None:
        if event.get("type") in services.LIVE_ONLY_EVENTS:
            services.update_live_progress(job_id=self.job.pk, attempt=self.attempt, event=event)
            return
        services.record_event(
            job_id=self.job.pk, attempt=self.attempt, seq=next(self.seq), event=event
        )

    def should_stop(self) -> bool:
        return services.cancel_requested(self.job.pk) or self.stop.is_set()


def _heartbeat_loop(state: JobRun) -> None:
    from django.db import connection

    try:
        while not state.stop.wait(services.HEARTBEAT_INTERVAL.total_seconds()):
            if not services.heartbeat(job_id=state.job.pk, attempt=state.attempt):
                state.stop.set()  # someone else owns the job now (reaped): stop at a boundary
    finally:
        connection.close()


def run_job(*, job_id: int, host: WorkerHost) -> str:
    """Run the job if this host can claim it; returns what happened, for the task log."""
    if not host.is_approved:
        return "host not approved"
    job = services.claim_job(job_id=job_id, host=host)
    if job is None:
        return "not claimed (already taken, finished or cancelled)"
    state = JobRun(job=job, attempt=job.attempts, folder=_job_folder(job))
    beat = threading.Thread(target=_heartbeat_loop, args=(state,), daemon=True)
    beat.start()
    server = None
    try:
        url, api_key = job.endpoint_url, None
        if job.target == BenchmarkJob.Target.MANAGED:
            server = _start_managed(job, state)
            url = server.url
        elif job.api_key_ref:
            api_key = os.environ.get(job.api_key_ref)
            if not api_key:
                return _fail(state, f"the worker has no secret named {job.api_key_ref}")
        return _run_engine(job, state, url, api_key, server)
    except TransientJobError:
        raise
    except Exception as exc:  # the job fails with the reason; the worker lives on
        log.exception("job %s failed", job.pk)
        return _fail(state, f"{type(exc).__name__}: {exc}")
    finally:
        _stop_server(server, state)
        state.stop.set()
        beat.join(timeout=10)
        # The bundle is stored (or the job failed) by now; nothing in the folder is needed.
        shutil.rmtree(state.folder, ignore_errors=True)


def jobs_root() -> Path:
    """Where attempts keep their files while they run: var/lab-jobs, not the shared /tmp."""
    from django.conf import settings

    return Path(settings.VAR_DIR) / "lab-jobs"


def _job_folder(job: BenchmarkJob) -> Path:
    root = jobs_root()
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"job-{job.pk}-attempt-{job.attempts}-", dir=root))


def _stop_server(server, state: JobRun) -> None:
    if server is None:
        return
    if server.exit_reported:
        return
    server.exit_reported = True  # stopped here or died on its own: said once either way
    if server.process.poll() is None:
        server.stop()
        state.emit({"type": "log", "message": "stopped the managed llama.cpp server"})
    else:
        # It died on its own; its log goes with the job's folder, so keep its last lines.
        state.emit(
            {
                "type": "log",
                "message": f"the managed llama.cpp server exited with code "
                f"{server.process.returncode}:\n{server.log_tail()}",
            }
        )


def _start_managed(job: BenchmarkJob, state: JobRun):
    from worker.managed import start_server

    state.emit(
        {"type": "log", "message": f"starting {job.binary} with {Path(job.model_path).name}"}
    )
    server = start_server(
        binary=job.binary,
        model_path=job.model_path,
        alias=job.model,
        context_length=job.context_length,
        threads=job.threads,
        extra_flags=list(job.launch_flags),
        log_dir=state.folder,
    )
    state.emit({"type": "log", "message": "managed llama.cpp server is healthy"})
    return server


def _run_engine(
    job: BenchmarkJob, state: JobRun, url: str, api_key: str | None, server=None
) -> str:
    from worker.engine.bundle import upload_view
    from worker.engine.errors import EndpointUnreachable, EngineError, RequestTimeout
    from worker.engine.orchestrator import RunConfig, execute, prepare_run

    if job.provider == "ollama":
        _pull_if_missing(job, state, url)
    home = state.folder / "home"
    config = RunConfig(
        url=url,
        model=job.model,
        provider=job.provider,
        suites=list(job.suites) or None,
        profile=None if job.suites else (job.profile or None),
        tasks=list(job.tasks) or None,
        trials=job.trials,
        harness=job.harness,
        max_tokens=job.max_tokens,
        api_key=api_key,
        home=home,
    )
    try:
        prepared = prepare_run(config)
    except (EndpointUnreachable, RequestTimeout) as exc:
        if job.target == BenchmarkJob.Target.ENDPOINT and job.attempts < job.max_attempts:
            services.requeue_job(job_id=job.pk, attempt=state.attempt, error=exc.message)
            raise TransientJobError(exc.message) from exc
        return _fail(state, exc.message)
    except EngineError as exc:  # unknown model, bad key, ...: the user's to fix, no retry
        return _fail(state, f"{exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
    services.mark_running(job_id=job.pk, attempt=state.attempt)
    outcome = execute(prepared, on_event=state.emit, should_stop=state.should_stop)
    _stop_server(server, state)  # before the job turns final, so its log is complete
    if outcome.status == "cancelled" or services.cancel_requested(job.pk):
        services.fail_job(
            job_id=job.pk, attempt=state.attempt, error="cancelled by request", cancelled=True
        )
        return "cancelled"
    if outcome.status != "complete":
        error = (outcome.bundle.get("error") or {}).get("message") or outcome.status
        return _fail(state, str(error))
    services.finish_job(job_id=job.pk, attempt=state.attempt, upload=upload_view(outcome.bundle))
    return "succeeded"


def _pull_if_missing(job: BenchmarkJob, state: JobRun, url: str) -> None:
    """An Ollama job for a model the host lacks pulls it first, streaming the progress."""
    from worker.pull import needs_pull, pull_model

    if needs_pull(url, job.model):
        state.emit({"type": "log", "message": f"{job.model} is not on this host; pulling it"})
        pull_model(url, job.model, state.emit)


def _fail(state: JobRun, error: str) -> str:
    state.emit({"type": "run_failed", "error": error})
    services.fail_job(job_id=state.job.pk, attempt=state.attempt, error=error)
    return f"failed: {error}"
