"""Production settings are secure by default and refuse to start half-configured."""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

REPO = Path(__file__).resolve().parents[2]


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # A production check must not inherit test-only switches from this process.
    dropped = ("SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE")
    base = {k: v for k, v in os.environ.items() if k not in dropped}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_mode_refuses_to_start_without_a_secret_key() -> None:
    result = _manage("check", DEBUG="False", ALLOWED_HOSTS="bench.example.org")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "BenchLoop refuses to start: SECRET_KEY must be set to a random string of at least 50 "
        "characters when DEBUG is off (python -c 'import secrets; "
        "print(secrets.token_urlsafe(64))')."
    ]


def test_production_mode_refuses_to_start_without_allowed_hosts() -> None:
    result = _manage("check", DEBUG="False", SECRET_KEY=secrets.token_urlsafe(64))
    assert result.returncode == 2
    assert "ALLOWED_HOSTS must be set" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("site_url", "problem"),
    [
        ("", "SITE_URL must be set when DEBUG is off"),
        ("bench.example.org", "SITE_URL must be http(s)://host[:port] with nothing after it"),
        ("https://bench.example.org/leaderboard/", "with nothing after it"),
        ("https://user@bench.example.org", "with nothing after it"),
        ("https://elsewhere.example.net", "SITE_URL's host 'elsewhere.example.net' is not in"),
        ("http://bench.example.org", "SITE_URL must be https:// while SECURE_SSL_REDIRECT is on"),
    ],
)
def test_production_mode_refuses_a_missing_or_malformed_site_url(site_url, problem) -> None:
    """Emails, webhooks and the CLI link to SITE_URL: a wrong one would send users elsewhere."""
    result = _manage(
        "check",
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="bench.example.org",
        API_KEY_PEPPER=secrets.token_urlsafe(32),
        SITE_URL=site_url,
    )
    assert result.returncode == 2
    assert problem in result.stderr and "Traceback" not in result.stderr


def test_a_malformed_boolean_is_an_error_not_a_guess() -> None:
    result = _manage("check", DEBUG="yes please")
    assert result.returncode == 2
    assert "DEBUG must be True or False" in result.stderr


def test_check_deploy_is_clean_in_production_mode() -> None:
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="bench.example.org",
        API_KEY_PEPPER=secrets.token_urlsafe(32),
        SITE_URL="https://bench.example.org",
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_mode_turns_on_secure_cookies_hsts_and_manifest_storage() -> None:
    code = (
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, "
        "s.SECURE_SSL_REDIRECT, s.STORAGES['staticfiles']['BACKEND'])"
    )
    result = _manage(
        "shell",
        "-c",
        code,
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="bench.example.org",
        API_KEY_PEPPER=secrets.token_urlsafe(32),
        SITE_URL="https://bench.example.org",
    )
    assert result.stdout.strip().splitlines()[-1].split() == [
        "True",
        "True",
        "31536000",
        "True",
        "whitenoise.storage.CompressedManifestStaticFilesStorage",
    ]


def test_plain_http_is_an_explicit_switch_that_drops_the_https_only_settings() -> None:
    """BENCHLOOP_HTTPS=False (scripts/serve.sh on localhost): no redirect to https, no HSTS and
    cookies a browser returns over http; everything else stays as in production."""
    code = (
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, "
        "s.SECURE_SSL_REDIRECT, s.DEBUG, s.STORAGES['staticfiles']['BACKEND'])"
    )
    result = _manage(
        "shell",
        "-c",
        code,
        DEBUG="False",
        BENCHLOOP_HTTPS="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="127.0.0.1",
        API_KEY_PEPPER=secrets.token_urlsafe(32),
        SITE_URL="http://127.0.0.1:8000",
    )
    assert result.stdout.strip().splitlines()[-1].split() == [
        "False",
        "False",
        "0",
        "False",
        "False",
        "whitenoise.storage.CompressedManifestStaticFilesStorage",
    ]


@pytest.mark.django_db
def test_there_are_no_pending_migrations() -> None:
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
