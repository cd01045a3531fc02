"""Compare: stacks on one hardware class (asked for, or the one they share most runs on), the
classes side by side, noise-aware deltas on like-for-like runs only, and distinct labels."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils.html import escape

from leaderboard.tests.factories import HOSTILE
from leaderboard.tests.lane_factories import class_record, on_class

pytestmark = pytest.mark.django_db


def _runs(slug: str, model: str, decodes, **fields) -> int:
    runs = on_class(
        slug, *(class_record(slug, model_id=model, decode=d, **fields) for d in decodes)
    )
    return runs[0].stack_id


def _two_stacks(noise: float = 0.5) -> tuple[int, int]:
    """slow:8b and fast:8b, five runs each on the 4090, and fast:8b also on an H100."""
    slow = _runs("rtx-4090", "slow:8b", [40 + i * noise for i in range(5)], overall=60)
    fast = _runs("rtx-4090", "fast:8b", [60 + i * noise for i in range(5)], overall=66)
    _runs("h100", "fast:8b", [400, 410, 420], overall=80)
    _runs("h100", "slow:8b", [200], overall=70)
    return slow, fast


def _row(html: str, label: str) -> str:
    match = re.search(rf"<tr><th scope=\"row\">{re.escape(label)}</th>.*?</tr>", html, re.S)
    assert match, label
    return match.group(0)


def test_it_compares_on_the_class_the_stacks_share_most_runs_on(client: Client) -> None:
    a, b = _two_stacks()
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "On RTX 4090 24 GB" in html
    # Medians on the 4090 only (41.0 vs 61.0): the H100 runs are not pooled in.
    decode = _row(html, "Decode tok/s")
    assert "41.0" in decode and "61.0" in decode and "+20.0 (+49%)" in decode
    assert "95% CI 40.0–42.0" in decode
    assert "+6.0" in _row(html, "Overall score")
    assert "exceeds the noise" in html and "Welch’s t-test" in html
    assert "every comparable run on this hardware (5 vs 5 runs)" in html
    # The old warning that handed the problem to the reader is gone.
    assert "different machines" not in html and "Narrow the leaderboard" not in html
    assert 'property="og:image" content="http://testserver/compare/share.png?stacks=' in html


def test_hw_picks_the_class_and_the_classes_are_shown_side_by_side(client: Client) -> None:
    a, b = _two_stacks()
    html = client.get(f"/compare/?stacks={a},{b}&hw=h100").content.decode()
    assert "On H100 80 GB" in html
    decode = _row(html, "Decode tok/s")
    # One run of slow:8b: its median with "1 run", no interval; three of fast, with one.
    assert "1 run" in decode and "95% CI 400.0–420.0" in decode and "n too small" not in decode
    # One run of slow:8b there: the test falls back to the two best runs' trials, on the H100.
    assert "repeated samples of each stack’s best run on this hardware" in html
    table = html.split("Every hardware class, side by side")[1].split("</table>")[0]
    assert "RTX 4090 24 GB" in table and "H100 80 GB" in table
    assert "n=5" in table and "n=3" in table and "n=1" in table
    # Links to every class both stacks share; the current one is marked.
    assert re.search(r'href="[^"]*hw=h100" aria-current="true"', html)
    assert re.search(r'href="[^"]*hw=rtx-4090"', html)


def test_a_class_neither_stack_ran_on_compares_nothing(client: Client) -> None:
    a, b = _two_stacks()
    html = client.get(f"/compare/?stacks={a},{b}&hw=m3-max-64").content.decode()
    assert "no runs in common on the hardware asked for" in html
    assert "Is the speed difference real?" not in html


def test_with_no_class_in_common_no_speed_is_compared(client: Client) -> None:
    a = _runs("rtx-4090", "a:8b", [40, 41, 42])
    b = _runs("m3-max-64", "b:8b", [30, 31, 32])
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "No hardware class in common" in html and "Is the speed difference real?" not in html
    assert "Every metric on" not in html
    table = html.split("Every hardware class, side by side")[1].split("</table>")[0]
    assert "41.0" in table and "31.0" in table and table.count("no runs") == 2


def test_a_difference_inside_the_noise_is_called_that(client: Client) -> None:
    a = _runs("rtx-4090", "a:8b", (40, 60, 45, 55))
    b = _runs("rtx-4090", "b:8b", (42, 58, 47, 56))
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "within the noise" in html


def test_the_test_uses_like_for_like_runs_only(client: Client) -> None:
    """Runs of another benchmark version or not comparable never enter the deltas."""
    a = _runs("rtx-4090", "a:8b", (40, 41, 42, 43))
    b = _runs("rtx-4090", "b:8b", (60, 61, 62, 63))
    _runs("rtx-4090", "b:8b", (5, 5, 5, 5), comparable=False)
    _runs("rtx-4090", "b:8b", (1000, 1000, 1000), benchmark_version="9.9")
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "(4 vs 4 runs)" in html and "+20.0" in _row(html, "Decode tok/s")


def test_two_stacks_that_share_a_label_are_told_apart(client: Client) -> None:
    same = {"quantization": "Q8_0", "engine": "ollama"}
    a = _runs("rtx-4090", "qwen3:32b", (40, 41, 42), **same, harness="raw")
    b = _runs("rtx-4090", "qwen3:32b", (50, 51, 52), **same, harness="mini-swe")
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    labels = re.findall(r'class="model-id stack-label"[^>]*>([^<]+)<', html)
    assert len(labels) == 2 and len(set(labels)) == 2
    assert "qwen3:32b Q8_0 · ollama · mini-swe harness" in labels
    # Every table names the stacks by the same distinct labels.
    heads = re.findall(r'<th scope="col" class="num stack-label">([^<]+)<', html)
    assert len(heads) >= 4 and set(heads) == set(labels)


def test_ticked_rows_are_redirected_to_one_clean_link(client: Client) -> None:
    a, b = _two_stacks()
    response = client.get(f"/compare/?stacks={a}&stacks={b}&vendor=nvidia&gpu=&hw=h100")
    assert response.status_code == 302
    # A chosen class already names the vendor: the clean link keeps the class alone.
    assert response.url == f"/compare/?stacks={a},{b}&hw=h100"


def test_with_one_stack_it_offers_a_picker(client: Client) -> None:
    a, b = _two_stacks()
    html = client.get(f"/compare/?stacks={a}&find=fast").content.decode()
    assert "Add a stack" in html
    assert f'href="/compare/?stacks={a},{b}"' in html
    assert "slow:8b" in html


def test_the_query_count_does_not_grow_with_runs(client: Client, django_assert_num_queries) -> None:
    a, b = _two_stacks()
    path = f"/compare/?stacks={a},{b}"
    # stacks, picker, runs, attempts, suites, and each side's place on the class's board (a
    # read of the class's stored board each)
    with django_assert_num_queries(7):
        client.get(path)
    _runs("rtx-4090", "slow:8b", range(100, 160))
    _runs("h100", "fast:8b", range(500, 560))
    with django_assert_num_queries(7):
        client.get(path)
    with django_assert_num_queries(6):  # plus the hardware the filter allows
        client.get(path + "&vendor=nvidia")


def test_hostile_names_are_escaped(client: Client) -> None:
    a = _runs("rtx-4090", HOSTILE, [40], submitter=HOSTILE)
    b = _runs("rtx-4090", "plain:8b", [41])
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "<script>alert(1)</script>" not in html and '"onmouseover=' not in html
    assert escape(HOSTILE) in html
