"""The lab agent's Celery app: `celery -A worker.agent.app worker -Q host.<name>`.

Django-free. The site sends `worker.run_benchmark_job` with a job id to a pool's queue; this
worker claims the job over HTTP and runs it (worker.agent.jobs).
"""

from __future__ import annotations

import logging
import os
from functools import cache

from celery import Celery
from celery.signals import after_setup_logger, worker_ready, worker_shutdown

from worker.agent.client import KeyRejected, SiteClient, SiteUnavailable
from worker.agent.host import Host
from worker.agent.jobs import TransientJobError, run_job
from worker.agent.settings import AgentSettings, broker_config
from worker.rules.logcontext import ContextFilter, formatter, log_context
from worker.rules.protocol import RUN_JOB_TASK

# Not made the process's current app on import: a process that imports this module for
# something else (the site's tests do) keeps its own app for current_app and shared_task. The
# agent's worker (`celery -A worker.agent.app worker`) makes it current when it starts.
app = Celery("benchloop-lab-agent", set_as_current=False)
app.conf.update(broker_config())
_host: dict = {}


@cache
def _settings() -> AgentSettings:
    return AgentSettings.from_environment()


@cache
def _client(pid: int) -> SiteClient:
    """One client per process: a prefork child must not share its parent's connections."""
    settings = _settings()
    return SiteClient(settings.site_url, settings.host_key)


@app.task(
    name=RUN_JOB_TASK,
    bind=True,
    acks_late=True,
    # The site away for longer than a call's patience: the same message, later.
    autoretry_for=(SiteUnavailable,),
    max_retries=3,
    retry_backoff=5,
    retry_backoff_max=120,
    soft_time_limit=3 * 3600,
    time_limit=3 * 3600 + 300,
)
def run_benchmark_job(self, job_id: int) -> str:
    settings = _settings()
    # run_job binds the job id; the host is bound here, where its name is known.
    with log_context(host=settings.host_name):
        try:
            return run_job(
                _client(os.getpid()),
                job_id,
                jobs_root=settings.jobs_root,
                heartbeat=settings.job_heartbeat,
            )
        except TransientJobError as exc:
            raise self.retry(exc=exc, countdown=min(120, 10 * exc.attempt), queue=exc.pool) from exc
        except KeyRejected as exc:
            return f"host key rejected: {exc}"  # the host loop stops this worker


@after_setup_logger.connect
def _log_context_on_every_line(logger: logging.Logger, **kwargs) -> None:
    """Celery's root handlers print the bound host and job id on each line (key=value, or
    JSON lines with LOG_FORMAT=json, as on the site)."""
    for handler in logger.handlers:
        handler.addFilter(ContextFilter())
        handler.setFormatter(formatter(os.environ.get("LOG_FORMAT", "text"), kwargs.get("format")))


@worker_ready.connect
def _start_host(sender=None, **kwargs) -> None:
    settings = _settings()
    hostname = sender.hostname

    def add(pool: str) -> None:
        app.control.add_consumer(pool, destination=[hostname], reply=True)

    def cancel(pool: str) -> None:
        app.control.cancel_consumer(pool, destination=[hostname], reply=True)

    host = _host["host"] = Host(settings, (add, cancel))
    host.start()


@worker_shutdown.connect
def _stop_host(**kwargs) -> None:
    if "host" in _host:
        _host["host"].stop.set()
