from __future__ import annotations

from django.apps import AppConfig


class WorkerConfig(AppConfig):
    name = "worker"
    verbose_name = "Lab job queue"

    def ready(self) -> None:
        from worker import labhost  # noqa: F401  (connects the Celery worker signals)
