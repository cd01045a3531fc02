"""Who or what delivered each run, and where it stands in moderation."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


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
    submitter_name = models.CharField(max_length=150, blank=True)
    client_run_id = models.CharField(max_length=200, blank=True)
    source_name = models.CharField(max_length=255, blank=True, help_text="file or job it came from")
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
        ]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} · {self.status}"

    @property
    def display_submitter(self) -> str:
        if self.submitter_id:
            return self.submitter.get_username()
        return self.submitter_name or "anonymous"
