from __future__ import annotations

from django.contrib import admin

from runs.models import Hardware, Run, SpeedSample, Stack, SuiteResult, TaskResult


@admin.register(Hardware)
class HardwareAdmin(admin.ModelAdmin):
    list_display = ["label", "gpu_vendor", "gpu_count", "vram_gb", "ram_gb", "os", "accelerator"]
    list_filter = ["gpu_vendor", "accelerator", "vram_bucket", "os"]
    search_fields = ["gpu_model", "cpu_model", "canonical_key"]


@admin.register(Stack)
class StackAdmin(admin.ModelAdmin):
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


class SuiteResultInline(admin.TabularInline):
    model = SuiteResult
    extra = 0
    fields = ["suite", "score", "task_count", "pass_count", "fail_count", "median_latency_ms"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
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
    raw_id_fields = ["stack", "hardware"]
    readonly_fields = ["fingerprint", "published", "created_at"]
    date_hierarchy = "started_at"
    inlines = [SuiteResultInline]
    list_select_related = ["stack", "hardware"]


class SpeedSampleInline(admin.TabularInline):
    model = SpeedSample
    extra = 0


@admin.register(TaskResult)
class TaskResultAdmin(admin.ModelAdmin):
    list_display = ["task_id", "suite_result", "passed", "score", "execution_ok", "latency_ms"]
    list_filter = ["passed", "execution_ok", "suite_result__suite"]
    search_fields = ["task_id"]
    raw_id_fields = ["suite_result"]
    inlines = [SpeedSampleInline]


@admin.register(SuiteResult)
class SuiteResultAdmin(admin.ModelAdmin):
    list_display = ["suite", "run", "score", "task_count", "pass_count"]
    list_filter = ["suite"]
    search_fields = ["run__stack__model_id"]
    raw_id_fields = ["run"]


@admin.register(SpeedSample)
class SpeedSampleAdmin(admin.ModelAdmin):
    list_display = ["task_result", "trial_index", "is_warmup", "decode_tps", "ttft_ms"]
    list_filter = ["is_warmup"]
    search_fields = ["task_result__task_id"]
    raw_id_fields = ["task_result"]
