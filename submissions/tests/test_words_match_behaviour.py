"""Issue 32, words that disagreed with what happens: the report page says what one report
does, and sign-up on console mail (the embedded default) shows the activation link it printed."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Run
from submissions.services import set_trusted
from submissions.tests.test_reports import _approved_runs, _client, _report

pytestmark = pytest.mark.django_db
PASSWORD = "a long enough passphrase 42"
CONSOLE = "django.core.mail.backends.console.EmailBackend"


def _effect(user: User, run_id: int) -> str:
    html = _client(user).get(f"/runs/{run_id}/report/").content.decode()
    found = re.search(r'<p class="muted" id="report-effect">(.*?)</p>', html, re.S)
    assert found, "the report page does not say what a report does"
    return found.group(1)


def test_the_report_page_says_what_one_report_does(
    settings, alice_key, smoke_run, mallory, bob
) -> None:
    settings.BENCHLOOP_REPORTS_TO_HIDE_RUN = 3
    (run_id,) = _approved_runs(alice_key, smoke_run, 1)
    ordinary = _effect(mallory, run_id)
    assert "until 3 different people" in ordinary
    assert "several" not in ordinary
    # A trusted submitter is told their one report takes the run down, and it does.
    carol = User.objects.create_user("carol", "carol@example.org", PASSWORD)
    set_trusted(user=carol, trusted=True, moderator=bob)
    trusted = _effect(carol, run_id)
    assert "your report takes this run off the leaderboard at once" in trusted
    assert Run.objects.get(pk=run_id).published
    assert _report(carol, run_id).status_code == 302
    assert not Run.objects.get(pk=run_id).published


def _sign_up(client: Client, username: str, email: str):
    return client.post(
        "/account/signup/",
        {"username": username, "email": email, "password1": PASSWORD, "password2": PASSWORD},
        follow=True,
    )


def test_console_mail_puts_the_activation_link_on_the_page(
    settings, capfd, django_capture_on_commit_callbacks
) -> None:
    settings.EMAIL_BACKEND = CONSOLE
    client = Client()
    with django_capture_on_commit_callbacks(execute=True):
        page = _sign_up(client, "consoleuser", "console@example.org").content.decode()
    printed = capfd.readouterr().out
    mailed = re.search(r"https?://\S+(/account/activate/\S+/)", printed)
    assert mailed, "the console backend printed no activation link"
    assert "This site sends no email" in page
    shown = re.search(r'id="activation-link" href="([^"]+)"', page)
    assert shown and shown.group(1) == mailed.group(1)
    # The link is the real one: it activates the account.
    answer = client.post(shown.group(1), follow=True)
    assert answer.redirect_chain[-1][0] == "/account/"
    assert User.objects.get(username="consoleuser").is_active


def test_real_mail_keeps_the_link_off_the_page(settings, django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with django_capture_on_commit_callbacks(execute=True):
        page = _sign_up(Client(), "mailuser", "mail@example.org").content.decode()
    assert "We sent a message to the address you gave" in page
    assert "activation-link" not in page and "/account/activate/" not in page
