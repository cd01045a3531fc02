"""Security review, part 1: CSRF on every form and object-level permissions on every private
view and API. The CSRF tests discover URLs and forms, so a new unprotected one fails them."""

from __future__ import annotations

import re
from collections import deque

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern, RoutePattern
from rest_framework.authentication import SessionAuthentication
from rest_framework.views import APIView

from lab import services as lab
from lab.models import BenchmarkJob, NotificationSettings, QuickPrompt, WebhookDelivery
from lab.notifications import notify_finished
from runs.models import Run
from submissions.models import ApiKey, DeviceAuthorization, Status, Submission
from submissions.services import approve_device_authorization, start_device_authorization
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db

CONVERTER_SAMPLES = {"int": "1", "path": "a/b", "text": "a/b", "str": "x", "slug": "x"}
CSRF_FAILED = b"This form could not be checked"  # templates/403_csrf.html


def _sample(pattern) -> str:
    """A concrete path that the pattern matches."""
    if isinstance(pattern, RoutePattern):
        return re.sub(
            r"<(?:(\w+):)?\w+>", lambda m: CONVERTER_SAMPLES[m.group(1) or "str"], str(pattern)
        )
    assert isinstance(pattern, RegexPattern), pattern
    text = str(pattern).removeprefix("^").removesuffix("$")
    text = re.sub(r"\(\?P<\w+>([^)|]*)[^)]*\)", r"\1", text)  # first alternative of a group
    text = re.sub(r"\[\^/\.\]\+|\.\+|\.\*|\[\^/\]\+|\\d\+", "1", text)
    return text.replace("\\", "")


def _every_view(resolver: URLResolver | None = None, prefix: str = "/"):
    """(path, view) for every URL pattern, nested includes and the admin included."""
    for entry in (resolver or get_resolver()).url_patterns:
        path = prefix + _sample(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _every_view(entry, path)
        else:
            assert isinstance(entry, URLPattern)
            yield path, entry.callback


def _exempt_api_view(view) -> bool:
    """A DRF view: csrf-exempt by design, which is safe only while no session cookie counts."""
    cls = getattr(view, "cls", None)
    return (
        isinstance(cls, type)
        and issubclass(cls, APIView)
        and not any(issubclass(a, SessionAuthentication) for a in cls.authentication_classes)
    )


@pytest.fixture
def admin_user(db) -> User:
    return User.objects.create_superuser("root", "root@example.org", "admin password 1")


def test_every_post_without_a_csrf_token_is_rejected(admin_user) -> None:
    """A signed-in superuser (so no permission check stops the request first) POSTs to every URL
    the site has; only the cookie-less DRF API may answer anything but a CSRF failure."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    checked, exempt = [], []
    for path, view in _every_view():
        assert resolve(path).func is view, f"{path}: extend _sample for this pattern"
        if getattr(view, "csrf_exempt", False):
            assert _exempt_api_view(view), f"{path} is csrf_exempt but is not a cookie-less API"
            exempt.append(path)
            continue
        response = client.post(path, {"name": "x"})
        assert response.status_code == 403 and CSRF_FAILED in response.content, path
        checked.append(path)
    assert {"/account/login/", "/account/keys/", "/theme/", "/lab/notifications/"} <= set(checked)
    assert "/account/keys/1/revoke/" in checked and "/moderation/decide/" in checked
    assert any(p.startswith("/admin/") for p in checked)
    assert all(p.startswith("/api/v1/") or p == "/submit" for p in exempt)
    # The API ignores the session entirely: a signed-in browser cannot be driven into an upload.
    upload = client.post("/api/v1/runs", "{}", content_type="application/json")
    assert upload.status_code == 401


def test_a_login_form_without_its_token_does_not_sign_in(alice) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/account/login/", {"username": "alice", "password": "correct horse battery"}
    )
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


FORM = re.compile(r"<form\b[^>]*>.*?</form>", re.S | re.I)
HREF = re.compile(r'href="(/[^"#]*)"')


def _crawl(client: Client, starts: list[str], limit: int = 60) -> dict[str, str]:
    seen: dict[str, str] = {}
    queue = deque(starts)
    while queue and len(seen) < limit:
        url = queue.popleft().replace("&amp;", "&")
        if url in seen or url.startswith(("/static/", "/admin/", "/api/")) or "logout" in url:
            continue
        response = client.get(url)
        kind = response.get("Content-Type", "")
        seen[url] = response.content.decode() if "text/html" in kind else ""
        queue.extend(HREF.findall(seen[url]))
    return seen


def test_every_rendered_post_form_carries_a_csrf_token(
    admin_user, alice, alice_key, smoke_run
) -> None:
    """Crawl the site as a staff operator from every entry point and look inside each form."""
    admin_user.user_permissions.add(Permission.objects.get(codename="operate_lab"))
    run_id = post_json(Client(), "/api/v1/runs", smoke_run, alice_key).json()["id"]
    Submission.objects.filter(run_id=run_id).update(submitter=admin_user)
    Run.objects.filter(pk=run_id).update(published=True)
    job = lab.queue_job(requested_by=admin_user, model="m", endpoint_url="http://10.0.0.9/v1")
    host = lab.register_host(name="lab-a", pools=["cpu"], hardware_info={})
    lab.approve_host(host=host, user=admin_user)
    client = Client()
    client.force_login(admin_user)
    starts = ["/", "/account/", "/account/keys/", "/account/runs/", "/device/", "/moderation/"]
    starts += ["/lab/", f"/lab/jobs/{job.pk}/", "/lab/jobs/new/", "/lab/hosts/"]
    starts += [f"/lab/hosts/{host.pk}/", "/lab/notifications/", f"/runs/{run_id}/report/"]
    pages = _crawl(client, starts)
    anonymous = _crawl(Client(), ["/account/login/", "/account/signup/", "/leaderboard/"])
    posts = 0
    for url, body in {**pages, **anonymous}.items():
        for form in FORM.findall(body):
            if re.search(r'method="post"', form, re.I):
                posts += 1
                assert 'name="csrfmiddlewaretoken"' in form, (url, form[:200])
        if re.search(r"hx-(post|put|patch|delete)=", body):
            assert re.search(r"<body[^>]*hx-headers='\{\"x-csrftoken\": \"\w+\"\}'", body), url
    # Sign out, theme, keys, revoke, withdraw, delete, device, decide, cancel, jobs, hosts, …
    assert posts >= 12 and len(pages) >= 15


# --- object-level permissions -------------------------------------------------------------


@pytest.fixture
def alices_things(alice, alice_key, smoke_run, operator) -> dict:
    """alice (an operator) owns a key, a pending run, a job, a quick prompt, webhook settings,
    a finished job's webhook delivery and an approved device login."""
    run_id = post_json(Client(), "/api/v1/runs", smoke_run, alice_key).json()["id"]
    job = lab.queue_job(
        requested_by=alice,
        model="private-model",
        endpoint_url="http://10.1.2.3:8080/v1",
        api_key_ref="ALICE_SECRET_REF",
        pool="gpu.4090",
    )
    host = lab.register_host(name="lab-b", pools=["gpu.4090"], hardware_info={})
    lab.approve_host(host=host, user=None)
    prompt = QuickPrompt.objects.create(
        host=host, requested_by=alice, server_url="http://x", model="m", prompt="alice's words"
    )
    NotificationSettings.objects.create(user=alice, webhook_url="https://alice.example/hook")
    done = lab.queue_job(requested_by=alice, model="done-model", endpoint_url="http://h/v1")
    BenchmarkJob.objects.filter(pk=done.pk).update(status=BenchmarkJob.Status.FAILED)
    notify_finished(done.pk)
    auth, device_code = start_device_authorization(client_name="alice-laptop")
    approve_device_authorization(user_code=auth.user_code, user=alice)
    return {
        "key": ApiKey.objects.get(user=alice),
        "run": run_id,
        "job": job,
        "prompt": prompt,
        "device": auth,
        "device_code": device_code,
    }


@pytest.fixture
def mallory_client(mallory) -> Client:
    client = Client()
    client.force_login(mallory)
    return client


def test_another_user_gets_404_for_alices_private_pages_and_actions(
    alices_things, mallory, mallory_client
) -> None:
    things = alices_things
    run, key, job = things["run"], things["key"], things["job"]
    assert mallory_client.post(f"/account/keys/{key.pk}/revoke/").status_code == 404
    assert mallory_client.post(f"/account/runs/{run}/withdraw/").status_code == 404
    assert mallory_client.post(f"/account/runs/{run}/delete/").status_code == 404
    assert mallory_client.post(f"/lab/jobs/{job.pk}/cancel/").status_code == 404
    # Operators may look at hosts, but never at another operator's prompts.
    mallory.user_permissions.add(Permission.objects.get(codename="operate_lab"))
    assert mallory_client.get(f"/lab/prompts/{things['prompt'].pk}/").status_code == 404
    host_page = mallory_client.get(f"/lab/hosts/{things['prompt'].host_id}/")
    assert host_page.status_code == 200 and "alice&#x27;s words" not in host_page.content.decode()
    # Lists show only mallory's own rows.
    listings = "".join(
        mallory_client.get(url).content.decode()
        for url in ("/account/", "/account/keys/", "/account/runs/", "/lab/notifications/")
    )
    assert key.prefix not in listings and "laptop" not in listings
    assert f"/runs/{run}/" not in listings
    alice_secret = NotificationSettings.objects.get(user__username="alice").webhook_secret
    assert alice_secret not in listings and "alice.example" not in listings
    # Nothing changed.
    key.refresh_from_db()
    assert key.revoked_at is None
    assert Submission.objects.get(run_id=run).status == Status.PENDING
    assert BenchmarkJob.objects.get(pk=job.pk).status == BenchmarkJob.Status.QUEUED


def test_saving_notification_settings_changes_only_your_own(alices_things, mallory_client):
    response = mallory_client.post(
        "/lab/notifications/", {"webhook_url": "https://mallory.example/hook"}
    )
    assert response.status_code == 302
    assert NotificationSettings.objects.get(user__username="alice").webhook_url == (
        "https://alice.example/hook"
    )
    # A finished job of alice's is delivered to alice's hook only.
    assert list(WebhookDelivery.objects.values_list("url", flat=True)) == [
        "https://alice.example/hook"
    ]


def test_moderation_and_admin_are_closed_to_ordinary_users(alices_things, mallory_client):
    run = alices_things["run"]
    submission = Submission.objects.get(run_id=run)
    for url in ("/moderation/", "/moderation/log/", "/lab/hosts/", "/lab/jobs/new/"):
        assert mallory_client.get(url).status_code == 403, url
    decide = {"submissions": [submission.pk], "status": "approved", "reason": "x"}
    assert mallory_client.post("/moderation/decide/", decide).status_code == 403
    alice_id = User.objects.get(username="alice").pk
    trust = mallory_client.post(f"/moderation/submitters/{alice_id}/trust/", {"trusted": "1"})
    assert trust.status_code == 403
    approve = mallory_client.post(f"/lab/hosts/{alices_things['prompt'].host_id}/approve/")
    assert approve.status_code == 404
    assert mallory_client.get("/admin/").status_code == 302
    submission.refresh_from_db()
    assert submission.status == Status.PENDING


def test_an_approved_device_login_stays_alices(alices_things, mallory_client) -> None:
    auth = alices_things["device"]
    again = mallory_client.post("/device/", {"code": auth.user_code})
    assert "No pending login has this code" in again.content.decode()
    auth.refresh_from_db()
    assert auth.user.username == "alice" and auth.state == DeviceAuthorization.State.APPROVED
    # Only the holder of the device code gets the key, and it is alice's.
    token = post_json(Client(), "/api/v1/device/token", {"device_code": "guess"})
    assert token.status_code == 400
    key = post_json(
        Client(), "/api/v1/device/token", {"device_code": alices_things["device_code"]}
    ).json()["api_key"]
    assert ApiKey.objects.get(prefix=key[3:11]).user.username == "alice"


def test_the_api_never_hands_another_users_objects_to_a_key(
    alices_things, mallory_key, smoke_run
) -> None:
    run, job = alices_things["run"], alices_things["job"]
    client = Client()
    headers = {"Authorization": f"Bearer {mallory_key}"}
    # alice's run is pending: private to everyone, her own key included.
    assert client.get(f"/api/v1/runs/{run}", headers=headers).status_code == 404
    deleted = client.delete(f"/api/v1/runs/{run}", headers=headers)
    assert deleted.status_code == 404 and deleted.json()["error"]["code"] == "not_found"
    # Re-sending alice's run (same client_run_id) does not take it over.
    taken = post_json(client, "/api/v1/runs", smoke_run, mallory_key)
    assert taken.status_code == 409
    assert Submission.objects.get(run_id=run).submitter.username == "alice"
    # mallory is no operator; and a job's public state has no endpoint, key ref or flags.
    queued = post_json(
        client, "/api/v1/jobs", {"model": "m", "endpoint_url": "http://x"}, mallory_key
    )
    assert queued.status_code == 403
    public = client.get(f"/api/v1/jobs/{job.pk}", headers=headers)
    assert public.status_code == 200
    page = client.get(f"/lab/jobs/{job.pk}/").content.decode()
    for secret in ("10.1.2.3", "ALICE_SECRET_REF"):
        assert secret not in public.content.decode() and secret not in page
    assert Run.objects.filter(pk=run).exists()
