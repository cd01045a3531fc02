"""Project-wide test setup. Every test gets the real llama.cpp server fixtures and the fixture
folder. The site's apps also get real Postgres and Redis, a fast password hasher, generous
throttles and the cast (alice uploads with a key, bob moderates, mallory is another signed-up
user). worker/'s tests get none of the site's part: they import no Django and run with no
database and no broker (worker/tests/test_no_services.py)."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.test import Client

# The real llama.cpp server fixtures (llm_server, llm_url, …) serve every app's tests.
pytest_plugins = ["worker.tests.llm_server"]

REPO = Path(__file__).resolve().parent
WORKER = REPO / "worker"
# Every queue this test process creates on the broker's Redis lives under a prefix of its own
# (kombu's global_keyprefix), so a run never consumes or purges a queue it did not create;
# processes the tests start (lab workers, servers) inherit it.
BROKER_KEY_PREFIX = f"benchloop-test-{uuid.uuid4().hex[:12]}:"
os.environ["CELERY_BROKER_KEY_PREFIX"] = BROKER_KEY_PREFIX
# So are its cache keys (pages, throttle and form counters): test databases restart their ids,
# and a counter an earlier run on the same Redis left for its user 87 today would count against
# this run's user 87.
CACHE_KEY_PREFIX = f"benchloop-test-cache-{uuid.uuid4().hex[:12]}"
os.environ["CACHE_KEY_PREFIX"] = CACHE_KEY_PREFIX


def _prefix_caches() -> None:
    """pytest-django may have read the settings before this file: set the prefix there too
    (no cache has been opened yet; each reads its settings when first used). Settings read
    later take it from the environment; worker/'s tests run without Django."""
    try:
        from django.conf import settings
    except ImportError:
        return
    if not settings.configured:
        return
    for cache in settings.CACHES.values():
        if "KEY_PREFIX" in cache:
            cache["KEY_PREFIX"] = CACHE_KEY_PREFIX


_prefix_caches()
FIXTURES = Path(os.environ.get("BENCHLOOP_FIXTURES_DIR", REPO.parent / "shared/fixtures/benchloop"))
# Whether this session collected any test of the site's apps (set at collection; with xdist,
# every worker collects the whole selection, so all of them agree).
_SESSION = {"site_tests": False}


def _is_site_test(path: Path) -> bool:
    """A test of the site's apps, as opposed to worker/ (the engine and CLI: no Django)."""
    return not path.is_relative_to(WORKER)


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background of a non-interactive shell inherits SIGINT ignored, and
    # so would every CLI it starts: the tests that press Ctrl-C (SIGINT) at a run would wait on
    # a run that never hears it. A handler here is reset to the default in each child at exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if config.pluginmanager.hasplugin("django"):
        from django.core.servers.basehttp import ThreadedWSGIServer

        # live_server's listen backlog is socketserver's default of 5: a burst of 50 concurrent
        # clients would see connection resets that a real server (gunicorn's: 2048) never causes.
        ThreadedWSGIServer.request_queue_size = 256


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _SESSION["site_tests"] = any(_is_site_test(item.path) for item in items)


@pytest.fixture(scope="session", autouse=True)
def _require_real_services(request: pytest.FixtureRequest) -> None:
    """The site's suite runs on Postgres and Redis (README command 2); SQLite would hide real
    bugs. A session of worker/ tests alone needs neither."""
    if not _SESSION["site_tests"]:
        return
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine or not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.exit(
            "Run the tests with scripts/test.sh (DATABASE_URL=postgres://…, "
            "CELERY_BROKER_URL=redis://…); found " + engine,
            returncode=2,
        )


@pytest.fixture(scope="session", autouse=True)
def _private_queues(_require_real_services) -> Iterator[None]:
    """This run's queues, under BROKER_KEY_PREFIX, and its cache keys, under CACHE_KEY_PREFIX,
    removed at the end: tasks enqueued by tests (no worker consumes most of them) and the
    caches' unexpiring keys must not pile up, and nobody else's keys are touched."""
    if not _SESSION["site_tests"]:
        yield
        return
    import redis
    from django.conf import settings

    from benchloop_site.celery import app

    # Settings read the prefix from the environment; set it too in case they were loaded first.
    options = app.conf.broker_transport_options
    app.conf.broker_transport_options = {**options, "global_keyprefix": BROKER_KEY_PREFIX}
    yield
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    for key in client.scan_iter(match=f"{BROKER_KEY_PREFIX}*", count=1000):
        client.delete(key)
    for cache in settings.CACHES.values():
        if str(cache["LOCATION"]).startswith("redis://"):
            client = redis.Redis.from_url(cache["LOCATION"])
            for key in client.scan_iter(match=f"{CACHE_KEY_PREFIX}:*", count=1000):
                client.delete(key)


@pytest.fixture(autouse=True)
def _site_defaults(request: pytest.FixtureRequest) -> None:
    """The site's per-test defaults, for the site's tests only: they need Django's settings,
    and the leaderboard's version lives in the cache (Redis)."""
    if _is_site_test(request.node.path):
        for name in ("_fast_hasher", "throttle_rates", "form_rates", "_new_leaderboard_version"):
            request.getfixturevalue(name)


@pytest.fixture
def broker_key() -> Callable[[str], str]:
    """The Redis key of this run's queue (or other broker key) `name`."""
    return lambda name: BROKER_KEY_PREFIX + name


@pytest.fixture
def private_queue(broker_key):
    """Messages go to a queue of this test's own on the real Redis broker: its length."""
    import redis
    from django.conf import settings
    from django.db import connection

    from benchloop_site.celery import app

    name = f"test-queue-{uuid.uuid4().hex[:12]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = name
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    # Pending marks left by earlier runs on a recreated database would name the same ids.
    database = connection.settings_dict["NAME"]
    for key in client.scan_iter(f"*stack-refresh:{database}:*"):
        client.delete(key)
    try:
        yield lambda: client.llen(broker_key(name))
    finally:
        app.conf.task_default_queue = previous
        client.delete(broker_key(name))


@pytest.fixture
def _fast_hasher(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def throttle_rates(monkeypatch) -> dict:
    """Generous limits by default; a test that checks throttling sets its own (DRF reads the
    rates into a class attribute at import, so the settings fixture cannot change them)."""
    from rest_framework.throttling import SimpleRateThrottle

    rates = dict.fromkeys(SimpleRateThrottle.THROTTLE_RATES, "100000/minute")
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    return rates


@pytest.fixture
def form_rates(settings) -> dict:
    """Generous HTML-form limits too; a test of one sets its own rate in the returned dict."""
    settings.FORM_THROTTLE_RATES = dict.fromkeys(settings.FORM_THROTTLE_RATES, "100000/minute")
    return settings.FORM_THROTTLE_RATES


@pytest.fixture
def _new_leaderboard_version() -> None:
    """Cached leaderboard fragments are keyed by a data version that a rolled-back test
    leaves behind; each test starts on a fresh one so it never sees another test's board, nor
    another test's estimates' calibration in place of its own."""
    from leaderboard import cache, estimated

    cache.bump()
    cache.forget_latest(estimated.CALIBRATION)


@pytest.fixture
def unique_address() -> str:
    """A client address no earlier run has used, so throttle counters start from zero."""
    import random

    return f"10.{random.randint(0, 255)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"fixture folder {FIXTURES} is missing (set BENCHLOOP_FIXTURES_DIR)")
    return FIXTURES


# --- the cast ---------------------------------------------------------------------------


@pytest.fixture
def alice(db) -> User:
    from django.contrib.auth.models import User

    return User.objects.create_user("alice", "alice@example.org", "correct horse battery")


@pytest.fixture
def alice_key(alice) -> str:
    from submissions.services import create_api_key

    return create_api_key(user=alice, name="laptop", scopes=["submit", "read"])[1]


@pytest.fixture
def mallory(db) -> User:
    from django.contrib.auth.models import User

    return User.objects.create_user("mallory", "mallory@example.org", "another good password")


@pytest.fixture
def mallory_key(mallory) -> str:
    from submissions.services import create_api_key

    return create_api_key(user=mallory, name="mine", scopes=["submit", "read"])[1]


@pytest.fixture
def bob(db) -> User:
    from django.contrib.auth.models import Group, Permission, User

    user = User.objects.create_user("bob", "bob@example.org", "moderating all day")
    # get_or_create: a transactional test's flush removes what the data migration created.
    group, _ = Group.objects.get_or_create(name="moderator")
    group.permissions.add(Permission.objects.get(codename="moderate_submission"))
    user.groups.add(group)
    return user


@pytest.fixture
def bob_client(bob) -> Client:
    from django.test import Client

    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def alice_client(alice) -> Client:
    from django.test import Client

    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def envelope(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "generated/v3-full-local/publish-payload.json").read_text())


@pytest.fixture
def v2_run(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "generated/v2-0.2.3-local/run.json").read_text())


@pytest.fixture
def smoke_run(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "generated/v3-smoke-local-run.json").read_text())


@pytest.fixture
def operator(alice, alice_key) -> User:
    """alice is also a lab operator."""
    from django.contrib.auth.models import Permission

    alice.user_permissions.add(Permission.objects.get(codename="operate_lab"))
    return alice
