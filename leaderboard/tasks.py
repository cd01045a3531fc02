"""Background work for the public pages; tasks take ids (here none) and call services."""

from __future__ import annotations

from celery import shared_task

from leaderboard import estimated


# Celery ships no type information (mypy.ini): its decorator is untyped.
@shared_task(name=estimated.CALIBRATE_TASK, soft_time_limit=600, time_limit=660)  # type: ignore[untyped-decorator]
def calibrate_estimates() -> int:
    """The estimates' calibration of the lanes as they are now (a page asks for it after a
    publish; the beat schedule asks every minute, in case a message was lost)."""
    return estimated.calibrate_now()
