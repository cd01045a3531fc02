"""The public read API's serializers: what a run, a stack, a machine and a board's row are as
JSON (leaderboard.api's views). Public fields only."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs import public
from runs.models import Hardware, HardwareClass, Run, Stack, SuiteResult, TaskResult
from submissions.models import UploadAttempt

SPEED_FIELDS = [
    f"{m}_{s}"
    for m in ("decode_tps", "prefill_tps", "ttft_ms")
    for s in ("median", "mean", "stdev", "p5", "p95", "peak")
]


class HardwareSerializer(serializers.ModelSerializer[Hardware]):
    # Stub gap: the stubs read a declared field `label` as overriding Field.label.
    label = serializers.CharField()  # type: ignore[assignment]

    class Meta:
        model = Hardware
        fields = [
            "id",
            "label",
            "gpu_vendor",
            "gpu_model",
            "gpu_count",
            "vram_gb",
            "vram_bucket",
            "cpu_model",
            "ram_gb",
            "ram_bucket",
            "os",
            "accelerator",
        ]


class HardwareRowSerializer(HardwareSerializer):
    """A row of GET /api/v1/hardware (documents the run count the view adds)."""

    run_count = serializers.IntegerField(help_text="approved runs on this machine class")

    class Meta(HardwareSerializer.Meta):
        fields = [*HardwareSerializer.Meta.fields, "run_count"]


class StackSerializer(serializers.ModelSerializer[Stack]):
    key = serializers.CharField(source="short_key")
    launch_settings = serializers.SerializerMethodField()

    class Meta:
        model = Stack
        fields = [
            "id",
            "key",
            "model_id",
            "model_family",
            "params_b",
            "quantization",
            "model_sha256",
            "engine",
            "method",
            "harness",
            "context_length",
            "kv_cache_type",
            "draft_model",
            "launch_settings",
            "published_run_count",
            "submitter_count",
        ]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_launch_settings(self, stack: Stack) -> dict[str, Any]:
        # The same settings the stack page shows: none that locate or unlock a host.
        return public.public_launch_settings(stack.launch_settings)


class RunSummarySerializer(serializers.ModelSerializer[Run]):
    """Every public field of a run; nothing a submitter's machine or network could be traced by."""

    stack = StackSerializer()
    hardware = HardwareSerializer(allow_null=True)
    submitter = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "url",
            "stack",
            "hardware",
            "submitter",
            "score_scale",
            "score_schema_version",
            "benchmark_version",
            "profile",
            "requested_profile",
            "manifest_hash",
            "coverage_score",
            "comparable",
            "scoring_mode",
            "is_verified",
            "is_demo",
            "overall_score",
            "quality_score",
            "speed_score",
            "reliability_score",
            "value_score",
            *SPEED_FIELDS,
            "speed_sample_count",
            "engine_version",
            "harness_version",
            "started_at",
            "total_runtime_sec",
        ]

    def get_submitter(self, run: Run) -> str:
        return run.submission.display_submitter

    def get_url(self, run: Run) -> str:
        return f"/runs/{run.pk}/"


class TaskSerializer(serializers.ModelSerializer[TaskResult]):
    class Meta:
        model = TaskResult
        fields = list(public.PUBLIC_TASK_COLUMNS)


class SuiteSerializer(serializers.ModelSerializer[SuiteResult]):
    tasks = TaskSerializer(many=True)

    class Meta:
        model = SuiteResult
        fields = [
            "suite",
            "score",
            "task_count",
            "pass_count",
            "fail_count",
            "median_latency_ms",
            "tasks",
        ]


class RunDetailSerializer(RunSummarySerializer):
    suites = SuiteSerializer(many=True, source="suite_results")
    attempts = serializers.SerializerMethodField(
        help_text="uploads by this submitter for the stack (best-of-N)"
    )

    class Meta(RunSummarySerializer.Meta):
        fields = [*RunSummarySerializer.Meta.fields, "suites", "attempts"]

    def get_attempts(self, run: Run) -> int:
        submission = run.submission
        if submission.submitter_id is None:
            return 1
        return UploadAttempt.objects.filter(
            stack_id=run.stack_id, submitter_id=submission.submitter_id
        ).count()


class HardwareClassSerializer(serializers.ModelSerializer[HardwareClass]):
    class Meta:
        model = HardwareClass
        fields = ["id", "slug", "kind", "label", "vendor", "chip", "count", "memory_gb"]


class FigureSerializer(serializers.Serializer[dict[str, Any]]):
    value = serializers.FloatField(help_text="the median of the row's runs")
    n = serializers.IntegerField(help_text="the runs the median is taken over")
    ci95 = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="95% interval of the median; null below three runs",
    )


class LaneRowSerializer(serializers.Serializer[dict[str, Any]]):
    """A row of GET /api/v1/leaderboard: one stack on one hardware class (or, on the
    all-hardware view, on every machine, with quality only)."""

    rank = serializers.IntegerField(
        help_text="the row's place; in a view of several hardware classes, within its class"
    )
    stack = StackSerializer()
    hardware_class = HardwareClassSerializer(allow_null=True)
    runs = serializers.IntegerField()
    submitters = serializers.IntegerField()
    attempts = serializers.IntegerField(help_text="uploads the best run was picked from")
    few_runs = serializers.BooleanField(
        help_text="one or two runs: a median with no interval, ranked after the other rows"
    )
    quality = FigureSerializer(allow_null=True)
    overall = FigureSerializer(
        allow_null=True,
        required=False,
        help_text="the median overall score, what the row ranks by; absent on the "
        "all-hardware view",
    )
    overall_best_run = serializers.FloatField(
        allow_null=True,
        required=False,
        help_text="the best run's overall score (evidence, not the rank); absent on the "
        "all-hardware view",
    )
    decode_tps = FigureSerializer(allow_null=True, required=False)
    prefill_tps = FigureSerializer(allow_null=True, required=False)
    ttft_ms = FigureSerializer(allow_null=True, required=False)
    suites = serializers.DictField(
        child=FigureSerializer(allow_null=True),
        required=False,
        help_text="the per-suite columns asked for: each suite's median over the row's runs "
        "that have it (null where none has); absent without cols or a suite sort",
    )
    best_run = serializers.DictField(allow_null=True)
