from __future__ import annotations

from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "submissions"
