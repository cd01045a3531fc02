"""Rows stored before uploads were scrubbed lose their private values (migration 0004)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from leaderboard.tests.factories import add_runs, record
from runs.models import Hardware, Run, Stack, TaskResult

pytestmark = pytest.mark.django_db


def test_the_migration_scrubs_stored_public_fields_and_leaves_clean_ones() -> None:
    leaky, clean = add_runs(
        record(model_id="leaky:8b", with_tasks=True), record(model_id="qwen3:8b", gpu="RTX 3090")
    )
    Stack.objects.filter(pk=leaky.stack_id).update(
        model_id="/home/zelda7/models/m 10.77.3.9", draft_model="draft@gpu-box-7:11434"
    )
    Run.objects.filter(pk=leaky.pk).update(engine_version="b1 fe80::1")
    Hardware.objects.filter(pk=leaky.hardware_id).update(cpu_model="cpu on buildbox.corp.internal")
    TaskResult.objects.filter(suite_result__run=leaky).update(task_id="t [2001:db8::5]:8080")
    before = Stack.objects.get(pk=clean.stack_id)

    migration = importlib.import_module("runs.migrations.0004_redact_public_fields")
    migration.redact_stored(apps, None)

    stack = Stack.objects.get(pk=leaky.stack_id)
    text = " ".join(
        [
            stack.model_id,
            stack.draft_model,
            Run.objects.get(pk=leaky.pk).engine_version,
            Hardware.objects.get(pk=leaky.hardware_id).cpu_model,
            *TaskResult.objects.filter(suite_result__run=leaky).values_list("task_id", flat=True),
        ]
    )
    for secret in ("zelda7", "10.77.3.9", "gpu-box-7", "fe80::1", "buildbox", "2001:db8::5"):
        assert secret not in text
    assert stack.model_id.startswith("/home/") and "b1 " in text
    assert Stack.objects.get(pk=clean.stack_id).model_id == before.model_id == "qwen3:8b"
