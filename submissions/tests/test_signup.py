"""Sign-up, sign-in and password reset never tell anyone whether an email is registered."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db
PASSWORD = "a long enough passphrase 42"
LINK = re.compile(r"https?://\S+")


def _sign_up(username: str, email: str, **extra):
    return Client(**extra).post(
        "/account/signup/",
        {"username": username, "email": email, "password1": PASSWORD, "password2": PASSWORD},
        follow=True,
    )


def _visible(response) -> str:
    """The page as a reader sees it: without the per-request CSRF tokens."""
    text = re.sub(r'"x-csrftoken": "[^"]+"', "", response.content.decode())
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", text)


def test_a_registered_and_a_new_email_get_the_same_answer(
    alice, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        registered = _sign_up("newname1", "ALICE@example.org")
        fresh = _sign_up("newname2", "nobody-yet@example.org")
    assert registered.status_code == fresh.status_code == 200
    assert registered.redirect_chain == [("/account/signup/sent/", 302)]
    assert fresh.redirect_chain == [("/account/signup/sent/", 302)]
    assert _visible(registered) == _visible(fresh)
    assert "Check your email" in _visible(fresh)
    # Nothing about alice's account changed, and no second account has her address.
    assert User.objects.filter(email__iexact="alice@example.org").count() == 1
    assert not User.objects.filter(username="newname1").exists()
    # Each address got one mail: alice is told someone tried, the newcomer gets a link.
    to_alice, to_newcomer = sorted(mail.outbox, key=lambda m: m.to[0])
    assert to_alice.to == ["alice@example.org"]
    assert "someone tried to sign up" in to_alice.subject and "alice" in to_alice.body
    assert "/account/login/" in to_alice.body and "/account/password-reset/" in to_alice.body
    assert to_newcomer.to == ["nobody-yet@example.org"]
    assert "/account/activate/" in to_newcomer.body


def test_a_new_account_works_only_once_its_link_is_opened(
    django_capture_on_commit_callbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _sign_up("newcomer", "newcomer@example.org")
    user = User.objects.get(username="newcomer")
    assert not user.is_active
    signin = Client().post("/account/login/", {"username": "newcomer", "password": PASSWORD})
    assert signin.status_code == 200 and "_auth_user_id" not in signin.client.session
    link = LINK.search(mail.outbox[0].body).group(0)
    path = link.split("://", 1)[1].split("/", 1)[1]
    browser = Client()
    page = browser.get(f"/{path}")
    assert page.status_code == 200 and "Activate my account" in page.content.decode()
    assert not User.objects.get(pk=user.pk).is_active  # opening the link activates nothing
    activated = browser.post(f"/{path}")
    assert activated.status_code == 302 and activated.headers["Location"] == "/account/"
    assert User.objects.get(pk=user.pk).is_active
    assert browser.get("/account/").status_code == 200
    # The link works once.
    assert Client().get(f"/{path}").status_code == 400


def test_an_unconfirmed_sign_up_gives_way_to_a_new_one_with_the_same_address(
    django_capture_on_commit_callbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _sign_up("squatter", "victim@example.org")
        _sign_up("realowner", "victim@example.org")
    assert list(User.objects.filter(email="victim@example.org").values_list("username")) == [
        ("realowner",)
    ]
    assert [m.to for m in mail.outbox] == [["victim@example.org"], ["victim@example.org"]]


def test_sign_in_fails_the_same_way_for_an_inactive_account_and_a_wrong_password(alice) -> None:
    User.objects.create_user("dormant", "d@example.org", PASSWORD, is_active=False)
    inactive = Client().post("/account/login/", {"username": "dormant", "password": PASSWORD})
    wrong = Client().post("/account/login/", {"username": "alice", "password": "not it"})
    unknown = Client().post("/account/login/", {"username": "nobody", "password": "x"})
    messages = {
        re.search(r'<div class="form-errors"[^>]*>(.*?)</div>', r.content.decode(), re.S).group(1)
        for r in (inactive, wrong, unknown)
    }
    assert len(messages) == 1 and inactive.status_code == wrong.status_code == 200


def test_password_reset_answers_the_same_for_known_and_unknown_addresses(
    alice, django_capture_on_commit_callbacks
) -> None:
    known = Client().post("/account/password-reset/", {"email": "alice@example.org"})
    unknown = Client().post("/account/password-reset/", {"email": "ghost@example.org"})
    assert known.status_code == unknown.status_code == 302
    assert (
        known.headers["Location"] == unknown.headers["Location"] == "/account/password-reset/sent/"
    )
    assert [m.to for m in mail.outbox] == [["alice@example.org"]]
    link = LINK.search(mail.outbox[0].body).group(0)
    path = "/" + link.split("://", 1)[1].split("/", 1)[1]
    browser = Client()
    form = browser.get(path, follow=True)
    assert "Choose a new password" in form.content.decode()
    done = browser.post(
        form.redirect_chain[-1][0],
        {
            "new_password1": "another long passphrase 7",
            "new_password2": "another long passphrase 7",
        },
    )
    assert done.status_code == 302
    assert Client().login(username="alice", password="another long passphrase 7")


@pytest.mark.parametrize(
    "username",
    ["anonymous", "Anonymous", "ANONYMOUS", "an0nym0us", "anon_ymous", "imported", "Eric", "ER1C"],
)
def test_reserved_and_imported_names_cannot_be_taken(username: str) -> None:
    from leaderboard.tests.factories import add_runs, record

    add_runs(record(model_id="eric-run:8b", submitter="eric"))
    response = _sign_up(username, f"{username.lower()}@example.org")
    assert "is reserved or belongs to an imported submitter" in response.content.decode()
    assert not User.objects.filter(username=username).exists()


@pytest.mark.parametrize("username", ["аnonymous", "аlice", "ёric"])  # Cyrillic letters
def test_new_usernames_are_ascii_so_no_letter_can_pass_for_another(username: str) -> None:
    response = _sign_up(username, "someone@example.org")
    assert "has-error" in response.content.decode()
    assert not User.objects.filter(username=username).exists()
