"""Whole pages shared by anonymous visitors: never another visitor's token, name or theme."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from leaderboard import cache as board_cache
from leaderboard.tests.factories import add_runs, record
from runs.models import Stack
from runs.services import refresh_stack_stats
from submissions.models import Status
from submissions.services import moderate_submission

pytestmark = pytest.mark.django_db
PAGES = ["/", "/leaderboard/", "/leaderboard/?vendor=nvidia&sort=decode"]


@pytest.fixture(autouse=True)
def board() -> None:
    add_runs(record(model_id="llama3.1:8b"), record(model_id="qwen3:14b", gpu="NVIDIA A100"))


def _token(html: str) -> str:
    tokens = set(re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', html))
    tokens |= set(re.findall(r'"x-csrftoken": "([^"]+)"', html))
    assert len(tokens) == 1, tokens
    return tokens.pop()


def _queries(client: Client, path: str) -> tuple[str, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200
    return response.content.decode(), len(queries.captured_queries)


@pytest.mark.parametrize("path", PAGES)
def test_a_second_visitor_gets_the_page_from_the_cache_with_a_token_of_their_own(path) -> None:
    first, second = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    first_html, first_queries = _queries(first, path)
    second_html, second_queries = _queries(second, path)
    assert first_queries > 0 and second_queries == 0
    assert "llama3.1:8b" in second_html
    assert not re.search(r"csrf-[0-9a-f]{32}", second_html)  # the placeholder never leaks

    # Each token works with its own visitor's cookie only: the page held no one else's.
    mine, theirs = _token(second_html), _token(first_html)
    refused = second.post("/theme/", {"theme": "dark", "csrfmiddlewaretoken": theirs})
    assert refused.status_code == 403
    answer = second.post("/theme/", {"theme": "dark", "csrfmiddlewaretoken": mine})
    assert answer.status_code == 302


def test_signed_in_visitors_never_get_the_shared_page_and_never_leave_their_name_in_it() -> None:
    member = Client()
    member.force_login(User.objects.create_user("carol-the-member"))
    anonymous = Client()
    for path in PAGES:
        assert "carol-the-member" in member.get(path).content.decode()
        assert "carol-the-member" not in anonymous.get(path).content.decode()
        assert "Sign in" in anonymous.get(path).content.decode()
        assert "carol-the-member" in member.get(path).content.decode()


def test_each_theme_gets_its_own_copy() -> None:
    dark, plain = Client(), Client()
    dark.cookies["theme"] = "dark"
    for path in PAGES:
        assert 'data-theme="dark"' in dark.get(path).content.decode()
        assert 'data-theme="dark"' not in plain.get(path).content.decode()
        assert 'data-theme="dark"' in dark.get(path).content.decode()


@pytest.mark.parametrize(
    ("cookies", "shared"),
    [
        ({}, True),
        ({"csrftoken": "x", "theme": "dark"}, True),
        ({"sessionid": "x"}, False),  # maybe signed in, maybe session data: never shared
        ({"messages": "x"}, False),  # a flash message is for its visitor only
    ],
)
def test_only_visitors_without_a_session_or_a_message_share_pages(rf, cookies, shared) -> None:
    request = rf.get("/leaderboard/")
    request.COOKIES.update(cookies)
    assert board_cache.shareable(request) is shared


def test_unknown_parameters_share_the_canonical_page_and_the_theme_form_returns_there() -> None:
    client = Client()
    _queries(client, "/leaderboard/?vendor=nvidia")
    html, queries = _queries(client, "/leaderboard/?vendor=nvidia&utm_source=x&junk=1")
    assert queries == 0
    assert 'name="next" value="/leaderboard/?vendor=nvidia"' in html


def _stack_path() -> str:
    return f"/stacks/{Stack.objects.get(model_id='llama3.1:8b').pk}/"


@pytest.mark.parametrize("query", ["", "?sort=overall", "?sort=decode&page=1"])
def test_stack_pages_are_shared_for_a_plain_sort_and_page(query) -> None:
    path = _stack_path() + query
    assert _queries(Client(), path)[1] > 0
    html, queries = _queries(Client(), path)
    assert queries == 0 and "llama3.1:8b" in html
    assert f'name="next" value="{escape(path)}"' in html


def test_a_stack_page_with_other_parameters_is_rendered_for_its_visitor_alone() -> None:
    path = _stack_path()
    # The sort links copy the query string: the stranger's parameter must not reach anyone else.
    assert "planted" in Client().get(f"{path}?sort=overall&planted=1").content.decode()
    assert _queries(Client(), f"{path}?sort=overall&planted=1")[1] > 0
    assert "planted" not in Client().get(f"{path}?sort=overall").content.decode()
    assert _queries(Client(), f"{path}?sort=overall&sort=date")[1] > 0


def test_rejecting_a_run_changes_its_stack_page_at_once(bob) -> None:
    (extra,) = add_runs(record(model_id="llama3.1:8b", overall=91.5, decode=77.7))
    refresh_stack_stats(stack_ids=[extra.stack_id])
    path = _stack_path()
    assert "77.7" in Client().get(path).content.decode()
    moderate_submission(submission=extra.submission, status=Status.REJECTED, moderator=bob)
    assert "77.7" not in Client().get(path).content.decode()
