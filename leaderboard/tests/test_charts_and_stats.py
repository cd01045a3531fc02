"""Chart geometry, the noise test and the public-data scrubbing (no database)."""

from __future__ import annotations

import math

import pytest

from leaderboard import charts, stats
from runs import public
from worker.rules.stats import two_sided_p


def test_welch_matches_known_values() -> None:
    # t = 2 with 10 degrees of freedom: two-sided p = 0.0734 (tables).
    assert two_sided_p(2.0, 10) == pytest.approx(0.07339, abs=1e-4)
    test = stats.welch(100, 5, 10, 110, 5, 10, basis="runs")
    assert test.t == pytest.approx(4.472, abs=1e-3) and test.df == pytest.approx(18)
    assert test.significant and test.change_percent == pytest.approx(10.0)
    assert stats.welch(1, 1, 1, 2, 1, 5, basis="runs") is None
    same = stats.welch(5, 0, 3, 5, 0, 3, basis="samples")
    assert same.p_value == 1.0 and not same.significant


def test_the_pareto_front_keeps_only_unbeaten_points() -> None:
    points = [(50, 10), (30, 100), (70, 50), (20, 5), (70, 20)]
    assert stats.pareto_front(points) == {1, 2}


def test_box_summary() -> None:
    box = stats.box([4, 1, 3, 2, None, math.inf])
    assert (box.n, box.low, box.median, box.high) == (4, 1, 2.5, 4)
    assert box.q1 == pytest.approx(1.75) and box.q3 == pytest.approx(3.25)
    assert stats.box([]) is None


def test_scatter_axes_and_front_path() -> None:
    chart = charts.scatter(
        [
            {"x": 10, "y": 50, "label": "a", "href": "/a"},
            {"x": 100, "y": 30, "label": "b", "href": "/b"},
            {"x": 50, "y": 70, "label": "c", "href": "/c"},
            {"x": 5, "y": 20, "label": "d", "href": "/d"},
        ]
    )
    assert [t.label for t in chart.x_ticks] == ["5", "10", "20", "50", "100"]
    assert [p.label for p in chart.front] == ["b", "c"]
    assert chart.front_path.startswith("M") and "H" in chart.front_path
    assert charts.scatter([]) is None


def _clash(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return not (a[2] <= b[0] or a[0] >= b[2] or a[3] <= b[1] or a[1] >= b[3])


def test_the_front_s_names_are_drawn_only_where_they_clear_each_other() -> None:
    """A front of 30 stacks in a narrow band (a large board's) names the ends and whichever
    others clear them, never two over each other; a sparse front names every stack."""
    crowded = charts.scatter(
        [
            {
                "x": 20 + 12 * i,
                "y": 70 - 0.3 * i,
                "label": f"qwen3-coder:30b-a3b Q4_K_M {i}: x",
                "href": "/",
            }
            for i in range(30)
        ]
    )
    assert len(crowded.front) == 30
    for size, font in charts.NAME_FONTS.items():
        shown = [p for p in crowded.front if size in p.name_shown.split()]
        assert 1 <= len(shown) < 30 and crowded.front[0] in shown  # the fastest
        boxes = [charts._name_box(p, font) for p in shown]
        assert not any(_clash(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    # On wide screens the best stack's name too; on phones, in twice the type, it clashes.
    assert crowded.front[-1].name_shown == "wide"
    sparse = charts.scatter(
        [
            {"x": 10, "y": 90, "label": "a: x", "href": "/a"},
            {"x": 300, "y": 20, "label": "b: x", "href": "/b"},
            {"x": 50, "y": 10, "label": "c: x", "href": "/c"},
        ]
    )
    assert [p.name_shown for p in sparse.front] == ["wide narrow", "wide narrow"]
    assert [p.name_shown for p in sparse.points if not p.on_front] == [""]


def test_strip_and_trend_need_data() -> None:
    strip = charts.strip(
        [("A", [{"value": v, "label": str(v)} for v in (10, 12, 13, 20)])], unit="x"
    )
    assert strip.rows[0].box.median == 12.5 and strip.rows[0].box_px
    assert charts.strip([("A", [])], unit="x") is None
    assert charts.trend([("only", [1, 2])], unit="x") is None


@pytest.mark.parametrize(
    ("command", "leaked"),
    [
        ("llama-server --host 0.0.0.0 --port 8080", "0.0.0.0"),
        ("benchloop run --url http://192.168.1.20:11434", "192.168.1.20"),
        ("benchloop run --url=https://box.lan:8000/v1", "box.lan"),
        ("OPENAI_API_KEY=sk-abc benchloop run", "sk-abc"),
        ("vllm serve m --api-key 'sk live'", "sk live"),
        ("curl [fe80::1ff:fe23:4567:890a]:8080", "fe80::1ff"),
    ],
)
def test_commands_lose_addresses_and_secrets(command: str, leaked: str) -> None:
    cleaned = public.redact_command(command)
    assert leaked not in cleaned and public.REDACTED in cleaned


def test_ordinary_options_survive() -> None:
    command = "llama-server -m model.gguf -ngl 99 --ctx-size 8192 --host 127.0.0.1"
    assert public.redact_command(command).startswith("llama-server -m model.gguf -ngl 99 --ctx")


def test_settings_and_notes_are_allowlisted() -> None:
    assert public.public_settings({"n_gpu_layers": 99, "host": "10.0.0.1", "api_key": "x"}) == [
        ("n_gpu_layers", "99")
    ]
    notes = public.verifier_notes(
        {"evaluation_status": "fail", "checks": {"a": True}, "answer_line": "x", "turns": []}
    )
    assert notes == [("evaluation status", "fail"), ("checks", "a: yes")]
