"""Submission workflows: uploads, moderation, reports, withdrawal, API keys and device login."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.urls import reverse
from django.utils import timezone

from core import pagecache as board_cache
from core.links import absolute_url
from runs import bounds, normalize
from runs.importers import parse_run_payload
from runs.importers.records import RunRecord
from runs.importers.upgrade import UpgradedRun
from runs.models import Run
from runs.services import fingerprint, refresh_stack_stats, run_identity
from runs.tasks import refresh_stack_soon
from submissions import intake, integrity, keys
from submissions.access import is_moderator
from submissions.intake import set_published
from submissions.models import (
    ApiKey,
    Channel,
    DeviceAuthorization,
    ModerationDecision,
    RunReport,
    Status,
    Submission,
    SubmitterProfile,
    UploadAttempt,
)
from worker.rules.logcontext import bind_log_context, log_context

log = logging.getLogger(__name__)

# Fields that identify a machine or an endpoint; they are dropped before anything is stored.
PRIVATE_MACHINE_FIELDS = ("machine_id", "endpoint", "remote_host")
ID_FIELDS = ("client_run_id", "source_run_id", "run_id")


class SubmissionConflict(Exception):
    """The same run already belongs to another submitter."""


@dataclass
class UploadOutcome:
    submission: Submission
    created: bool
    duplicate: bool = False


def scrub_payload(payload: dict) -> dict:
    """The payload without machine ids, endpoints or a URL smuggled into machine.backend.

    Only the objects it changes are copied (the body and its machine): the rest, tasks
    included, is shared with `payload`, which is left as it was.
    """
    clean = _scrub_body(payload)
    if isinstance(clean.get("run"), dict):
        clean["run"] = _scrub_body(clean["run"])
    return clean


def _scrub_body(body: dict) -> dict:
    clean = {k: v for k, v in body.items() if k not in ("user_id", "traceback")}
    machine = clean.get("machine")
    if isinstance(machine, dict):
        machine = {
            k: v
            for k, v in machine.items()
            if k not in PRIVATE_MACHINE_FIELDS and k != "gpu_details"
        }
        backend = machine.get("backend")
        if isinstance(backend, str) and ":" in backend:
            machine["backend"] = backend.split(":", 1)[0]
        clean["machine"] = machine
    return clean


def content_hash(payload: dict) -> str:
    run = payload.get("run")
    body = run if isinstance(run, dict) else payload
    return normalize.canonical_hash({k: v for k, v in body.items() if k not in ID_FIELDS})


def submit_run(
    *,
    payload: dict,
    channel: str,
    submitter: User | None = None,
    api_key: ApiKey | None = None,
    uploader_key: str = "",
    is_verified: bool = False,
    upgraded: UpgradedRun | None = None,
    record: RunRecord | None = None,
    concerns: list[str] | None = None,
) -> UploadOutcome:
    """Store an upload once: repeats and identical content return the existing submission.

    `upgraded` is what `upgrade(payload)` returned, or `record` the payload parsed, when the
    caller has it already. `concerns` are what the caller found wrong with the run: they flag
    it for the moderators. Raises FormatError/UnsupportedVersion for bad payloads and
    SubmissionConflict when another account already owns the run.
    """
    record = record or parse_run_payload(payload, upgraded=upgraded)
    record.raw_payload = scrub_payload(payload)
    return submit_record(
        record,
        digest=content_hash(payload),
        channel=channel,
        submitter=submitter,
        api_key=api_key,
        uploader_key=uploader_key,
        is_verified=is_verified,
        concerns=concerns,
    )


def submit_record(
    record: RunRecord,
    *,
    digest: str,
    channel: str,
    submitter: User | None = None,
    api_key: ApiKey | None = None,
    uploader_key: str = "",
    is_verified: bool = False,
    concerns: list[str] | None = None,
) -> UploadOutcome:
    """submit_run for a record parsed already (a file another tool wrote: submissions.external);
    `digest` is the hash of what was sent, ids aside, which finds the submitter's repeats."""
    intake.check_record(record)
    if not record.client_run_id:
        record.client_run_id = f"content-{digest[:32]}"
    with log_context(client_run_id=record.client_run_id):
        outcome = _store_once(
            record,
            digest=digest,
            channel=channel,
            submitter=submitter,
            api_key=api_key,
            uploader_key=uploader_key,
            is_verified=is_verified,
            concerns=concerns,
        )
        submission = outcome.submission
        bind_log_context(run_id=submission.run_id)
        log.info(
            "upload %s: run %s, %s",
            "stored" if outcome.created else "repeats a stored one",
            submission.run_id,
            submission.status,
        )
    return outcome


def _store_once(
    record: RunRecord,
    *,
    digest: str,
    channel: str,
    submitter: User | None,
    api_key: ApiKey | None,
    uploader_key: str,
    is_verified: bool,
    concerns: list[str] | None,
) -> UploadOutcome:
    run_key = fingerprint(record)
    existing = _existing(record, submitter, digest, run_key)
    if existing:
        return existing
    try:
        with transaction.atomic():
            submission = _create(
                record,
                channel=channel,
                submitter=submitter,
                api_key=api_key,
                uploader_key=uploader_key,
                digest=digest,
                run_key=run_key,
                is_verified=is_verified,
                concerns=concerns or [],
            )
    except IntegrityError as exc:
        # Only a unique constraint can be a race: a concurrent identical upload won it, and the
        # repeat lookup now finds that upload (or raises SubmissionConflict for another
        # account's). Anything else (a check constraint, or a unique one that no repeat
        # explains) is a bug in the validation above, never "someone else's run".
        if _is_unique_violation(exc):
            existing = _existing(record, submitter, digest, run_key)
            if existing:
                return existing
        raise
    return UploadOutcome(submission=submission, created=True)


def _is_unique_violation(exc: IntegrityError) -> bool:
    cause = exc.__cause__
    sqlstate = getattr(cause, "sqlstate", None)  # psycopg
    if sqlstate is not None:
        return sqlstate == "23505"
    return str(cause or exc).startswith("UNIQUE constraint failed")  # sqlite3


# Which earlier submission an upload repeats, in order of precedence.
SAME_KEY, SAME_CONTENT, SAME_RUN = 1, 2, 3


def _existing(
    record: RunRecord, submitter: User | None, digest: str, run_key: str
) -> UploadOutcome | None:
    """The submission this upload repeats, if any.

    New uploads are the common case, so the three ways to match (the submitter's idempotency
    key, the submitter's identical content, and anyone's run with the same fingerprint) go to
    the database as one UNION of indexed lookups that returns ids only; the submission is
    loaded once one matches.

    Each lookup finds at most one row because a unique constraint says so (the run's
    fingerprint; the submitter with a non-empty client run id; the submitter with a non-empty
    content hash, and both are always set here), so no branch needs a LIMIT: SQLite refuses
    LIMIT inside a compound statement, and this one query serves both databases.
    """
    columns = ("match", "pk", "submitter_id", "content_hash")
    lookups = [Submission.objects.filter(run__fingerprint=run_key).annotate(match=Value(SAME_RUN))]
    if submitter is not None:
        mine = Submission.objects.filter(submitter=submitter)
        lookups += [
            mine.filter(client_run_id=record.client_run_id).annotate(match=Value(SAME_KEY)),
            mine.filter(content_hash=digest).annotate(match=Value(SAME_CONTENT)),
        ]
    first, *rest = (lookup.order_by().values_list(*columns) for lookup in lookups)
    found = {row[0]: row[1:] for row in first.union(*rest, all=True)}
    if SAME_KEY in found:
        pk, _owner, stored_hash = found[SAME_KEY]
        if stored_hash and stored_hash != digest:
            # An idempotency key reused for another body is a client bug, not a repeat.
            raise SubmissionConflict(
                f"client run id {record.client_run_id!r} was already used for a different run."
            )
        # A repeat under the same key stores nothing new: a duplicate, as the answer says.
        return UploadOutcome(
            submission=Submission.objects.get(pk=pk), created=False, duplicate=True
        )
    if SAME_CONTENT in found:
        pk = found[SAME_CONTENT][0]
    elif SAME_RUN in found:
        pk, owner, _hash = found[SAME_RUN]
        if owner != (submitter.id if submitter else None):
            raise SubmissionConflict("This run was already submitted by another account.")
    else:
        return None
    return UploadOutcome(submission=Submission.objects.get(pk=pk), created=False, duplicate=True)


def _create(
    record: RunRecord,
    *,
    channel: str,
    submitter: User | None,
    api_key: ApiKey | None,
    uploader_key: str,
    digest: str,
    run_key: str,
    is_verified: bool,
    concerns: list[str],
) -> Submission:
    stack, hardware = run_identity(record)
    # One check on every path, lab results included: a lab host reports its own card and
    # speeds, and a misreported card or a cached prompt is as wrong there as in an upload.
    reasons = list(concerns) + integrity.check_run(record, stack=stack, hardware=hardware)
    status = _initial_status(channel, submitter, reasons)
    (submission,) = intake.store_runs(
        [
            intake.NewRun(
                record=record,
                key=run_key,
                channel=channel,
                status=status,
                submitter=submitter,
                api_key=api_key,
                content_hash=digest if submitter else "",
                flag_reasons=reasons,
                uploader_key=uploader_key,
                is_verified=is_verified,
                identity=(stack, hardware),
            )
        ]
    )
    run = submission.run
    bind_log_context(run_id=run.pk)  # the lines about what follows name the stored run
    if status != Status.PENDING:
        ModerationDecision.objects.create(
            submission=submission,
            from_status=Status.PENDING,
            to_status=status,
            automatic=True,
            reason="; ".join(reasons) or f"auto-approved ({submission.get_channel_display()})",
        )
    UploadAttempt.objects.create(
        submitter=submitter,
        anonymous_key=uploader_key if not submitter else "",
        stack=run.stack,
        run=run,
    )
    if run.published:
        refresh_stack_soon(run.stack_id)
    return submission


def _initial_status(channel: str, submitter: User | None, reasons: list[str]) -> str:
    if channel == Channel.LAB_JOB and not reasons:
        return Status.APPROVED
    if reasons:
        return Status.FLAGGED
    if channel == Channel.LEGACY_ANONYMOUS or submitter is None:
        return Status.PENDING  # anonymous uploads are never auto-approved
    return Status.APPROVED if _is_trusted(submitter) else Status.PENDING


def _is_trusted(user: User) -> bool:
    # API-key uploads arrive with the profile already joined in (ApiKeyAuthentication).
    try:
        return user.submitter_profile.is_trusted
    except SubmitterProfile.DoesNotExist:
        return False


class SelfModerationError(PermissionDenied):
    """Nobody decides on their own run, superusers included."""


def moderate_submission(
    *,
    submission: Submission,
    status: str,
    moderator: User | None,
    reason: str = "",
    automatic: bool = False,
) -> Submission:
    """Record a decision in the audit log, publish or hide the run, and tell the submitter.

    A person's decision also resolves the run's open reports. Raises SelfModerationError when
    the moderator is the run's submitter; withdrawing one's own run is the one exception (it
    is the owner's right, not a moderation decision).
    """
    with transaction.atomic():
        locked = Submission.objects.select_for_update().select_related("run").get(pk=submission.pk)
        if (
            moderator is not None
            and locked.submitter_id == moderator.pk
            and status != Status.WITHDRAWN
        ):
            raise SelfModerationError("Nobody moderates their own runs.")
        previous = locked.status
        locked.status = status
        locked.moderation_note = reason
        locked.decided_at = timezone.now()
        locked.save(update_fields=["status", "moderation_note", "decided_at"])
        ModerationDecision.objects.create(
            submission=locked,
            moderator=moderator,
            from_status=previous,
            to_status=status,
            reason=reason,
            automatic=automatic,
        )
        if moderator is not None and not automatic:
            RunReport.objects.open().filter(run_id=locked.run_id).update(
                resolved_at=locked.decided_at, resolved_by=moderator
            )
        set_published(locked.run, status, decided_at=locked.decided_at)
        # A decision shows on the leaderboard at once (the default view reads the stack's
        # best run); refreshing one stack is a handful of indexed queries. The worker refreshes
        # it again after the commit, when decisions on the same stack made concurrently in
        # other transactions are visible too.
        refresh_stack_stats(stack_ids=[locked.run.stack_id])
        refresh_stack_soon(locked.run.stack_id)
        submitter = locked.submitter  # (a null one reads as None without a query)
        if submitter is not None and submitter.email and previous != status:
            address = submitter.email
            transaction.on_commit(lambda: _notify_decision(locked, address))
    submission.refresh_from_db()
    return submission


def _notify_decision(submission: Submission, address: str) -> None:
    run = submission.run
    send_mail(
        # One line whatever the stored id holds: a newline would make send_mail refuse it.
        subject=bounds.one_line(
            f"BenchLoop: your run of {run.stack.model_id} is {submission.status}"
        ),
        message=(
            f"Your run {submission.client_run_id} of {run.stack.label} is now "
            f"{submission.status}.\n\nModerator's note: {submission.moderation_note or '—'}\n\n"
            # An email is read away from the site: only absolute links work there.
            f"The run: {absolute_url(reverse('leaderboard:run', args=[run.pk]))}\n"
            f"Your runs: {absolute_url(reverse('accounts:runs'))}\n"
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[address],
        fail_silently=True,
    )


def report_run(*, run: Run, reporter: User, reason: str) -> RunReport:
    """Record a signed-in user's report; it reaches the moderation queue at once.

    A report hides an approved run (sends it back to flagged) only when it comes from someone
    with standing (a moderator or a trusted submitter), or once BENCHLOOP_REPORTS_TO_HIDE_RUN
    distinct accounts other than the submitter have open reports on it: one ordinary account
    must not be able to unpublish runs by reporting each once. Reporting again after a
    moderator's decision reopens the same report.
    """
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(run=run)
        report, created = RunReport.objects.get_or_create(
            run=run, reporter=reporter, defaults={"reason": reason[:2000]}
        )
        if not created:
            report.reason = reason[:2000]
            report.resolved_at = None
            report.resolved_by = None
            report.save(update_fields=["reason", "resolved_at", "resolved_by"])
        if submission.status != Status.APPROVED:
            return report
        reporters = (
            RunReport.objects.open()
            .filter(run=run)
            .exclude(reporter_id=submission.submitter_id)
            .values("reporter_id")
            .distinct()
            .count()
        )
        if has_standing(reporter):
            why = f"reported by {reporter.get_username()}: {reason[:500]}"
        elif reporters >= settings.BENCHLOOP_REPORTS_TO_HIDE_RUN:
            why = f"reported by {reporters} users; latest: {reason[:500]}"
        else:
            return report
        moderate_submission(
            submission=submission, status=Status.FLAGGED, moderator=None, reason=why, automatic=True
        )
    return report


def has_standing(user: User) -> bool:
    """Moderators and trusted submitters: their reports act at once."""
    return is_moderator(user) or _is_trusted(user)


def withdraw_run(*, submission: Submission, user: User) -> Submission:
    return moderate_submission(
        submission=submission,
        status=Status.WITHDRAWN,
        moderator=user,
        reason="withdrawn by its submitter",
    )


def delete_run(*, submission: Submission) -> None:
    """The owner's right to erase: the run, its results and its submission go."""
    erase_run(run=Run(pk=submission.run_id))


def erase_run(*, run: Run) -> None:
    """Delete a run with its results and submission; its stack's lanes and the caches follow
    at once (and again after the commit, with concurrent decisions visible)."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        stack_id = locked.stack_id
        UploadAttempt.objects.filter(run=locked).update(run=None)
        locked.delete()
        refresh_stack_stats(stack_ids=[stack_id])
        board_cache.invalidate()
        refresh_stack_soon(stack_id)


def set_run_visibility(*, run: Run, visibility: str) -> Run:
    """Make a run public or private: its published flag, the caches and its stack follow."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        locked.visibility = visibility
        locked.save(update_fields=["visibility"])
        submission = Submission.objects.filter(run_id=locked.pk).first()
        set_published(locked, submission.status if submission else Status.PENDING)
        refresh_stack_stats(stack_ids=[locked.stack_id])
        refresh_stack_soon(locked.stack_id)
    return locked


def set_trusted(*, user: User, trusted: bool, moderator: User) -> SubmitterProfile:
    """Trust a submitter (their clean uploads skip the queue) or stop trusting them.

    Moderators only, whoever calls, and never for themselves: raises PermissionDenied.
    Runs already waiting keep waiting for a decision.
    """
    if not is_moderator(moderator):
        raise PermissionDenied("Only moderators can trust submitters.")
    if user.pk == moderator.pk:
        raise PermissionDenied("Moderators do not vouch for themselves.")
    with transaction.atomic():
        profile, _ = SubmitterProfile.objects.select_for_update().get_or_create(user=user)
        profile.is_trusted = trusted
        profile.trusted_by = moderator if trusted else None
        profile.trusted_at = timezone.now() if trusted else None
        profile.save(update_fields=["is_trusted", "trusted_by", "trusted_at"])
    return profile


def create_api_key(*, user: User, name: str, scopes: list[str]) -> tuple[ApiKey, str]:
    """The new key row and its plaintext, which is never stored and never shown again."""
    unknown = set(scopes) - set(ApiKey.SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be a non-empty subset of {ApiKey.SCOPES}")
    plaintext, prefix, hashed = keys.new_api_key()
    api_key = ApiKey.objects.create(
        user=user,
        name=name[:100] or "key",
        prefix=prefix,
        hashed_key=hashed,
        scopes=sorted(set(scopes)),
    )
    return api_key, plaintext


DEVICE_CODE_LIFETIME = timedelta(minutes=10)


def start_device_authorization(*, client_name: str = "") -> tuple[DeviceAuthorization, str]:
    """A new pending login; the device code goes to the CLI only, its hash is stored."""
    device_code = keys.new_device_code()
    for _ in range(5):
        try:
            with transaction.atomic():
                auth = DeviceAuthorization.objects.create(
                    device_code_hash=keys.keyed_hash(device_code, purpose="device-code"),
                    user_code=keys.new_user_code(),
                    client_name=client_name[:100],
                    interval=settings.DEVICE_POLL_INTERVAL,
                    expires_at=timezone.now() + DEVICE_CODE_LIFETIME,
                )
            return auth, device_code
        except IntegrityError:
            continue  # a user code collision: draw again
    raise RuntimeError("could not allocate a unique user code")


def approve_device_authorization(*, user_code: str, user: User) -> DeviceAuthorization | None:
    """Approve a pending, unexpired code for this user; None when there is no such code."""
    return decide_device_authorization(user_code=user_code, user=user, approve=True)


def decide_device_authorization(
    *, user_code: str, user: User, approve: bool
) -> DeviceAuthorization | None:
    """Approve or deny a pending, unexpired code; None when there is no such code. A denied
    login's next poll answers access_denied (RFC 8628 section 3.5) and it never gets a key."""
    code = user_code.strip().upper().replace(" ", "")
    if len(code) == 8:
        code = f"{code[:4]}-{code[4:]}"
    states = DeviceAuthorization.State
    updated = DeviceAuthorization.objects.filter(
        user_code=code, state=states.PENDING, expires_at__gt=timezone.now()
    ).update(state=states.APPROVED if approve else states.DENIED, user=user)
    return DeviceAuthorization.objects.filter(user_code=code).first() if updated else None


class DeviceTokenError(Exception):
    """An RFC 8628 (section 3.5) error code for a poll, with why in words."""

    def __init__(self, code: str, message: str, retry_after: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


def poll_device_token(*, device_code: str) -> str:
    """The plaintext API key once approved (exactly once); otherwise a DeviceTokenError."""
    digest = keys.keyed_hash(device_code, purpose="device-code")
    now = timezone.now()
    error: DeviceTokenError | None = None
    plaintext = ""
    # The poll time must be saved even when the answer is an error, so decide inside the
    # transaction and raise only after it commits.
    with transaction.atomic():
        auth = (
            DeviceAuthorization.objects.select_for_update().filter(device_code_hash=digest).first()
        )
        if auth is None:
            error = DeviceTokenError("invalid_grant", "Unknown device code.")
        elif auth.state == DeviceAuthorization.State.CONSUMED:
            error = DeviceTokenError("invalid_grant", "This device code was already used.")
        elif auth.expires_at <= now:
            error = DeviceTokenError("expired_token", "This device code has expired.")
        elif auth.state == DeviceAuthorization.State.DENIED:
            error = DeviceTokenError("access_denied", "The request was denied.")
        elif auth.last_polled_at and now - auth.last_polled_at < timedelta(seconds=auth.interval):
            auth.interval = min(auth.interval + 5, 60)
            auth.last_polled_at = now
            auth.save(update_fields=["last_polled_at", "interval"])
            error = DeviceTokenError(
                "slow_down", f"Poll at most every {auth.interval} s.", auth.interval
            )
        elif auth.state == DeviceAuthorization.State.PENDING:
            auth.last_polled_at = now
            auth.save(update_fields=["last_polled_at"])
            error = DeviceTokenError("authorization_pending", "Waiting for approval.")
        else:
            # Approved: decide_device_authorization set the approving account with the state.
            approver = cast(User, auth.user)
            api_key, plaintext = create_api_key(
                user=approver, name=f"benchloop login {auth.user_code}", scopes=["submit", "read"]
            )
            auth.state = DeviceAuthorization.State.CONSUMED
            auth.api_key = api_key
            auth.last_polled_at = now
            auth.save(update_fields=["state", "api_key", "last_polled_at"])
    if error:
        raise error
    return plaintext
