"""Background work on results; tasks take ids and call services."""

from __future__ import annotations

from celery import shared_task

from runs import services


@shared_task(name="runs.refresh_stack_stats", soft_time_limit=120, time_limit=180)
def refresh_stack_stats_task(stack_id: int) -> None:
    services.refresh_stack_stats(stack_ids=[stack_id])


@shared_task(name="runs.refresh_stale_stack_stats", soft_time_limit=600, time_limit=660)
def refresh_stale_stack_stats_task() -> int:
    """Safety net behind the per-decision refresh: catch stacks a lost message left stale."""
    return services.refresh_stale_stack_stats()
