"""The one write path for runs: every run is stored here, with its submission.

API uploads and the legacy /submit (submissions.services.submit_run, which lab results use
too), `import_results` and `seed_demo` all call `store_runs`. A run's row comes from
runs.services.new_run and its submission's from `submission_row`; whether the rows then go
as INSERTs or through COPY (runs.bulk) is the transport, chosen per database, never a second
copy of how a run is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import pagecache
from runs import bulk, limits
from runs.importers.records import RunRecord
from runs.models import Hardware, Outcome, Run, Stack, Visibility
from runs.services import fingerprint, new_run, refresh_stack_stats, resolve_identities
from submissions import integrity
from submissions.models import ApiKey, Channel, Status, Submission


@dataclass
class NewRun:
    """One run to store: its record, and who delivered it how."""

    record: RunRecord
    channel: str
    status: str
    key: str = ""  # the run's fingerprint; worked out from the record when empty
    submitter: User | None = None
    api_key: ApiKey | None = None
    # An imported author's name (accounts' runs and anonymous uploads have none).
    submitter_name: str = ""
    source_name: str = ""
    content_hash: str = ""
    flag_reasons: list[str] = field(default_factory=list)
    uploader_key: str = ""
    is_demo: bool = False
    is_verified: bool = False
    # The run's (stack, machine) when the caller resolved them already (uploads check the
    # record against them before choosing the status).
    identity: tuple[Stack, Hardware | None] | None = None


@dataclass
class ImportResult:
    created: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def stack_ids(self) -> set[int]:
        return {run.stack_id for run in self.created}


def is_public(status: str, visibility: str, outcome: str) -> bool:
    """Whether a run with this moderation status, visibility and outcome is on public pages."""
    return (
        status == Status.APPROVED
        and visibility == Visibility.PUBLIC
        and outcome == Outcome.COMPLETE
    )


def set_published(run: Run, status: str, *, decided_at: datetime | None = None) -> None:
    """Keep the denormalised `published` flag in step with moderation and visibility, and
    `approved_at` with the submission's decision (`decided_at`, when one was just made)."""
    published = is_public(status, run.visibility, run.outcome)
    changed = []
    if decided_at is not None and decided_at != run.approved_at:
        run.approved_at = decided_at
        changed.append("approved_at")
    if published != run.published:
        run.published = published
        changed.append("published")
    if changed:
        run.save(update_fields=changed)
    if "published" in changed:
        pagecache.invalidate()


def check_record(record: RunRecord) -> None:
    """runs.limits.check_record, with the submission's columns too."""
    limits.check_record(record, owners=(Submission,))


def records_problem(records: Iterable[RunRecord]) -> str:
    """runs.limits.records_problem, with the submission's columns too."""
    return limits.records_problem(records, owners=(Submission,))


def store_runs(entries: list[NewRun], *, copy: bool | None = None) -> list[Submission]:
    """Store each entry's run (hardware, stack, suites, tasks, samples) and its submission, in
    the caller's transaction; the submissions, in order, each with its saved run.

    Entries must be new runs that passed `check_record`. Each run is published from its
    INSERT when its status makes it public. `copy` picks the transport (runs.bulk.uses_copy):
    by default COPY on PostgreSQL, INSERTs elsewhere; the rows are the same either way.
    """
    unresolved = [entry for entry in entries if entry.identity is None]
    for entry, identity in zip(
        unresolved, resolve_identities([e.record for e in unresolved]), strict=True
    ):
        entry.identity = identity
    class_ids: dict[str, int] = {}  # the classes of runs without a machine, found once each
    # The moment these runs are stored and, where approved, decided (the feed's approved_at).
    now = timezone.now()
    runs = []
    for entry in entries:
        stack, hardware = entry.identity  # type: ignore[misc]
        runs.append(
            new_run(
                entry.record,
                entry.key or fingerprint(entry.record),
                stack=stack,
                hardware=hardware,
                is_demo=entry.is_demo,
                is_verified=entry.is_verified,
                published=is_public(entry.status, entry.record.visibility, entry.record.outcome),
                class_ids=class_ids,
            )
        )
        runs[-1].approved_at = now
    bulk.save_runs(
        [(run, entry.record.suites) for run, entry in zip(runs, entries, strict=True)], copy=copy
    )
    submissions = [
        submission_row(run, entry, now) for run, entry in zip(runs, entries, strict=True)
    ]
    bulk.insert_instances(submissions, copy=copy)
    if any(run.published for run in runs):
        pagecache.invalidate()
    return submissions


def submission_row(run: Run, entry: NewRun, now: datetime) -> Submission:
    """The unsaved submission that records where a run came from and its moderation status."""
    return Submission(
        run=run,
        channel=entry.channel,
        status=entry.status,
        submitter=entry.submitter,
        api_key=entry.api_key,
        client_run_id=entry.record.client_run_id,
        submitter_name=entry.submitter_name,
        source_name=entry.source_name[:255],
        content_hash=entry.content_hash,
        flag_reasons=entry.flag_reasons,
        uploader_key=entry.uploader_key,
        decided_at=now if entry.status == Status.APPROVED else None,
    )


def _imported(record: RunRecord, key: str, status: str, **options) -> NewRun:
    """An imported run: its author's name is the record's."""
    return NewRun(
        record=record,
        key=key,
        status=status,
        submitter_name=record.submitter_name,
        **options,
    )


def check_imported(entries: list[NewRun]) -> None:
    """The upload's plausibility checks (submissions.integrity) on imported runs: one that
    fails is stored flagged, so it waits for a moderator and is not published. Resolves each
    entry's identity on the way (store_runs then needs no second lookup)."""
    unresolved = [entry for entry in entries if entry.identity is None]
    for entry, identity in zip(
        unresolved, resolve_identities([e.record for e in unresolved]), strict=True
    ):
        entry.identity = identity
    for entry in entries:
        if entry.is_demo or entry.status != Status.APPROVED:
            continue
        stack, hardware = entry.identity  # type: ignore[misc]
        reasons = integrity.check_run(entry.record, stack=stack, hardware=hardware)
        if reasons:
            entry.status = Status.FLAGGED
            entry.flag_reasons = reasons


def import_records(
    records: Iterable[RunRecord],
    *,
    channel: str = Channel.IMPORT,
    status: str = Status.APPROVED,
    source_name: str = "",
    is_demo: bool = False,
    is_verified: bool = False,
    refresh_stats: bool = True,
    check: bool = False,
) -> ImportResult:
    """Store every record not already present, atomically; refresh the stacks they touch
    (unless the caller refreshes them itself, once for many files). A record that a column
    cannot hold raises FormatError (runs.limits) and nothing is stored. With `check`, each
    run meets the upload's plausibility checks (check_imported), as import_results' do."""
    result = ImportResult()
    with transaction.atomic():
        for record in records:
            check_record(record)
            key = fingerprint(record)
            if Run.objects.filter(fingerprint=key).exists():
                result.skipped.append(record.client_run_id or key[:12])
                continue
            entry = _imported(
                record,
                key,
                status,
                channel=channel,
                source_name=source_name,
                is_demo=is_demo,
                is_verified=is_verified,
            )
            try:
                # A savepoint per run: a concurrent importer that wins the race turns this
                # run into a skip instead of aborting the whole file.
                with transaction.atomic():
                    if check:
                        check_imported([entry])
                    (submission,) = store_runs([entry])
            except IntegrityError:
                if not Run.objects.filter(fingerprint=key).exists():
                    raise
                result.skipped.append(record.client_run_id or key[:12])
                continue
            result.created.append(submission.run)
        if refresh_stats:
            refresh_stack_stats(stack_ids=result.stack_ids)
    return result


def import_batch(
    files: list[tuple[str, list[RunRecord]]],
    *,
    channel: str = Channel.IMPORT,
    status: str = Status.APPROVED,
) -> list[ImportResult]:
    """Many files' records in one store_runs call; the same outcome as import_records on
    each file in turn (present or repeated runs are skipped), without refreshing stacks.
    Every record must have passed check_record (import_results rejects a file that does not),
    and every run meets the upload's plausibility checks (check_imported).

    All of it is one savepoint. Should a concurrent importer insert one of these runs first,
    the savepoint is undone and the files go through import_records one at a time.
    """
    try:
        with transaction.atomic():
            return _import_batch(files, channel=channel, status=status)
    except IntegrityError:
        return [
            import_records(
                records,
                channel=channel,
                status=status,
                source_name=name,
                refresh_stats=False,
                check=True,
            )
            for name, records in files
        ]


def _import_batch(
    files: list[tuple[str, list[RunRecord]]], *, channel: str, status: str
) -> list[ImportResult]:
    keys = [[fingerprint(record) for record in records] for _name, records in files]
    present = set(
        Run.objects.filter(
            fingerprint__in=[k for file_keys in keys for k in file_keys]
        ).values_list("fingerprint", flat=True)
    )
    results: list[ImportResult] = []
    new: list[tuple[NewRun, ImportResult]] = []
    for (name, records), file_keys in zip(files, keys, strict=True):
        result = ImportResult()
        for record, key in zip(records, file_keys, strict=True):
            if key in present:
                result.skipped.append(record.client_run_id or key[:12])
                continue
            present.add(key)
            entry = _imported(record, key, status, channel=channel, source_name=name)
            new.append((entry, result))
        results.append(result)
    check_imported([entry for entry, _result in new])
    submissions = store_runs([entry for entry, _result in new])
    for submission, (_entry, result) in zip(submissions, new, strict=True):
        result.created.append(submission.run)
    return results
