"""The model page and the run page's context: speed on one hardware class, never pooled."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from leaderboard.tests.lane_factories import class_record, on_class

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def _model() -> dict:
    q4 = on_class("rtx-4090", *(class_record("rtx-4090", decode=d) for d in (50, 52, 54, 56)))
    on_class("h100", *(class_record("h100", decode=d, quality=55) for d in (300, 310, 320)))
    q8 = on_class(
        "rtx-4090",
        *(
            class_record("rtx-4090", quantization="Q8_0", decode=d, quality=70)
            for d in (30, 31, 32)
        ),
    )
    cpu = on_class("cpu-epyc", class_record("cpu-epyc", quantization="Q2_K", decode=9))
    return {"q4": q4[0].stack_id, "q8": q8[0].stack_id, "cpu": cpu[0].stack_id}


def _row(html: str, stack_id: int) -> str:
    match = re.search(rf'<tr>\s*<td class="pick">[^\n]*value="{stack_id}".*?</tr>', html, re.S)
    assert match, stack_id
    return match.group(0)


def test_the_model_page_shows_one_class_the_one_with_most_runs_by_default(client: Client) -> None:
    ids = _model()
    html = client.get("/models/qwen3:8b/").content.decode()
    assert "<strong>2</strong> stacks on RTX 4090 24 GB" in html
    q4 = _row(html, ids["q4"])
    assert "53.0" in q4 and "95% CI 50.0–56.0" in q4 and "310" not in q4  # 4090 runs only
    assert "55.0" in q4  # quality, all hardware: its seven runs all scored 55
    assert "best</a> of 4" in q4
    q8 = _row(html, ids["q8"])
    assert "31.0" in q8 and "70.0" in q8
    # The stack never run on this class is listed apart, without a figure.
    elsewhere = html.split("Not measured on RTX 4090 24 GB")[1]
    assert f'href="/stacks/{ids["cpu"]}/"' in elsewhere
    assert "Quality against decode speed on RTX 4090 24 GB" in html


def test_hw_picks_the_class_and_htmx_gets_the_rows(client: Client) -> None:
    ids = _model()
    html = client.get("/models/qwen3:8b/?hw=h100").content.decode()
    q4 = _row(html, ids["q4"])
    assert "310.0" in q4 and "53.0" not in q4 and f'value="{ids["q8"]}"' not in html
    assert re.search(r'href="/models/qwen3:8b/\?hw=h100" aria-current="true"', html)
    partial = client.get("/models/qwen3:8b/?hw=cpu-epyc", headers=HTMX).content.decode()
    assert partial.lstrip().startswith('<section id="results"') and "1 run" in partial
    assert "n too small" not in partial
    assert client.get("/models/nothing:1b/").status_code == 404


def test_the_model_page_query_count_does_not_grow(
    client: Client, django_assert_num_queries
) -> None:
    _model()
    with django_assert_num_queries(2):  # stacks, lanes
        client.get("/models/qwen3:8b/")
    on_class("h100", *(class_record("h100", quantization=f"Q{i}_K") for i in range(2, 7)))
    with django_assert_num_queries(2):
        client.get("/models/qwen3:8b/")


def test_the_run_page_sets_a_run_among_its_class_only(client: Client) -> None:
    runs = on_class("rtx-4090", *(class_record("rtx-4090", decode=d) for d in (50, 52, 54)))
    on_class("h100", *(class_record("h100", decode=d) for d in (300, 310, 320)))
    (odd,) = on_class("rtx-4090", class_record("rtx-4090", decode=99, comparable=False))
    html = client.get(f"/runs/{runs[0].id}/").content.decode()
    context = html.split('id="context-title"')[1].split("</section>")[0]
    assert "RTX 4090 24 GB" in context and "3 comparable runs" in context
    assert "52.0" in context and "95% CI 50.0–54.0" in context and "best of 4 attempts" in context
    assert "310" not in context and "Runs on other hardware are not counted" in context
    other = client.get(f"/runs/{odd.id}/").content.decode()
    assert "it is not comparable" in other
