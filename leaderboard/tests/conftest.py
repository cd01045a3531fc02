"""Fixtures for the public pages (the cast, alice, bob and mallory, is in the root conftest)."""

from __future__ import annotations

import io

import pytest
from django.core.cache import caches
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings


@pytest.fixture
def demo(settings, fixtures_dir) -> None:
    """seed_demo: the real fixture files plus about 90 synthetic stacks, with their lanes."""
    from leaderboard.tests.factories import ensure_lanes

    settings.BENCHLOOP_FIXTURES_DIR = fixtures_dir
    call_command("seed_demo", stdout=io.StringIO())
    ensure_lanes()


@pytest.fixture(scope="module")
def demo_once(django_db_setup, django_db_blocker, fixtures_dir):
    """seed_demo once for a module whose tests only read it: seeded inside a transaction that is
    rolled back after the module's last test, each test running in a savepoint within it (as
    Django's TestCase.setUpTestData does). Not for live-server tests: they commit and flush."""
    from leaderboard.tests.factories import ensure_lanes

    with django_db_blocker.unblock(), override_settings(BENCHLOOP_FIXTURES_DIR=fixtures_dir):
        outer = transaction.atomic()
        outer.__enter__()
        try:
            call_command("seed_demo", stdout=io.StringIO())
            ensure_lanes()
            yield
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _private_cache(settings) -> None:
    """A per-test memory cache: share images are cached, and parallel workers share Redis."""
    memory = "django.core.cache.backends.locmem.LocMemCache"
    settings.CACHES = {
        alias: {"BACKEND": memory, "LOCATION": f"lb-{alias}"} for alias in ("default", "limits")
    }
    for alias in settings.CACHES:
        caches[alias].clear()


@pytest.fixture
def test_database_url(db) -> str:
    """The migrated test database, as a URL for processes a test starts (they see what is
    committed: the migrated tables, empty)."""
    from django.db import connection

    db = connection.settings_dict
    return f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture
def broker() -> str:
    from django.conf import settings

    return settings.CELERY_BROKER_URL
