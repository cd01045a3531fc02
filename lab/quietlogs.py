"""Celery's lines about the reaper (beat sends it every 30 s) at debug level unless it acted.

Celery logs each scheduled run three times at INFO: beat's "Sending due task", the worker's
"received" and its "succeeded … {'requeued': 0, …}". Every 30 seconds that buried the rest of
the embedded default's terminal (an activation link among them). This filter, on those three
loggers (settings.LOGGING), lowers the lines about the reaper to DEBUG unless its answer
counts something it did; lab.services.reap_stale_jobs itself says at INFO what it did.
"""

from __future__ import annotations

import logging
import re

from lab.dispatch import REAP_STALE_JOBS

# Celery writes the task's answer with saferepr: "{'requeued': 0, 'failed': 1, 'resent': 0}".
_ACTED = re.compile(r":\s*[1-9]")


def _reaper_line(record: logging.LogRecord) -> str | None:
    """The reaper's answer as logged ("" where the line carries none), or None for a line
    about anything else."""
    args = record.args
    if isinstance(args, dict):
        if args.get("name") != REAP_STALE_JOBS:
            return None
        return str(args.get("return_value") or "")
    if isinstance(args, tuple) and REAP_STALE_JOBS in (str(a) for a in args):
        return ""
    return None


class QuietReaper(logging.Filter):
    """Lowers an idle reaper's lines to DEBUG, then lets them through only where DEBUG is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        answer = _reaper_line(record)
        if answer is None or record.levelno != logging.INFO or _ACTED.search(answer):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
