from __future__ import annotations

from django.apps import AppConfig


class LabConfig(AppConfig):
    """The site's lab queue (jobs, hosts, their pages and API). Its label stays "worker", the
    package it grew up in, so its migrations and permission names ("worker.operate_lab")
    survive the move."""

    name = "lab"
    label = "worker"
    verbose_name = "Lab job queue"
