"""Lab queue workflows: queue, cancel, claim, record progress, finish, reap; hosts."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from lab import dispatch, inventory
from lab.models import BenchmarkJob, JobEvent, QuickPrompt, WorkerHost, pool_name
from runs import bounds, limits
from submissions.models import Channel
from worker.rules.protocol import MAX_EVENTS_PER_JOB

if TYPE_CHECKING:  # for annotations only: finish_job imports runs.importers when it runs
    from runs.importers.upgrade import UpgradedRun

log = logging.getLogger(__name__)
Status = BenchmarkJob.Status
# A claimed or running job whose worker has been silent this long is presumed dead.
STALE_AFTER = timedelta(seconds=settings.BENCHLOOP_JOB_STALE_SECONDS)
# A queued job not yet accepted by the broker after this long is sent again by the reaper.
UNSENT_GRACE = timedelta(seconds=10)


class JobClosed(Exception):
    """The job is not this host's attempt to report on any more (another attempt has it, or it
    ended, or its run came after a cancel): nothing of the request was stored."""


class EventLimit(Exception):
    """The job already holds as many events as a job may keep."""


@dataclass
class Placement:
    """Where a job will run: its fields with the pool (and a picked server's URL and model)
    filled in, and a warning when the hosts that serve the pool are all offline."""

    fields: dict
    hosts: list[WorkerHost]
    warning: str = ""


def place_job(
    *, fields: dict, host_name: str = "", server_url: str = "", server_model: str = ""
) -> Placement:
    """Decide the pool of a job about to be queued; the new-job form and the API both call it.

    A job for a server a host reported goes to that host's own queue: the server's URL is the
    host's (often loopback), so another host serving the same pool could not reach it, and
    the model is the one the server names unless the operator typed another. Otherwise the
    pool must be one that an approved host serves, or the job would wait forever. Raises
    ValidationError naming the field to fix.
    """
    fields = dict(fields)
    approved = list(WorkerHost.objects.approved())
    if host_name:
        host = next((h for h in approved if h.name == host_name), None)
        if host is None:
            raise ValidationError({"server": f"No approved lab host is named {host_name}."})
        try:
            pool_name(host.queue_name)
            if len(host.queue_name) > limits.max_length(BenchmarkJob, "pool"):
                raise ValidationError("too long")
        except ValidationError:
            # Host names are free text; pools are not (lower case, 64 characters at most).
            raise ValidationError(
                {
                    "server": f"Jobs cannot be sent to {host.name}'s own queue: rename the host in "
                    "lower-case letters, digits, dots and dashes, or pick a pool it serves."
                }
            ) from None
        if server_url:
            fields["target"] = BenchmarkJob.Target.ENDPOINT
            fields["endpoint_url"] = fields.get("endpoint_url") or server_url
        if server_model and not fields.get("model"):
            fields["model"] = server_model
        fields["pool"] = host.queue_name
        hosts = [host]
    else:
        pool = fields.get("pool") or ""
        if not pool:
            raise ValidationError({"pool": "Pick a server or a pool for the job."})
        hosts = [h for h in approved if h.serves(pool)]
        if not hosts:
            served = sorted({p for h in approved for p in h.pools})
            raise ValidationError(
                {
                    "pool": f"No approved lab host serves the pool “{pool}”, so the job would "
                    "wait forever. "
                    + (
                        f"Pools served now: {', '.join(served)}."
                        if served
                        else "No host is approved yet (an admin approves them on the hosts page)."
                    )
                }
            )
    warning = ""
    if not any(h.is_online for h in hosts):
        names = ", ".join(h.name for h in hosts)
        warning = (
            f"Every host that serves pool {fields['pool']} is offline ({names}): "
            "the job waits until one of them is back."
        )
    return Placement(fields=fields, hosts=hosts, warning=warning)


def served_pools() -> list[str]:
    """The pools approved hosts serve, for the new-job form's choices."""
    return sorted({pool for host in WorkerHost.objects.approved() for pool in host.pools})


def queue_job(*, requested_by: User, **fields) -> BenchmarkJob:
    """Validate and store a job; it is sent to its pool's queue once the transaction commits."""
    job = BenchmarkJob(requested_by=requested_by, **fields)
    job.full_clean(exclude=["requested_by"])
    with transaction.atomic():
        job.save()
        _enqueue_on_commit(job)
    return job


def _enqueue_on_commit(job: BenchmarkJob) -> None:
    pool, priority, job_id = job.pool, job.priority, job.pk
    transaction.on_commit(lambda: dispatch_job(job_id=job_id, pool=pool, priority=priority))


def dispatch_job(*, job_id: int, pool: str, priority: int) -> bool:
    """Send a stored job to its pool's queue; False (job left to the reaper) if the broker is down.

    The job row is already committed, so a broker outage must not turn the request into an
    error: the job stays queued without ``dispatched_at``, and ``reap_stale_jobs`` sends it
    again once the broker answers. Claiming is atomic, so a duplicate message is harmless.
    """
    try:
        # Celery serves lower priority numbers first; ours count up from 0 (low) to 9 (high).
        dispatch.send_job(job_id, queue=pool, priority=9 - priority)
    except (BrokerError, OSError) as exc:
        log.warning("job %s not sent, the broker is unreachable: %s", job_id, exc)
        return False
    BenchmarkJob.objects.filter(pk=job_id, status=Status.QUEUED).update(
        dispatched_at=timezone.now()
    )
    return True


def cancel_job(*, job: BenchmarkJob) -> BenchmarkJob:
    """A queued job is cancelled at once; a running one stops at its next task boundary."""
    now = timezone.now()
    with transaction.atomic():
        if BenchmarkJob.objects.filter(pk=job.pk, status=Status.QUEUED).update(
            status=Status.CANCELLED,
            cancel_requested_at=now,
            finished_at=now,
            error="cancelled before it started",
        ):
            _record(job.pk, job.attempts, "cancelled", {"reason": "cancelled while queued"})
            # Like every other final state: the requester hears of it (email, webhook).
            _notify_on_commit(job)
        else:
            BenchmarkJob.objects.filter(
                pk=job.pk, status__in=[Status.CLAIMED, Status.RUNNING], cancel_requested_at=None
            ).update(cancel_requested_at=now)
    job.refresh_from_db()
    return job


def claim_job(*, job_id: int, host: WorkerHost) -> BenchmarkJob | None:
    """Take the job for this host, or None if another worker has it or it is finished.

    A redelivered message finds the job already claimed and does nothing. A job whose worker
    died (stale heartbeat) may be claimed again; its attempt number grows.
    """
    now = timezone.now()
    claimable = Q(status=Status.QUEUED) | Q(
        status__in=[Status.CLAIMED, Status.RUNNING], heartbeat_at__lt=now - STALE_AFTER
    )
    # Only a job sent to one of the host's pools (or its own queue) is the host's to take.
    serves = Q(pool__in=host.pools or []) | Q(pool=host.queue_name)
    updated = BenchmarkJob.objects.filter(
        claimable, serves, pk=job_id, attempts__lt=F("max_attempts"), cancel_requested_at=None
    ).update(
        status=Status.CLAIMED,
        host=host,
        claimed_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
        error="",
    )
    if not updated:
        return None
    WorkerHost.objects.filter(pk=host.pk).update(current_job_id=job_id)
    return BenchmarkJob.objects.get(pk=job_id)


def _still_ours(job_id: int, attempt: int):
    return BenchmarkJob.objects.filter(
        pk=job_id, attempts=attempt, status__in=[Status.CLAIMED, Status.RUNNING]
    )


def still_ours(*, job_id: int, attempt: int) -> bool:
    """Whether `attempt` still owns the job (not reaped, finished or handed to another)."""
    return _still_ours(job_id, attempt).exists()


def mark_running(*, job_id: int, attempt: int) -> bool:
    return bool(
        _still_ours(job_id, attempt).update(
            status=Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
        )
    )


def heartbeat(*, job_id: int, attempt: int) -> bool:
    """Keep the claim alive; False once the job is no longer this attempt's to run."""
    return bool(_still_ours(job_id, attempt).update(heartbeat_at=timezone.now()))


def cancel_requested(job_id: int) -> bool:
    return BenchmarkJob.objects.filter(pk=job_id, cancel_requested_at__isnull=False).exists()


def _record(job_id: int, attempt: int, kind: str, payload: dict) -> JobEvent:
    seq = (
        JobEvent.objects.filter(job_id=job_id, attempt=attempt)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
        or 0
    ) + 1
    return JobEvent.objects.create(
        job_id=job_id, attempt=attempt, seq=seq, kind=kind, payload=payload
    )


def _closed(job: BenchmarkJob | None, host: WorkerHost, attempt: int) -> str:
    """Why `attempt` of `host` may not report on the job any more, or "" while it may."""
    if job is None or job.host_id != host.pk or job.attempts != attempt:
        return "This is not the job's current attempt: nothing was stored."
    if job.is_final:
        return f"The job has ended ({job.status}): nothing was stored."
    if job.status not in (Status.CLAIMED, Status.RUNNING):
        return f"The job is {job.status}, not running: nothing was stored."
    return ""


def _current(job_id: int, host: WorkerHost, attempt: int) -> BenchmarkJob:
    """The job, locked until the transaction ends, while `attempt` of `host` still runs it;
    JobClosed otherwise. Call it inside transaction.atomic()."""
    job = BenchmarkJob.objects.select_for_update().filter(pk=job_id).first()
    reason = _closed(job, host, attempt)
    if reason or job is None:
        raise JobClosed(reason)
    return job


def record_events(
    *,
    job_id: int,
    host: WorkerHost,
    attempt: int,
    events: list[tuple[int, dict]],
    live: dict | None = None,
) -> None:
    """Store an attempt's events (each once: a replay's are known by their numbers) and move
    its progress, while the attempt still runs the job. The check and the writes are one
    transaction on the locked job, so an event never lands after the job ended. Raises
    JobClosed, or EventLimit when the job would hold more than MAX_EVENTS_PER_JOB."""
    with transaction.atomic():
        _current(job_id, host, attempt)
        fresh = dict(sorted(events, key=lambda item: item[0]))
        stored = JobEvent.objects.filter(job_id=job_id, attempt=attempt, seq__in=list(fresh))
        for seq in stored.values_list("seq", flat=True):
            fresh.pop(seq, None)
        held = JobEvent.objects.filter(job_id=job_id).count() if fresh else 0
        if held + len(fresh) > MAX_EVENTS_PER_JOB:
            raise EventLimit(
                f"A job keeps at most {MAX_EVENTS_PER_JOB} events; this one holds {held}, "
                f"and {len(fresh)} more were sent. None of them was stored."
            )
        for seq, event in fresh.items():
            record_event(job_id=job_id, attempt=attempt, seq=seq, event=event)
        if live:
            update_live_progress(job_id=job_id, attempt=attempt, event=live)


def update_live_progress(*, job_id: int, attempt: int, event: dict) -> None:
    fields: dict = {"heartbeat_at": timezone.now()}
    if event.get("live_tps"):
        fields["last_decode_tps"] = float(event["live_tps"])
    _still_ours(job_id, attempt).update(**fields)


def record_event(*, job_id: int, attempt: int, seq: int, event: dict) -> bool:
    """Store one engine event (idempotent on its sequence number) and update the progress.

    Events carry an endpoint's words (its errors, its model names): what no database can store
    is replaced rather than refused, since losing the event would lose the job's story."""
    kind = bounds.storable_text(str(event.get("type", "log")))[
        : limits.max_length(JobEvent, "kind")
    ]
    # A dict in, a dict out (storable_json keeps the shape).
    payload = cast(
        dict[str, Any],
        bounds.storable_json({k: v for k, v in event.items() if k not in ("type", "path")}),
    )
    try:
        with transaction.atomic():
            JobEvent.objects.create(
                job_id=job_id, attempt=attempt, seq=seq, kind=kind, payload=payload
            )
    except IntegrityError:
        return False  # already recorded: a replay after a reconnect
    progress: dict = {"heartbeat_at": timezone.now()}
    if kind == "run_started":
        progress["total_tasks"] = int(payload.get("total_tasks") or 0)
        progress["completed_tasks"] = 0
    elif kind == "suite_started":
        progress["current_suite"] = str(payload.get("suite", ""))[
            : limits.max_length(BenchmarkJob, "current_suite")
        ]
    elif kind == "task_started":
        progress["current_task"] = str(payload.get("task_id", ""))[
            : limits.max_length(BenchmarkJob, "current_task")
        ]
    elif kind == "task_completed":
        progress["completed_tasks"] = int(payload.get("completed_tasks") or 0)
        if payload.get("decode_tps"):
            progress["last_decode_tps"] = float(payload["decode_tps"])
    _still_ours(job_id, attempt).update(**progress)
    return True


def finish_job(
    *,
    job_id: int,
    host: WorkerHost,
    attempt: int,
    upload: dict,
    upgraded: UpgradedRun | None = None,
) -> BenchmarkJob:
    """Store the bundle as a run, only while `attempt` of `host` runs the job and nobody asked
    it to stop; idempotent per job. It is verified and auto-approved when it was measured on
    the machine the host was approved as, else self-reported and flagged for the moderators
    with the difference (lab.inventory). The check, the run and the job's
    success are one transaction on the locked job. Raises JobClosed (nothing stored) otherwise;
    a run that comes after a cancel request ends the job as cancelled. `upgraded` is what the
    upload check returned (lab.agent_api), as for every other upload."""
    from runs.importers import parse_run_payload
    from submissions.models import Submission
    from submissions.services import submit_run

    client_run_id = f"lab-job-{job_id}"
    record = parse_run_payload({**upload, "client_run_id": client_run_id}, upgraded=upgraded)
    with _follow_ups_may_be_lost(job_id), transaction.atomic():
        job = BenchmarkJob.objects.select_for_update().filter(pk=job_id).first()
        if job and (job.status, job.host_id, job.attempts) == (Status.SUCCEEDED, host.pk, attempt):
            return job  # this attempt's own upload again: its answer was lost
        reason = _closed(job, host, attempt)
        if job is None:  # (reason says so; nothing was written)
            raise JobClosed(reason)
        current = WorkerHost.objects.approved().select_related("hardware").filter(pk=host.pk)
        approved = current.first()
        if not reason and approved is None:
            reason = "This host is awaiting approval: its run was not stored."
        if not reason and job.cancel_requested_at is not None:
            # It finished before it saw the request: the operator's word stands.
            _end(job, Status.CANCELLED, error="cancelled; the run that came after was not stored")
            reason = "The job was cancelled: its run was not stored."
        if not reason and approved is not None:  # (so the job is this attempt's, host approved)
            # An earlier attempt's run, stored with the job's success, is kept as it is.
            existing = Submission.objects.filter(
                submitter=job.requested_by, client_run_id=client_run_id
            ).first()
            if existing is None:
                # Verified only on the machine the host was approved as (lab.inventory).
                mismatch = inventory.hardware_mismatch(approved, record)
                existing = submit_run(
                    payload={**upload, "client_run_id": client_run_id},
                    channel=Channel.LAB_JOB,
                    submitter=job.requested_by,
                    is_verified=not mismatch,
                    record=record,
                    concerns=[mismatch] if mismatch else [],
                ).submission
            _end(job, Status.SUCCEEDED, run=existing.run)
    if reason or job is None:
        raise JobClosed(reason)
    job.refresh_from_db()
    return job


def _end(job: BenchmarkJob, status: str, *, run=None, error: str = "") -> None:
    """Finish a locked job (inside its transaction) and tell its requester once committed."""
    job.status, job.finished_at = status, timezone.now()
    fields = ["status", "finished_at"]
    if run is not None:
        job.run = run
        fields.append("run")
    if error:
        job.error = error
        fields.append("error")
    job.save(update_fields=fields)
    _release_host(job.pk)
    _notify_on_commit(job)


def fail_job(*, job_id: int, attempt: int, error: str, cancelled: bool = False) -> BenchmarkJob:
    status = Status.CANCELLED if cancelled else Status.FAILED
    with _follow_ups_may_be_lost(job_id), transaction.atomic():
        _still_ours(job_id, attempt).update(
            status=status, finished_at=timezone.now(), error=bounds.storable_text(error)[:5000]
        )
        _release_host(job_id)
        job = BenchmarkJob.objects.get(pk=job_id)
        if job.status == status:
            _notify_on_commit(job)
    return BenchmarkJob.objects.get(pk=job_id)


@contextmanager
def _follow_ups_may_be_lost(job_id: int) -> Iterator[None]:
    """A broker outage while a job ends must not undo or misreport the stored outcome.

    The tasks queued with on_commit (the notice, the stack stats refresh) are published after
    the commit, so when the broker is down the outcome is already stored: log and go on. Without
    this the runner saw an exception after a successful finish and added a stray run_failed.
    """
    try:
        yield
    except BrokerError:
        log.warning(
            "job %s: stored, but its follow-up tasks were lost (broker down)", job_id, exc_info=True
        )


def requeue_job(*, job_id: int, attempt: int, error: str) -> bool:
    """Give a transiently failed attempt back to the queue (the retry will claim it anew)."""
    return bool(
        _still_ours(job_id, attempt).update(
            status=Status.QUEUED, error=bounds.storable_text(error)[:5000], heartbeat_at=None
        )
    )


def _release_host(job_id: int) -> None:
    WorkerHost.objects.filter(current_job_id=job_id).update(current_job=None)


def _notify_on_commit(job: BenchmarkJob) -> None:
    dispatch.send_on_commit(dispatch.NOTIFY_JOB_FINISHED, job.pk)


def reap_stale_jobs(*, now=None, limit: int = 200) -> dict[str, int]:
    """Requeue jobs whose worker died, or fail them once their attempts are used up; resend
    queued jobs whose message never reached the broker."""
    now = now or timezone.now()
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    unsent = BenchmarkJob.objects.undispatched(now - UNSENT_GRACE).order_by("created_at")
    for job_id, pool, priority in unsent.values_list("pk", "pool", "priority")[:limit]:
        counts["resent"] += dispatch_job(job_id=job_id, pool=pool, priority=priority)
    for job in BenchmarkJob.objects.stale(now - STALE_AFTER).order_by("heartbeat_at")[:limit]:
        with transaction.atomic():
            live = (
                BenchmarkJob.objects.select_for_update(skip_locked=True)
                .filter(
                    pk=job.pk,
                    status__in=[Status.CLAIMED, Status.RUNNING],
                    heartbeat_at__lt=now - STALE_AFTER,
                )
                .first()
            )
            if live is None:
                continue
            _record(
                live.pk, live.attempts, "log", {"message": f"worker {live.host} stopped responding"}
            )
            if live.attempts < live.max_attempts and live.cancel_requested_at is None:
                live.status = Status.QUEUED
                live.heartbeat_at = None
                live.dispatched_at = None
                live.save(update_fields=["status", "heartbeat_at", "dispatched_at"])
                _enqueue_on_commit(live)
                counts["requeued"] += 1
            else:
                live.status = Status.CANCELLED if live.cancel_requested_at else Status.FAILED
                live.error = "the worker running this job stopped responding"
                live.finished_at = now
                live.save(update_fields=["status", "error", "finished_at"])
                _notify_on_commit(live)
                counts["failed"] += 1
            _release_host(live.pk)
    if any(counts.values()):
        # Said only when it acted: Celery's own lines about an idle run are debug (quietlogs).
        log.info("reaper: %s", ", ".join(f"{n} {what}" for what, n in counts.items() if n))
    return counts


def register_host(*, name: str, pools: list[str], hardware_info: dict) -> WorkerHost:
    """Create or update a host's record; approval stays an admin's decision. A name or pool
    that cannot be one raises ValueError before anything is stored.

    An admin approves a host with the pools it serves and the machine it is (its hardware's
    identity). A registration that changes either withdraws the approval until an admin looks
    again: a host cannot move itself into another pool, or become another machine, on its own
    word. Details that leave the identity as it is (a driver update) are kept without that."""
    problem = bounds.text_problem(name) or (
        "is too long" if len(name) > limits.max_length(WorkerHost, "name") else ""
    )
    if not name or problem:
        raise ValueError(f"lab host name {name[:100]!r} {problem or 'is empty'}")
    for pool in pools:
        try:
            pool_name(pool)
        except ValidationError:
            raise ValueError(f"pool {pool[:70]!r} is not a pool name (e.g. gpu.4090)") from None
    hardware_info = cast(dict[str, Any], bounds.storable_json(hardware_info))  # dict in, dict out
    hardware = inventory.machine_of(hardware_info)
    fields = {
        "pools": sorted(set(pools)),
        "hardware_info": hardware_info,
        "hardware": hardware,
        "last_heartbeat_at": timezone.now(),
    }
    host, created = WorkerHost.objects.get_or_create(name=name, defaults=fields)
    if created:
        return host  # a new host awaits approval anyway
    with transaction.atomic():
        host = WorkerHost.objects.select_for_update().get(pk=host.pk)
        changed = sorted(set(host.pools or [])) != fields["pools"]
        changed = changed or host.hardware_id != hardware.pk
        if changed and host.is_approved:
            log.warning(
                "lab host %s asks for pools %s on %s (approved: %s on %s): awaiting approval",
                name,
                fields["pools"],
                hardware,
                host.pools,
                host.hardware,
            )
            fields |= {"approved_at": None, "approved_by": None}
        for key, value in fields.items():
            setattr(host, key, value)
        host.save(update_fields=list(fields))
    return host


def host_heartbeat(*, name: str, inventory: list | None = None) -> WorkerHost | None:
    fields: dict = {"last_heartbeat_at": timezone.now()}
    if inventory is not None:
        # The model names and errors are the endpoints' own words.
        fields["inventory"] = bounds.storable_json(inventory)
    WorkerHost.objects.filter(name=name).update(**fields)
    return WorkerHost.objects.filter(name=name).first()


def approve_host(*, host: WorkerHost, user: User | None, approved: bool = True) -> WorkerHost:
    host.approved_at = timezone.now() if approved else None
    host.approved_by = user if approved else None
    host.save(update_fields=["approved_at", "approved_by"])
    return host


def request_quick_prompt(
    *, host: WorkerHost, user: User, server_url: str, model: str, prompt: str
) -> QuickPrompt:
    """Store the prompt; the host's agent picks it up from its own prompt thread within a
    second or so (worker/agent/prompts.py), not through the benchmark queue."""
    return QuickPrompt.objects.create(
        host=host, requested_by=user, server_url=server_url, model=model, prompt=prompt[:4000]
    )
