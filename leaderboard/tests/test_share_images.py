"""Share images: real PNGs, cached by content, linked from Open Graph tags."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.test import Client
from PIL import Image

from leaderboard import share
from leaderboard.tests.factories import HOSTILE, add_runs, record

pytestmark = pytest.mark.django_db


def _png(response) -> Image.Image:
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert "max-age=3600" in response["Cache-Control"]
    return Image.open(io.BytesIO(response.content))


def test_stack_run_and_compare_images_are_1200_by_630(client: Client) -> None:
    (a,) = add_runs(record(model_id=HOSTILE))
    (b,) = add_runs(record(model_id="other:8b"))
    for path in (
        f"/stacks/{a.stack_id}/share.png",
        f"/runs/{a.id}/share.png",
        f"/compare/share.png?stacks={a.stack_id},{b.stack_id}",
    ):
        assert _png(client.get(path)).size == (1200, 630)
    assert client.get(f"/compare/share.png?stacks={a.stack_id}").status_code == 404


def test_an_image_is_drawn_once_and_then_served_from_the_cache(client: Client) -> None:
    (run,) = add_runs(record())
    with mock.patch.object(share, "render_card", wraps=share.render_card) as draw:
        first = client.get(f"/stacks/{run.stack_id}/share.png").content
        second = client.get(f"/stacks/{run.stack_id}/share.png").content
    assert first == second and draw.call_count == 1
    add_runs(record(decode=99.0, overall=95))  # new evidence, new picture
    with mock.patch.object(share, "render_card", wraps=share.render_card) as draw:
        client.get(f"/stacks/{run.stack_id}/share.png")
    assert draw.call_count == 1


def test_pages_carry_open_graph_and_twitter_cards(client: Client) -> None:
    (run,) = add_runs(record())
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert f'<meta property="og:image" content="http://testserver/runs/{run.id}/share.png">' in html
    assert '<meta name="twitter:card" content="summary_large_image">' in html
    assert f'<link rel="canonical" href="http://testserver/runs/{run.id}/">' in html
