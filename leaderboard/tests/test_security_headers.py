"""Security headers on every page, public and private, and pages that work under the strict
Content-Security-Policy (no inline script, no event-handler attributes, no javascript: URLs).
Production's HSTS and HTTPS redirect are checked in a process started with DEBUG off."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client

from lab import services as lab
from leaderboard.tests.factories import add_runs, record

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r'(?:href|src|hx-get)="(/[^"#]*)"')
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)


def _csp(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy", "")
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


def assert_secure_headers(response, url: str) -> None:
    csp = _csp(response)
    script = csp.get("script-src", csp.get("default-src"))
    assert script == ["'self'"], (url, script)
    assert csp["frame-ancestors"] == ["'none'"], url
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'self'"], url
    assert "'unsafe-inline'" not in str(csp) and "'unsafe-eval'" not in str(csp), url
    assert response.headers["X-Frame-Options"] == "DENY", url
    assert response.headers["Referrer-Policy"] == "strict-origin-when-cross-origin", url
    assert response.headers["X-Content-Type-Options"] == "nosniff", url
    assert response.headers["Cross-Origin-Opener-Policy"] == "same-origin", url


def assert_csp_compatible(html: str, url: str) -> None:
    assert not INLINE_SCRIPT.search(html), (url, INLINE_SCRIPT.search(html).group())
    assert not EVENT_HANDLER.search(html), (url, EVENT_HANDLER.search(html).group())
    assert "javascript:" not in html.lower(), url


def _crawl(client: Client, starts: list[str], limit: int = 80) -> dict[str, object]:
    seen: dict[str, object] = {}
    queue = deque(starts)
    while queue and len(seen) < limit:
        url = queue.popleft().replace("&amp;", "&")
        if url in seen or url.startswith("/static/") or "logout" in url or "/delete/" in url:
            continue
        response = client.get(url)
        assert response.status_code < 500, url
        seen[url] = response
        if "text/html" in response.get("Content-Type", ""):
            queue.extend(LINK.findall(response.content.decode()))
    return seen


@pytest.fixture
def site(alice) -> dict:
    runs = add_runs(
        record(model_id="qwen3:8b"),
        record(model_id="gemma3:12b", gpu="RTX 3090", submitter="grace"),
        record(model_id="llama3:8b", remote=True, score_scale="speed"),
    )
    job = lab.queue_job(requested_by=alice, model="m", endpoint_url="http://10.0.0.1/v1")
    return {"runs": runs, "job": job}


def test_every_public_page_and_file_carries_the_security_headers(site) -> None:
    runs = site["runs"]
    compare = ",".join(str(r.stack_id) for r in runs[:2])
    starts = ["/", "/leaderboard/", "/lab/", f"/lab/jobs/{site['job'].pk}/", "/healthz"]
    starts += ["/account/login/", "/account/signup/", "/api/v1/docs/", "/api/v1/schema/"]
    starts += ["/api/v1/leaderboard", "/api/v1/hardware", f"/api/v1/runs/{runs[0].id}"]
    starts += [f"/compare/?stacks={compare}", f"/compare/share.png?stacks={compare}"]
    starts += ["/lab/jobs/feed.atom", "/leaderboard/feed.atom", "/no-such-page/"]
    pages = _crawl(Client(), starts)
    kinds = {r.get("Content-Type", "").split(";")[0] for r in pages.values()}
    assert {"text/html", "image/png", "text/csv", "application/json"} <= kinds
    assert {"application/atom+xml", "application/vnd.oai.openapi"} <= kinds
    assert len(pages) >= 40
    for url, response in pages.items():
        assert_secure_headers(response, url)
        if "text/html" in response.get("Content-Type", ""):
            assert_csp_compatible(response.content.decode(), url)


def test_private_pages_carry_them_too(site, alice, bob) -> None:
    alice.user_permissions.add(Permission.objects.get(codename="operate_lab"))
    staff = User.objects.create_superuser("root", "root@example.org", "admin password 1")
    host = lab.register_host(name="lab-a", pools=["cpu"], hardware_info={})
    private = {
        alice: ["/account/", "/account/keys/", "/account/runs/", "/device/"],
        bob: ["/moderation/", "/moderation/log/"],
        staff: ["/lab/jobs/new/", "/lab/hosts/", f"/lab/hosts/{host.pk}/", "/lab/notifications/"],
    }
    for user, urls in private.items():
        client = Client()
        client.force_login(user)
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, url
            assert_secure_headers(response, url)
            assert_csp_compatible(response.content.decode(), url)
            assert "no-cache" in response.headers.get("Cache-Control", "") or url not in (
                "/account/keys/",
                "/device/",
            ), url


def test_the_admin_gets_the_strict_policy_too(site) -> None:
    """The admin is the most powerful page there is: same headers, and it works under the CSP."""
    assert_secure_headers(Client().get("/admin/login/"), "/admin/login/")
    staff = User.objects.create_superuser("root", "root@example.org", "admin password 1")
    client = Client()
    client.force_login(staff)
    pages = _crawl(client, ["/admin/", f"/admin/auth/user/{staff.pk}/change/"], limit=30)
    admin_pages = [url for url in pages if url.startswith("/admin/")]
    assert len(admin_pages) >= 15
    for url in admin_pages:
        response = pages[url]
        assert_secure_headers(response, url)
        if "text/html" in response.get("Content-Type", ""):
            html = response.content.decode()
            assert_csp_compatible(html, url)
            assert ' style="' not in html, url  # style-src 'self' would drop it


def _production(code: str) -> list[str]:
    """Run `code` in a fresh process with production settings against this test database."""
    db = connection.settings_dict
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "ALLOWED_HOSTS", "DEBUG")}
    env.update(
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="bench.example.org",
        API_KEY_PEPPER=secrets.token_urlsafe(32),
        SITE_URL="https://bench.example.org",
        # Real rate limits here: counters of its own, not the other tests' anonymous requests.
        CACHE_KEY_PREFIX=f"prod-test-{secrets.token_hex(4)}",
        DATABASE_URL=(
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


def test_production_sends_hsts_and_redirects_plain_http() -> None:
    code = (
        "import json; from django.test import Client; c = Client(HTTP_HOST='bench.example.org'); "
        "s = c.get('/api/v1/hardware', secure=True); p = c.get('/api/v1/hardware'); "
        "h = c.get('/healthz', HTTP_X_FORWARDED_PROTO='https'); "
        "print(json.dumps([dict(s.headers), s.status_code, p.status_code, p.get('Location'), "
        "dict(h.headers)]))"
    )
    secure, status, plain, location, proxied = json.loads(_production(code)[-1])
    assert status == 200
    hsts = "max-age=31536000; includeSubDomains; preload"
    assert secure["Strict-Transport-Security"] == hsts
    assert (plain, location) == (301, "https://bench.example.org/api/v1/hardware")
    # Behind the TLS proxy (X-Forwarded-Proto: https) the header is sent as well.
    assert proxied["Strict-Transport-Security"] == hsts
    for headers in (secure, proxied):
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert "'unsafe-inline'" not in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
