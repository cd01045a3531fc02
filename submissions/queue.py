"""What the moderation queue shows for each submission: whether the run is complete, the speed
checks' arithmetic (the roofline ceiling and the peers, submissions.integrity's own rules), the
submitter's history and attempts, and the open reports against the run.

A page costs the same few queries however many rows it holds (one each for the catalog, the
peers, the histories, the attempts and the reports).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, F, Q, Window
from django.db.models.expressions import BaseExpression
from django.db.models.functions import Lower, RowNumber

from runs import roofline
from runs.accelerators import Catalog
from runs.labels import labels_by_id
from runs.models import Outcome, Run
from submissions import integrity
from submissions.models import RunReport, Status, Submission, SubmitterProfile, UploadAttempt

# (Status members are the str values they stand for.)
HISTORY_STATUSES: tuple[str, ...] = (
    Status.APPROVED,
    Status.PENDING,
    Status.FLAGGED,
    Status.REJECTED,
    Status.WITHDRAWN,
)


@dataclass(frozen=True)
class Completeness:
    """ "complete", "incomplete" or "failed", with what says so (profile, coverage, reasons)."""

    label: str
    details: list[str]


@dataclass(frozen=True)
class History:
    """An account's (or an anonymous address's) uploads by status, and its tries on the stack."""

    counts: dict[str, int]
    total: int
    attempts_on_stack: int
    trusted: bool | None  # None: no account, nobody to trust

    @property
    def parts(self) -> list[tuple[str, int]]:
        """(status, count) for the statuses it has, in HISTORY_STATUSES order."""
        return [
            (status, self.counts[status]) for status in HISTORY_STATUSES if self.counts.get(status)
        ]


@dataclass
class Item:
    submission: Submission
    completeness: Completeness
    # The ceiling's arithmetic, then the peers', each flagged or not.
    checks: list[integrity.Check]
    # Why there are no checks, when there are none.
    unchecked: str
    # Reasons recorded at upload (or at a recheck) that the checks above do not repeat.
    recorded: list[str]
    history: History
    reports: list[RunReport] = field(default_factory=list)
    is_own: bool = False
    selected: bool = False
    missing_hardware: str = ""
    # The stack's label, long enough to tell it from the other rows' (harness, settings…).
    label: str = ""

    @property
    def flagged(self) -> bool:
        return bool(self.recorded) or any(check.flagged for check in self.checks)


def items(
    submissions: list[Submission], *, viewer: User | AnonymousUser, select_all: bool = False
) -> list[Item]:
    """The queue's rows with their evidence; `submissions` come with run, stack, hardware,
    submitter and the submitter's profile joined in."""
    runs = [s.run for s in submissions]
    catalog = integrity.current_catalog()
    peers = _peers(runs)
    histories = _histories(submissions)
    attempts = _attempts(submissions)
    reports = _open_reports(runs)
    labels = labels_by_id({run.stack_id: run.stack for run in runs}.values())
    result = []
    for submission in submissions:
        run = submission.run
        checks, unchecked = _checks(run, peers, catalog)
        shown = {check.text for check in checks}
        is_own = submission.submitter_id is not None and submission.submitter_id == viewer.pk
        result.append(
            Item(
                submission=submission,
                completeness=completeness(run),
                checks=checks,
                unchecked=unchecked,
                recorded=[r for r in submission.flag_reasons if r not in shown],
                history=History(
                    counts=histories.get(_who(submission), {}),
                    total=sum(histories.get(_who(submission), {}).values()),
                    attempts_on_stack=attempts.get((*_who(submission), run.stack_id), 0),
                    trusted=_trusted(submission),
                ),
                reports=reports.get(run.pk, []),
                # Nobody moderates their own runs: the row says so and offers no checkbox.
                is_own=is_own,
                selected=select_all and not is_own,
                missing_hardware=_missing_hardware(submission, catalog),
                label=labels[run.stack_id],
            )
        )
    return result


def completeness(run: Run) -> Completeness:
    """Complete only when the run finished and scored every task of its profile."""
    if run.outcome == Outcome.FAILED:
        label = "failed"
    elif run.outcome == Outcome.INCOMPLETE or (
        run.coverage_score is not None and run.coverage_score < 100
    ):
        label = "incomplete"
    else:
        label = "complete"
    details = []
    if run.profile:
        requested = run.requested_profile
        asked = f" (requested {requested})" if requested and requested != run.profile else ""
        details.append(f"profile {run.profile}{asked}")
    if run.coverage_score is not None:
        coverage = f"{run.coverage_score:.1f}".removesuffix(".0")
        details.append(f"{coverage}% of the profile's tasks scored")
    else:
        details.append("coverage not reported")
    details += [str(reason) for reason in run.noncomparable_reasons or []]
    return Completeness(label, details)


def _checks(
    run: Run, peers: dict[tuple, list[tuple]], catalog: Catalog
) -> tuple[list[integrity.Check], str]:
    hardware = run.hardware
    if hardware is None:
        return [], "remote endpoint: no machine was seen, so no ceiling and no hardware peers"
    claim = integrity.Claim.of_run(run)
    if not any(value is not None for value in claim.values()):
        return [], "no speed claimed"
    group = _peer_group(run)
    candidates = peers.get(group, []) if group is not None else []
    rows = [values for pk, values in candidates if pk != run.pk][: integrity.PEER_LIMIT]
    checks = integrity.physics_checks(
        claim, stack=run.stack, hardware=hardware, catalog=catalog
    ) + integrity.peer_checks(claim, rows, hardware_label=hardware.label)
    return checks, ""


def _peer_group(run: Run) -> tuple | None:
    """integrity.peer_values's rule: same model (any case), quantization and engine, on the
    same hardware class."""
    hardware = run.hardware
    if hardware is None or not (hardware.gpu_model or hardware.cpu_model):
        return None
    stack = run.stack
    key = integrity.hardware_class(hardware)
    return (stack.model_id.lower(), stack.quantization, stack.engine, key)


def _peers(runs: list[Run]) -> dict[tuple, list[tuple]]:
    """The approved peers of every run on the page, newest first, at most PEER_LIMIT per
    group besides the page's own runs (one query: a window numbers each group's rows)."""
    groups = {group for group in map(_peer_group, runs) if group is not None}
    if not groups:
        return {}
    wanted = Q()
    for model, quantization, engine, key in groups:
        wanted |= Q(
            stack__model_id__iexact=model,
            stack__quantization=quantization,
            stack__engine=engine,
            hardware_class__key=key,
        )
    partition: list[BaseExpression | F] = [
        Lower("stack__model_id"),
        F("stack__quantization"),
        F("stack__engine"),
        F("hardware_class__key"),
    ]
    metrics = [name for name, _label, _unit in integrity.PEER_METRICS]
    rows = (
        Run.objects.published()
        .filter(wanted)
        .annotate(
            model_key=Lower("stack__model_id"),
            peer_rank=Window(RowNumber(), partition_by=partition, order_by=F("started_at").desc()),
        )
        .filter(peer_rank__lte=integrity.PEER_LIMIT + len(runs))
        .order_by("-started_at", "-pk")
        .values_list(
            "pk",
            "model_key",
            "stack__quantization",
            "stack__engine",
            "hardware_class__key",
            *metrics,
        )
    )
    found: dict[tuple, list[tuple]] = {}
    for pk, model, quantization, engine, key, *values in rows:
        found.setdefault((model, quantization, engine, key), []).append((pk, tuple(values)))
    return found


def _who(submission: Submission) -> tuple[int | None, str]:
    """Whose history a row shows: the account, or for anonymous uploads the keyed hash of the
    address they came from (never the address)."""
    if submission.submitter_id:
        return (submission.submitter_id, "")
    return (None, submission.uploader_key)


def _whose(submissions: list[Submission], *, address_field: str) -> Q | None:
    """Rows of the page's accounts and anonymous addresses; None when there are neither."""
    accounts = {s.submitter_id for s in submissions if s.submitter_id}
    addresses = {s.uploader_key for s in submissions if not s.submitter_id and s.uploader_key}
    whose = Q()
    if accounts:
        whose |= Q(submitter_id__in=accounts)
    if addresses:
        whose |= Q(submitter__isnull=True, **{f"{address_field}__in": addresses})
    return whose or None


def _histories(submissions: list[Submission]) -> dict[tuple, dict[str, int]]:
    whose = _whose(submissions, address_field="uploader_key")
    if whose is None:
        return {}
    rows = (
        Submission.objects.filter(whose)
        .values("submitter_id", "uploader_key")
        .annotate(**{status: Count("id", filter=Q(status=status)) for status in HISTORY_STATUSES})
        .order_by()
    )
    found: dict[tuple, dict[str, int]] = {}
    for row in rows:
        who = (row["submitter_id"], "") if row["submitter_id"] else (None, row["uploader_key"])
        counts = found.setdefault(who, dict.fromkeys(HISTORY_STATUSES, 0))
        for status in HISTORY_STATUSES:
            counts[status] += row[status]
    return found


def _attempts(submissions: list[Submission]) -> dict[tuple, int]:
    """Upload tries per submitter (or anonymous address) and stack: the public best-of-N."""
    whose = _whose(submissions, address_field="anonymous_key")
    if whose is None:
        return {}
    rows = (
        UploadAttempt.objects.filter(whose, stack_id__in={s.run.stack_id for s in submissions})
        .values_list("submitter_id", "anonymous_key", "stack_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(account, "" if account else address, stack): n for account, address, stack, n in rows}


def _trusted(submission: Submission) -> bool | None:
    submitter = submission.submitter  # (joined in; a null one reads as None without a query)
    if submitter is None:
        return None
    try:
        return submitter.submitter_profile.is_trusted
    except SubmitterProfile.DoesNotExist:
        return False


def _open_reports(runs: list[Run]) -> dict[int, list[RunReport]]:
    found: dict[int, list[RunReport]] = {}
    for report in (
        RunReport.objects.open()
        .filter(run_id__in=[run.pk for run in runs])
        .select_related("reporter")
        .order_by("created_at")
    ):
        found.setdefault(report.run_id, []).append(report)
    return found


def _missing_hardware(submission: Submission, catalog: Catalog) -> str:
    """The machine name to add when this run waits for a ceiling because of its hardware."""
    run = submission.run
    if run.hardware is None or not any(
        reason.startswith(integrity.NO_CEILING) for reason in submission.flag_reasons
    ):
        return ""
    found = integrity.ceilings_for(run.stack, run.hardware, catalog)
    return found.hardware_name if isinstance(found, roofline.Unknown) else ""
