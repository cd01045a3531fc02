"""What a run measured: its suites, their tasks and the speed trials of each task.

Models of the runs app (runs.models imports them, so they are runs.models.SuiteResult and so
on to the rest of the site); they name their parents by label, so this module needs nothing
of runs.models.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class SuiteResult(models.Model):
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="suite_results")
    suite = models.CharField(max_length=40)
    score = models.FloatField(null=True, blank=True)
    task_count = models.PositiveIntegerField(default=0)
    pass_count = models.PositiveIntegerField(default=0)
    fail_count = models.PositiveIntegerField(default=0)
    median_latency_ms = models.FloatField(null=True, blank=True)

    class Meta:
        indexes = [
            # The runs that measured a suite (RunQuerySet.matrix: the harness matrix's few runs
            # among every run's suites), found without reading every suite result.
            models.Index(fields=["suite", "run"], name="suiteresult_suite_run_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "suite"], name="suiteresult_unique_run_suite"),
            models.CheckConstraint(
                condition=Q(pass_count__lte=models.F("task_count")),
                name="suiteresult_pass_le_tasks",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite}: {self.score}"


class TaskResult(models.Model):
    suite_result = models.ForeignKey(SuiteResult, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(max_length=120)
    passed = models.BooleanField(default=False)
    score = models.FloatField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    tokens_generated = models.PositiveIntegerField(null=True, blank=True)
    tokens_prompt = models.PositiveIntegerField(null=True, blank=True)
    # Null for v2 records, which did not tell execution failures from wrong answers.
    execution_ok = models.BooleanField(null=True, blank=True)
    finish_reason = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    # Raw model output and verifier metadata: owner and moderators only.
    output = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["suite_result", "task_id"], name="taskresult_unique_suite_task"
            ),
        ]

    def __str__(self) -> str:
        return self.task_id


class SpeedSample(models.Model):
    """One trial of a speed task: the raw numbers behind every spread on the site."""

    task_result = models.ForeignKey(TaskResult, on_delete=models.CASCADE, related_name="samples")
    trial_index = models.PositiveSmallIntegerField()
    is_warmup = models.BooleanField(default=False)
    ttft_ms = models.FloatField(null=True, blank=True)
    prefill_tps = models.FloatField(null=True, blank=True)
    decode_tps = models.FloatField(null=True, blank=True)
    total_latency_ms = models.FloatField(null=True, blank=True)
    tokens_generated = models.PositiveIntegerField(null=True, blank=True)
    tokens_prompt = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["task_result", "trial_index"], name="speedsample_unique_task_trial"
            ),
            models.CheckConstraint(
                condition=Q(decode_tps__gte=0) | Q(decode_tps__isnull=True),
                name="speedsample_decode_nonnegative",
            ),
        ]

    def __str__(self) -> str:
        return f"trial {self.trial_index}"
