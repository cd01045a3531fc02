from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from runs.models import Hardware, Stack

if TYPE_CHECKING:  # generic in django-stubs only: subscripting it at run time fails
    _ModelAdmin = admin.ModelAdmin[Any]
else:
    _ModelAdmin = admin.ModelAdmin


class ReadOnlyAdmin(_ModelAdmin):
    """Stored results are for looking at: they change only through runs.services (and runs
    through submissions.services: see the Run admin there), which keep lanes and caches right.
    A run's suite, task and trial rows are shown with it (the Run admin's inline) and are not
    registered: the admin would refuse to delete a run whose rows it may not delete."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Hardware)
class HardwareAdmin(ReadOnlyAdmin):
    list_display = ["label", "gpu_vendor", "gpu_count", "vram_gb", "ram_gb", "os", "accelerator"]
    list_filter = ["gpu_vendor", "accelerator", "vram_bucket", "os"]
    search_fields = ["gpu_model", "cpu_model", "canonical_key"]


@admin.register(Stack)
class StackAdmin(ReadOnlyAdmin):
    list_display = [
        "model_id",
        "quantization",
        "engine",
        "harness",
        "context_length",
        "published_run_count",
        "submitter_count",
    ]
    list_filter = ["engine", "harness", "quantization", "param_bucket", "model_family"]
    search_fields = ["model_id", "model_family", "comparability_key", "draft_model"]
    raw_id_fields = ["best_run"]
    readonly_fields = ["comparability_key", "stats_refreshed_at"]
