"""Project-wide test setup: real Postgres and Redis, a fast password hasher, fixture paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
FIXTURES = Path(os.environ.get("BENCHLOOP_FIXTURES_DIR", REPO.parent / "shared/fixtures/benchloop"))


@pytest.fixture(scope="session", autouse=True)
def _require_real_services(request: pytest.FixtureRequest) -> None:
    """The suite runs on Postgres and Redis (README command 2); SQLite would hide real bugs."""
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine or not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.exit(
            "Run the tests with scripts/test.sh (DATABASE_URL=postgres://…, "
            "CELERY_BROKER_URL=redis://…); found " + engine,
            returncode=2,
        )


@pytest.fixture(autouse=True)
def _fast_hasher(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"fixture folder {FIXTURES} is missing (set BENCHLOOP_FIXTURES_DIR)")
    return FIXTURES
