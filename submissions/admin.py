from __future__ import annotations

from django.contrib import admin, messages

from runs.models import Run, SuiteResult
from submissions.models import Status, Submission
from submissions.services import (
    SelfModerationError,
    erase_run,
    moderate_submission,
    set_run_visibility,
)


class SuiteResultInline(admin.TabularInline):
    model = SuiteResult
    extra = 0
    # Tuples: the stubs' list types for these two differ, and a list is invariant.
    fields = ("suite", "score", "task_count", "pass_count", "fail_count", "median_latency_ms")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """Runs arrive only through the write path; here a run's visibility changes and a run is
    deleted through the services, so its published flag, the caches and its stack follow."""

    list_display = [
        "id",
        "stack",
        "hardware",
        "score_scale",
        "overall_score",
        "decode_tps_median",
        "profile",
        "comparable",
        "published",
        "is_verified",
        "started_at",
    ]
    list_filter = [
        "score_scale",
        "source_format",
        "profile",
        "comparable",
        "published",
        "is_verified",
        "is_demo",
        "outcome",
        "scoring_mode",
        "visibility",
    ]
    search_fields = ["stack__model_id", "client_run_id", "manifest_hash", "fingerprint"]
    date_hierarchy = "started_at"
    inlines = [SuiteResultInline]
    list_select_related = ["stack", "hardware"]
    fields = (
        "visibility",
        "stack",
        "hardware",
        "hardware_class",
        "published",
        "is_verified",
        "score_scale",
        "overall_score",
        "quality_score",
        "comparable",
        "started_at",
        "flag_reasons",
    )
    readonly_fields = [name for name in fields if name != "visibility"]

    @admin.display(description="flag reasons")
    def flag_reasons(self, run: Run) -> str:
        """Why its upload was held for the moderators (a lab run on other hardware, say)."""
        submission = getattr(run, "submission", None)
        return "; ".join(submission.flag_reasons) if submission else ""

    def has_add_permission(self, request) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        if "visibility" in form.changed_data:
            set_run_visibility(run=obj, visibility=obj.visibility)

    def delete_model(self, request, obj) -> None:
        erase_run(run=obj)

    def delete_queryset(self, request, queryset) -> None:
        for run in queryset:
            erase_run(run=run)


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
