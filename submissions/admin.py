from __future__ import annotations

from django.contrib import admin, messages

from submissions.models import Status, Submission
from submissions.services import SelfModerationError, moderate_submission


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "run",
        "channel",
        "status",
        "display_submitter",
        "client_run_id",
        "created_at",
        "decided_at",
    ]
    list_filter = ["status", "channel", "created_at"]
    search_fields = ["client_run_id", "submitter_name", "submitter__username", "source_name"]
    raw_id_fields = ["run", "submitter"]
    readonly_fields = ["status", "decided_at", "created_at"]
    list_select_related = ["run__stack", "submitter"]
    actions = ["approve", "reject"]

    @admin.action(description="Approve selected submissions")
    def approve(self, request, queryset) -> None:
        self._decide(request, queryset, Status.APPROVED)

    @admin.action(description="Reject selected submissions")
    def reject(self, request, queryset) -> None:
        self._decide(request, queryset, Status.REJECTED)

    def _decide(self, request, queryset, status: str) -> None:
        decided = 0
        for submission in queryset.select_related("run"):
            try:
                moderate_submission(
                    submission=submission,
                    status=status,
                    moderator=request.user,
                    reason=f"admin action by {request.user}",
                )
            except SelfModerationError:
                messages.error(request, f"Run {submission.run_id} is yours: not decided.")
                continue
            decided += 1
        messages.success(request, f"{decided} submission(s) now {status}.")
