"""What a lab agent does with one job: claim it over HTTP, run the engine, stream the events,
upload the bundle. Nothing here touches the database; the site decides every state change."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from worker.agent.client import KeyRejected, Refused, SiteClient, SiteUnavailable
from worker.rules.contract import ProgressEvent
from worker.rules.logcontext import bind_log_context, log_context
from worker.rules.protocol import (
    LIVE_ONLY_EVENTS,
    MAX_EVENTS_PER_POST,
    JobSpec,
    JobState,
    SequencedEvent,
    job_path,
)
from worker.rules.validate import fit_event

log = logging.getLogger(__name__)


class TransientJobError(Exception):
    """Worth another attempt (the endpoint was briefly unreachable); the task retries it on
    the job's pool, later the more attempts it has had."""

    def __init__(self, message: str, *, pool: str, attempt: int) -> None:
        super().__init__(message)
        self.pool, self.attempt = pool, attempt


class Sender(threading.Thread):
    """Sends a job's events in order, each once, from a thread of its own.

    The engine never waits on the site: it hands an event over and goes on measuring. Events
    are numbered here, so a post whose answer was lost is sent again with the same numbers and
    the site keeps each once. Live ticks are coalesced (only the newest is sent).
    """

    def __init__(self, client: SiteClient, job_id: int, attempt: int) -> None:
        super().__init__(daemon=True, name=f"benchloop-job-{job_id}-events")
        self.client, self.job_id, self.attempt = client, job_id, attempt
        self._queue: queue.Queue[SequencedEvent | dict | None] = queue.Queue()
        self._live: ProgressEvent | None = None
        self._lock = threading.Lock()
        self._seq = 0
        self.state: JobState = {"ours": True, "cancel": False}
        self.failure: BaseException | None = None
        # The job's log fields (job id, host), for the lines logged while sending.
        self._context = contextvars.copy_context()

    def emit(self, event: ProgressEvent) -> None:
        if event["type"] in LIVE_ONLY_EVENTS:
            with self._lock:
                self._live = event
            self._queue.put({})  # a wake-up, carrying nothing
            return
        self._seq += 1
        # Cut to the site's size cap here: an over-long text would cost the job its stream.
        self._queue.put({"seq": self._seq, "event": fit_event(event)})

    def close(self) -> None:
        """Send what is waiting, then stop; raises what stopped the sending, if anything."""
        self._queue.put(None)
        self.join()
        if self.failure is not None:
            raise self.failure

    def run(self) -> None:
        self._context.run(self._send)

    def _send(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while len(batch) < MAX_EVENTS_PER_POST and not self._queue.empty():
                batch.append(self._queue.get())
            done = None in batch
            events = [item for item in batch if item]
            with self._lock:
                live, self._live = self._live, None
            if not events and live is None:
                continue
            try:
                self.state = self.client.post(
                    job_path(self.job_id, "events"),
                    {"attempt": self.attempt, "events": events, "live": live},
                )
            except BaseException as exc:  # the job ends with it; the host loop sees 401s too
                self.failure = exc
                return


@dataclass
class JobRun:
    """Per-attempt state, kept off the shared task instance."""

    client: SiteClient
    spec: JobSpec
    # The attempt's own folder (engine home, server log), removed when the attempt ends.
    folder: Path
    sender: Sender
    stop: threading.Event = field(default_factory=threading.Event)
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def attempt(self) -> int:
        return self.spec["attempt"]

    def emit(self, event: ProgressEvent) -> None:
        self.sender.emit(event)

    def should_stop(self) -> bool:
        if self.sender.state.get("cancel") or not self.sender.state.get("ours", True):
            self.cancel.set()
        return self.cancel.is_set() or self.stop.is_set() or self.sender.failure is not None

    def call(self, action: str, **fields) -> dict:
        """A job call; a refusal (the job is another host's now) is an answer, not an error."""
        try:
            return self.client.post(
                job_path(self.spec["id"], action), {"attempt": self.attempt, **fields}
            )
        except Refused as exc:
            log.warning("job %s: %s refused (%s)", self.spec["id"], action, exc)
            return {"ours": False, "cancel": False}


def _heartbeat_loop(state: JobRun, interval: float) -> None:
    while not state.stop.wait(interval):
        try:
            answer = state.call("heartbeat")
        except Exception:  # the site is away: the sender's and the next beat's patience cover it
            log.warning("job %s heartbeat failed", state.spec["id"], exc_info=True)
            continue
        if answer.get("cancel"):
            state.cancel.set()
        if not answer.get("ours"):
            state.stop.set()  # someone else owns the job now (reaped): stop at a boundary


def run_job(client: SiteClient, job_id: int, *, jobs_root: Path, heartbeat: float) -> str:
    """Run the job if this host can claim it; returns what happened, for the task log."""
    with log_context(job_id=job_id):  # on every line the job logs, its threads' included
        return _claim_and_run(client, job_id, jobs_root=jobs_root, heartbeat=heartbeat)


def _claim_and_run(client: SiteClient, job_id: int, *, jobs_root: Path, heartbeat: float) -> str:
    try:
        spec: JobSpec = client.post(job_path(job_id, "claim"), {})
    except Refused as exc:
        return f"not claimed ({exc.status}: already taken, finished, cancelled or not ours)"
    bind_log_context(attempt=spec["attempt"])
    sender = Sender(client, job_id, spec["attempt"])
    sender.start()
    state = JobRun(client=client, spec=spec, folder=_job_folder(jobs_root, spec), sender=sender)
    beat = threading.Thread(
        target=contextvars.copy_context().run,  # with the job's log fields
        args=(_heartbeat_loop, state, heartbeat),
        daemon=True,
    )
    beat.start()
    server = None
    try:
        url, api_key = spec["endpoint_url"], None
        if spec["target"] == "managed":
            server = _start_managed(spec, state)
            url = server.url
        elif spec["api_key_ref"]:
            api_key = os.environ.get(spec["api_key_ref"])
            if not api_key:
                return _fail(state, f"the worker has no secret named {spec['api_key_ref']}")
        return _run_engine(state, url, api_key, server)
    except TransientJobError:
        raise
    except (KeyRejected, SiteUnavailable):
        raise  # nothing more can be said to the site; the host loop or the reaper takes over
    except Exception as exc:  # the job fails with the reason; the worker lives on
        log.exception("job %s failed", job_id)
        _stop_server(server, state)  # its last words go before the failure
        return _fail(state, f"{type(exc).__name__}: {exc}")
    finally:
        _stop_server(server, state)
        state.stop.set()
        beat.join(timeout=10)
        _close_sender(state)
        # The bundle is stored (or the job failed) by now; nothing in the folder is needed.
        shutil.rmtree(state.folder, ignore_errors=True)


def _close_sender(state: JobRun) -> None:
    if state.sender.is_alive():
        try:
            state.sender.close()
        except Exception:
            log.warning("job %s: events not all sent", state.spec["id"], exc_info=True)


def _job_folder(root: Path, spec: JobSpec) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    prefix = f"job-{spec['id']}-attempt-{spec['attempt']}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


def _stop_server(server, state: JobRun) -> None:
    if server is None or server.exit_reported:
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


def _start_managed(spec: JobSpec, state: JobRun):
    from worker.managed import start_server

    name = Path(spec["model_path"]).name
    state.emit({"type": "log", "message": f"starting {spec['binary']} with {name}"})
    server = start_server(
        binary=spec["binary"],
        model_path=spec["model_path"],
        alias=spec["model"],
        context_length=spec["context_length"],
        threads=spec["threads"],
        extra_flags=list(spec["launch_flags"]),
        log_dir=state.folder,
    )
    state.emit({"type": "log", "message": "managed llama.cpp server is healthy"})
    return server


def _run_engine(state: JobRun, url: str, api_key: str | None, server=None) -> str:
    from worker.engine.bundle import upload_view
    from worker.engine.errors import EndpointUnreachable, EngineError, RequestTimeout
    from worker.engine.orchestrator import execute, prepare_run

    spec = state.spec
    if spec["provider"] == "ollama":
        _pull_if_missing(state, url)
    try:
        config = _config(spec, url, api_key, state.folder / "home")
        config.server_load_s = server.load_s if server is not None else None
        prepared = prepare_run(config)
    except (EndpointUnreachable, RequestTimeout) as exc:
        if spec["target"] == "endpoint" and spec["attempt"] < spec["max_attempts"]:
            _close_sender(state)
            state.call("requeue", error=exc.message, cancelled=False)
            raise TransientJobError(
                exc.message, pool=spec["pool"], attempt=spec["attempt"]
            ) from exc
        return _fail(state, exc.message)
    except EngineError as exc:  # unknown model, bad key, ...: the user's to fix, no retry
        return _fail(state, f"{exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
    state.call("running")
    outcome = execute(prepared, on_event=state.emit, should_stop=state.should_stop)
    _stop_server(server, state)  # before the job turns final, so its log is complete
    _close_sender(state)  # every event is stored before the job's outcome
    if outcome.status == "cancelled" or state.cancel.is_set():
        state.call("fail", error="cancelled by request", cancelled=True)
        return "cancelled"
    if outcome.status != "complete":
        failure = outcome.bundle.get("error")
        return _fail(state, failure["message"] if failure else outcome.status)
    body = json.dumps(upload_view(dict(outcome.bundle)), allow_nan=False).encode()
    answer = state.client.post(
        job_path(spec["id"], "run"), raw=body, params={"attempt": state.attempt}
    )
    return "succeeded" if answer.get("status") == "succeeded" else f"stored: {answer}"


def _config(spec: JobSpec, url: str, api_key: str | None, home: Path):
    from worker.engine.plan import RunConfig
    from worker.rules.harnesses import canonical

    return RunConfig(
        url=url,
        model=spec["model"],
        provider=spec["provider"],
        suites=list(spec["suites"]) or None,
        profile=None if spec["suites"] else (spec["profile"] or None),
        tasks=list(spec["tasks"]) or None,
        trials=spec["trials"],
        harness=canonical(spec["harness"]),
        harness_variant=spec.get("harness_variant", ""),
        max_tokens=spec["max_tokens"],
        thinking_budget=spec.get("thinking_budget"),
        api_key=api_key,
        home=home,
    )


def _pull_if_missing(state: JobRun, url: str) -> None:
    """An Ollama job for a model the host lacks pulls it first, streaming the progress."""
    from worker.pull import needs_pull, pull_model

    if needs_pull(url, state.spec["model"]):
        state.emit(
            {"type": "log", "message": f"{state.spec['model']} is not on this host; pulling it"}
        )
        pull_model(url, state.spec["model"], state.emit)


def _fail(state: JobRun, error: str) -> str:
    state.emit({"type": "run_failed", "error": error})
    _close_sender(state)
    state.call("fail", error=error, cancelled=False)
    return f"failed: {error}"
