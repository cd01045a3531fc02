"""Share images: real PNGs, cached by content, linked from Open Graph tags; what they draw is
bound to one hardware class and names every stack distinctly."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.test import Client, RequestFactory
from PIL import Image

from leaderboard import share
from leaderboard.tests.factories import HOSTILE, add_runs, record
from leaderboard.tests.lane_factories import class_record, on_class
from leaderboard.views import images

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
    (run,) = on_class("rtx-4090", class_record("rtx-4090"))
    with mock.patch.object(share, "render_card", wraps=share.render_card) as draw:
        first = client.get(f"/stacks/{run.stack_id}/share.png").content
        second = client.get(f"/stacks/{run.stack_id}/share.png").content
    assert first == second and draw.call_count == 1
    on_class("rtx-4090", class_record("rtx-4090", decode=99.0, overall=95))  # new evidence
    with mock.patch.object(share, "render_card", wraps=share.render_card) as draw:
        client.get(f"/stacks/{run.stack_id}/share.png")
    assert draw.call_count == 1


def test_a_stack_card_shows_one_hardware_class_with_its_interval() -> None:
    runs = on_class("rtx-4090", *(class_record("rtx-4090", decode=d) for d in (50, 52, 54)))
    on_class("h100", *(class_record("h100", decode=d) for d in (300, 310, 320, 330)))
    stack_id = runs[0].stack_id
    text = images.stack_card(RequestFactory().get("/"), stack_id).text()
    # The class with most runs; its median and interval; the other class only counted.
    assert "on H100 80 GB" in text and "decode tok/s · 95% CI 300.0–330.0: 315.0" in text
    assert "52.0" not in text and "1 other class" in text
    asked = images.stack_card(RequestFactory().get("/?hw=rtx-4090"), stack_id).text()
    assert "on RTX 4090 24 GB" in asked and ": 52.0" in asked and "315.0" not in asked


def test_a_compare_card_names_every_stack_apart_and_uses_one_class() -> None:
    same = {"model_id": "qwen3:32b", "quantization": "Q8_0", "engine": "ollama"}
    a = on_class("rtx-4090", *(class_record("rtx-4090", decode=d, **same) for d in (40, 41, 42)))
    b = on_class(
        "rtx-4090",
        *(class_record("rtx-4090", decode=d, harness="mini-swe", **same) for d in (50, 51, 52)),
    )
    on_class("h100", class_record("h100", decode=400, **same))
    url = f"/?stacks={a[0].stack_id},{b[0].stack_id}"
    card = images.compare_card(RequestFactory().get(url))
    titles = [column.title for column in card.columns]
    assert len(set(titles)) == 2 and "qwen3:32b Q8_0 · ollama · mini-swe harness" in titles
    # What is drawn is distinct too: a long title loses its middle, never its end.
    draw = share.measure()
    drawn = [
        " ".join(share.title_lines(draw, t, share._font(24, bold=True), 210, 2)) for t in titles
    ]
    assert len(set(drawn)) == 2 and all(
        line.endswith(t[-8:]) for line, t in zip(drawn, titles, strict=True)
    )
    text = card.text()
    assert "Speeds on RTX 4090 24 GB only" in text and "400" not in text
    assert "decode tok/s · 95% CI 40.0–42.0: 41.0" in text


def test_pages_carry_open_graph_and_twitter_cards(client: Client) -> None:
    (run,) = add_runs(record())
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert f'<meta property="og:image" content="http://testserver/runs/{run.id}/share.png">' in html
    assert '<meta name="twitter:card" content="summary_large_image">' in html
    assert f'<link rel="canonical" href="http://testserver/runs/{run.id}/">' in html
