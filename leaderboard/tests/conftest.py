"""Fixtures for the public pages (the cast, alice, bob and mallory, is in the root conftest)."""

from __future__ import annotations

import io

import pytest
from django.core.cache import caches
from django.core.management import call_command


@pytest.fixture
def demo(settings, fixtures_dir) -> None:
    """seed_demo: the real fixture files plus about 90 synthetic stacks."""
    settings.BENCHLOOP_FIXTURES_DIR = fixtures_dir
    call_command("seed_demo", stdout=io.StringIO())


@pytest.fixture(autouse=True)
def _private_cache(settings) -> None:
    """A per-test memory cache: share images are cached, and parallel workers share Redis."""
    memory = "django.core.cache.backends.locmem.LocMemCache"
    settings.CACHES = {
        alias: {"BACKEND": memory, "LOCATION": f"lb-{alias}"} for alias in ("default", "limits")
    }
    for alias in settings.CACHES:
        caches[alias].clear()
