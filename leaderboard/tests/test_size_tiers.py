"""Model-size tiers over the board (issue 29): people shop by what fits, so the board offers
the sizes models come in as tabs, and a mixture-of-experts row says how many of its
parameters are active."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from leaderboard.tests.factories import add_runs, record
from runs import normalize
from runs.models import Stack

pytestmark = pytest.mark.django_db

# model: the tier its size puts it in
MODELS = {
    "phi3.5:3.8b": "to-4b",
    "llama3.1:8b": "7-9b",
    "phi4:14b": "12-15b",
    "qwen2.5:32b": "24-35b",
    "qwen3:30b": "24-35b",  # the 30B-A3B MoE: its total size is what has to fit
    "llama3.3:70b": "70b-up",
}


def test_each_size_falls_in_the_tier_people_name_it_by() -> None:
    assert [normalize.param_bucket(b) for b in (0.5, 4, 7, 9, 12, 14, 24, 32, 47, 70, 405)] == [
        "to-4b", "to-4b", "7-9b", "7-9b", "12-15b", "12-15b", "24-35b", "24-35b", "40-65b",
        "70b-up", "70b-up",
    ]  # fmt: skip
    assert normalize.param_bucket(None) == ""


def test_the_tabs_filter_the_board_and_mark_the_moe(client: Client) -> None:
    add_runs(*(record(model_id=model) for model in MODELS))
    assert {s.model_id: s.param_bucket for s in Stack.objects.all()} == MODELS
    html = client.get("/leaderboard/").content.decode()
    tabs = html.split('<nav class="size-tabs"')[1].split("</nav>")[0]
    assert re.findall(r'">([^<]+)</a>', tabs) == [
        "Any", "up to 4B", "7–9B", "12–15B", "24–35B", "40–65B", "70B and up",
    ]  # fmt: skip
    assert '<a href="/leaderboard/" aria-current="true">Any</a>' in tabs
    assert 'href="/leaderboard/?params=24-35b"' in tabs
    mid = client.get("/leaderboard/?params=24-35b").content.decode()
    shown = re.findall(r'<a class="model-id" href="[^"]*">([^<]+)</a>', mid)
    assert sorted(shown) == ["qwen2.5:32b", "qwen3:30b"]
    assert '<span class="tag moe">MoE · 3.3B active</span>' in mid
    assert mid.count('class="tag moe"') == 1  # the dense 32B is not marked
    assert 'href="/leaderboard/?params=24-35b" aria-current="true"' in mid
    # A tier with nothing in it keeps its tabs, to step back out.
    empty = client.get("/leaderboard/?params=40-65b").content.decode()
    assert '<nav class="size-tabs"' in empty and "No approved runs match this view" in empty


def test_the_backend_is_a_filter_and_shows_beside_the_engine(client: Client) -> None:
    """Issue 29: CUDA, ROCm, Metal, Vulkan and CPU are a filter and a column; the backend is
    part of the stack (its launch settings), so a lane never mixes two."""
    add_runs(
        record(model_id="same:8b", launch_settings={"backend": "cuda"}, overall=70),
        record(model_id="same:8b", launch_settings={"backend": "vulkan"}, overall=60),
        record(model_id="plain:8b", overall=50),
    )
    html = client.get("/leaderboard/").content.decode()
    assert '<span class="tag backend">CUDA</span>' in html
    assert '<span class="tag backend">Vulkan</span>' in html
    assert '<option value="vulkan">Vulkan</option>' in html
    vulkan = client.get("/leaderboard/?backend=vulkan").content.decode()
    assert re.findall(r'<a class="model-id" href="[^"]*">([^<]+)</a>', vulkan) == ["same:8b"]
    assert '<span class="tag backend">CUDA</span>' not in vulkan and "backend Vulkan" in vulkan
    api = client.get("/api/v1/leaderboard?backend=cuda").json()["results"]
    assert [r["stack"]["launch_settings"]["backend"] for r in api] == ["cuda"]
    csv_text = client.get("/leaderboard/export.csv").content.decode()
    header = csv_text.splitlines()[0].split(",")
    assert header.index("backend") == header.index("engine") + 1 and ",vulkan," in csv_text
    # A value outside the list is no filter at all.
    assert client.get("/leaderboard/?backend=<script>").status_code == 200
