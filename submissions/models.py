"""Who or what delivered each run, and where it stands in moderation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from runs.names import imported_label

if TYPE_CHECKING:
    from runs.accelerators import Accelerator


class Channel(models.TextChoices):
    LEGACY_ANONYMOUS = "legacy", "anonymous legacy upload"
    API_KEY = "api", "API key upload"
    IMPORT = "import", "import"
    LAB_JOB = "lab", "lab job"


class Status(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    FLAGGED = "flagged"
    WITHDRAWN = "withdrawn"


FINAL_STATUSES = (Status.REJECTED, Status.WITHDRAWN)


class SubmissionQuerySet(models.QuerySet):
    def awaiting_moderation(self) -> SubmissionQuerySet:
        return self.filter(status__in=[Status.PENDING, Status.FLAGGED])

    def reported(self) -> SubmissionQuerySet:
        """Submissions whose run has reports no moderator has acted on yet."""
        return self.filter(_has_open_reports())

    def needing_a_moderator(self) -> SubmissionQuerySet:
        """What the queue's default view lists: waiting for a decision, or reported."""
        return self.filter(Q(status__in=[Status.PENDING, Status.FLAGGED]) | _has_open_reports())


def _has_open_reports() -> models.Exists:
    return models.Exists(RunReport.objects.open().filter(run_id=models.OuterRef("run_id")))


class Submission(models.Model):
    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="submission")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="submissions",
    )
    # Public display name for rows without an account (imports credit their original author).
    submitter_name = models.CharField(max_length=150, blank=True, db_index=True)
    client_run_id = models.CharField(max_length=200, blank=True)
    source_name = models.CharField(max_length=255, blank=True, help_text="file or job it came from")
    api_key = models.ForeignKey(
        "ApiKey", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Identical content under a new client run id is a duplicate, not a new run.
    content_hash = models.CharField(max_length=64, blank=True)
    # Why integrity checks flagged it, shown to moderators and to the submitter.
    flag_reasons = models.JSONField(default=list, blank=True)
    # Private: a keyed hash of the uploader's address (rate limits, abuse), never the address.
    uploader_key = models.CharField(max_length=64, blank=True)
    moderation_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        permissions = [("moderate_submission", "Can moderate submissions")]
        indexes = [
            models.Index(
                fields=["status", "created_at"],
                condition=Q(status__in=["pending", "flagged"]),
                name="submission_queue_idx",
            ),
        ]
        constraints = [
            # Idempotent uploads: one run per submitter and client run id, even under a race.
            models.UniqueConstraint(
                fields=["submitter", "client_run_id"],
                condition=Q(submitter__isnull=False) & ~Q(client_run_id=""),
                name="submission_unique_submitter_client_run",
            ),
            models.UniqueConstraint(
                fields=["submitter", "content_hash"],
                condition=Q(submitter__isnull=False) & ~Q(content_hash=""),
                name="submission_unique_submitter_content",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} · {self.status}"

    @property
    def display_submitter(self) -> str:
        """The public credit: an account's username, an imported author's name marked as
        imported (so it never reads as an account's), or "anonymous"."""
        # (A null foreign key reads as None without a query.)
        if self.submitter is not None:
            return self.submitter.get_username()
        if self.submitter_name:
            return imported_label(self.submitter_name)
        return "anonymous"

    @property
    def submitter_url(self) -> str:
        """The credited submitter's public page; "" for anonymous runs, which have none."""
        if self.submitter is not None:
            return reverse("leaderboard:submitter", args=[self.submitter.get_username()])
        if self.submitter_name:
            return reverse("leaderboard:imported_submitter", args=[self.submitter_name])
        return ""


class SubmitterProfile(models.Model):
    """Per-account trust: a trusted submitter's clean uploads skip the moderation queue."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submitter_profile"
    )
    is_trusted = models.BooleanField(default=False)
    trusted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    trusted_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} ({'trusted' if self.is_trusted else 'untrusted'})"


class ApiKeyQuerySet(models.QuerySet):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class SecretKey(models.Model):
    """What every key of ours stores: an 8-character lookup prefix and a keyed hash (never
    the key), its scopes, and when it was last used or revoked (submissions.keys)."""

    prefix = models.CharField(max_length=8, unique=True)
    hashed_key = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class ApiKey(SecretKey):
    """A user's `bl_…` key."""

    SCOPES = ("submit", "read")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["user", "revoked_at"], name="apikey_user_active_idx")]

    def __str__(self) -> str:
        return f"{self.name} (bl_{self.prefix}…)"

    def revoke(self) -> None:
        if self.revoked_at is None:
            from django.utils import timezone

            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


class DeviceAuthorization(models.Model):
    """One `benchloop login`: the CLI polls a device code, a signed-in user approves its code."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        CONSUMED = "consumed"

    device_code_hash = models.CharField(max_length=64, unique=True)
    user_code = models.CharField(max_length=9, unique=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    client_name = models.CharField(max_length=100, blank=True)
    interval = models.PositiveSmallIntegerField(default=5)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_polled_at = models.DateTimeField(null=True, blank=True)
    api_key = models.ForeignKey(
        ApiKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    def __str__(self) -> str:
        return f"{self.user_code} ({self.state})"


class ModerationDecision(models.Model):
    """Audit log: every status change of a submission, by whom and why."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="decisions")
    moderator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    from_status = models.CharField(max_length=10, choices=Status.choices)
    to_status = models.CharField(max_length=10, choices=Status.choices)
    reason = models.TextField(blank=True)
    automatic = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.from_status} → {self.to_status}"


class RunReportQuerySet(models.QuerySet):
    def open(self) -> RunReportQuerySet:
        """Reports no moderator has acted on yet (a decision on the run resolves them)."""
        return self.filter(resolved_at__isnull=True)


class RunReport(models.Model):
    """A signed-in user's report on a public run. Every report reaches the moderation queue;
    whether it also hides the run at once is submissions.services.report_run's rule."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="reports")
    reporter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    reason = models.TextField(max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    objects = RunReportQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "reporter"], name="runreport_once_per_user"),
        ]
        indexes = [
            # The queue asks which runs have open reports.
            models.Index(
                fields=["run"], condition=Q(resolved_at__isnull=True), name="runreport_open_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"report on run {self.run_id}"


class UploadAttempt(models.Model):
    """Every upload try per submitter and stack, counted publicly as best-of-N."""

    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    # Anonymous legacy uploads are counted per keyed hash of the address, never the address.
    anonymous_key = models.CharField(max_length=64, blank=True)
    stack = models.ForeignKey("runs.Stack", on_delete=models.CASCADE, related_name="attempts")
    run = models.ForeignKey(
        "runs.Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["stack", "submitter"], name="attempt_stack_submitter_idx")]

    def __str__(self) -> str:
        return f"attempt on stack {self.stack_id}"


class AcceleratorOverride(models.Model):
    """A moderator's addition to runs/data/accelerators.json, kept in the database.

    The site never writes its own code files: in production they are part of a read-only image
    shared by several processes, and a file written at run time would be lost at the next
    deploy. A row here counts at once for every process; `manage.py export_accelerators` prints
    the rows as data-file entries, to be reviewed and committed like any other change.
    """

    class Kind(models.TextChoices):
        GPU = "gpu", "GPU"
        APPLE = "apple", "Apple chip"
        CPU = "cpu", "CPU"

    name = models.CharField(max_length=100)
    # runs.accelerators.name_key(name): one row per product, whatever its spelling.
    name_key = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    memory_gb = models.FloatField(null=True, blank=True)
    bandwidth_gbps = models.FloatField()
    fp16_tflops = models.FloatField(null=True, blank=True)
    int8_tops = models.FloatField(null=True, blank=True)
    source = models.CharField(max_length=300)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(bandwidth_gbps__gt=0), name="acceleratoroverride_bandwidth_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.bandwidth_gbps:g} GB/s)"

    def as_entry(self) -> dict:
        """The row as a data-file entry."""
        return {
            "name": self.name,
            "kind": self.kind,
            "memory_gb": self.memory_gb,
            "bandwidth_gbps": self.bandwidth_gbps,
            "fp16_tflops": self.fp16_tflops,
            "int8_tops": self.int8_tops,
            "source": self.source,
        }

    def as_accelerator(self) -> Accelerator:
        """The row as the plausibility check reads it, validated like a data-file entry."""
        from runs.accelerators import parse_entry

        who = self.added_by.get_username() if self.added_by is not None else "a moderator"
        return parse_entry(self.as_entry(), origin=f"added by {who}")
