"""Helpers for the submission tests (the cast of users lives in the root conftest)."""

from __future__ import annotations

import json

from django.test import Client


def post_json(client: Client, url: str, body, key: str | None = None, **extra):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(url, data=data, content_type="application/json", headers=headers, **extra)
