"""Background work on results; tasks take ids and call services."""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache
from django.db import connection, transaction

from runs import services
from worker.rules.logcontext import log_context

log = logging.getLogger(__name__)

# A queued refresh that never ran (its message lost) stops holding back new ones after this.
REFRESH_PENDING_SECONDS = 60


def refresh_stack_soon(stack_id: int) -> None:
    """Refresh the stack's best run and counts after the current transaction commits.

    A refresh already queued and not yet started will see this transaction's rows, so a
    second one is not queued: a burst of uploads to one stack costs one message, not one each.
    """
    # Robust: the change has committed by then, so a broker outage must not turn its answer
    # into an error; a lost refresh is caught by the hourly refresh_stale_stack_stats.
    transaction.on_commit(lambda: _queue_refresh(stack_id), robust=True)


def _pending_key(stack_id: int) -> str:
    # One cache serves several databases (test workers, benchmarks); keep them apart.
    return f"stack-refresh:{connection.settings_dict['NAME']}:{stack_id}"


def _queue_refresh(stack_id: int) -> None:
    key = _pending_key(stack_id)
    try:
        first = cache.add(key, 1, timeout=REFRESH_PENDING_SECONDS)
    except Exception:  # without the cache, queue every refresh as before
        log.warning("refresh de-duplication unavailable", exc_info=True)
        first = True
    if not first:
        return
    try:
        refresh_stack_stats_task.delay(stack_id)
    except Exception:
        _forget_pending(key)  # so the next change queues it again
        raise


def _forget_pending(key: str) -> None:
    try:
        cache.delete(key)
    except Exception:
        log.warning("could not clear a pending stack refresh", exc_info=True)


# Celery ships no type information (mypy.ini): its decorator is untyped.
@shared_task(name="runs.refresh_stack_stats", soft_time_limit=120, time_limit=180)  # type: ignore[untyped-decorator]
def refresh_stack_stats_task(stack_id: int) -> None:
    with log_context(stack_id=stack_id):
        # Cleared before reading: a change committed from now on queues a refresh of its own.
        _forget_pending(_pending_key(stack_id))
        services.refresh_stack_stats(stack_ids=[stack_id])


@shared_task(name="runs.refresh_stale_stack_stats", soft_time_limit=600, time_limit=660)  # type: ignore[untyped-decorator]
def refresh_stale_stack_stats_task() -> int:
    """Safety net behind the per-decision refresh: catch stacks a lost message left stale."""
    return services.refresh_stale_stack_stats()
