"""Where a run stands (issue 29): among its stack's runs on its class, and against the class's
other stacks of similar size; never across classes, methods or scales, never a percentile of one.
The service (runs.standing) on real rows, GET /api/v1/runs/<id>/standing and the run page."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from leaderboard.tests.lane_factories import class_record, on_class
from runs.models import Run
from runs.standing import standing_of
from submissions.models import Status, Submission

pytestmark = pytest.mark.django_db
LANE = "rtx-4090"


def _nine() -> list[Run]:
    """Nine runs of one stack on the RTX 4090 class, overall 50 to 58."""
    return on_class(LANE, *(class_record(LANE, overall=50.0 + i) for i in range(9)))


def _sentences(run: Run) -> str:
    return " ".join(standing_of(Run.objects.get(pk=run.pk)).sentences)


def test_a_run_is_placed_among_its_stacks_runs_on_its_class() -> None:
    runs = _nine()
    fourth = next(r for r in runs if r.overall_score == 53.0)  # the 4th lowest of nine
    standing = standing_of(Run.objects.get(pk=fourth.pk))
    assert standing.lane is not None
    place = standing.lane.place
    assert (place.n, place.below, place.level, place.percentile) == (9, 3, 0, 40)
    # The other eight: 50, 51, 52, 54 … 58, whose median is 54.5.
    assert standing.lane.others_median == 54.5
    assert standing.sentences[0] == (
        "This run is p40 of 9 runs of this stack on RTX 4090 24 GB by overall score (53.0, "
        "against a median of 54.5 for the other 8)."
    )
    best = next(r for r in runs if r.overall_score == 58.0)
    assert "p90 of 9 runs" in _sentences(best)  # never p100 out of nine


def test_other_classes_methods_scales_and_hidden_runs_are_left_out() -> None:
    runs = _nine()
    fourth = next(r for r in runs if r.overall_score == 53.0)
    # The same stack far below on another class; a different method of the same model on this
    # class (another stack); the speed-only scale; runs not comparable or not published.
    on_class("h100", *(class_record("h100", overall=10.0) for _ in range(3)))
    on_class(LANE, *(class_record(LANE, overall=10.0, method="llama-bench") for _ in range(3)))
    on_class(LANE, *(class_record(LANE, score_scale="speed", decode=5.0) for _ in range(2)))
    on_class(LANE, class_record(LANE, overall=10.0, comparable=False))
    on_class(LANE, class_record(LANE, overall=10.0), status=Status.PENDING)
    standing = standing_of(Run.objects.get(pk=fourth.pk))
    assert standing.lane.place.n == 9 and standing.lane.place.percentile == 40
    # The same model is its own size: the llama-bench stack is not a peer (another method).
    assert standing.similar is not None and standing.similar.place is None
    assert standing.similar.only is None
    assert "No other stack of similar size has runs on RTX 4090 24 GB" in standing.sentences[1]


def test_a_run_with_no_peers_says_so_and_has_no_percentile() -> None:
    (alone,) = on_class(LANE, class_record(LANE, overall=61.0))
    standing = standing_of(Run.objects.get(pk=alone.pk))
    assert standing.lane.place.n == 1 and standing.lane.place.percentile is None
    text = " ".join(standing.sentences)
    assert "No other run of this stack on RTX 4090 24 GB" in text
    assert "No other stack of similar size" in text
    assert not re.search(r"\bp\d", text)
    # One other run: compared plainly, still no percentile.
    on_class(LANE, class_record(LANE, overall=58.0))
    text = _sentences(alone)
    assert (
        "The one other run of this stack on RTX 4090 24 GB has an overall score of 58.0; this "
        "run's 61.0 is higher. Two runs are too few for a percentile." in text
    )
    assert not re.search(r"\bp\d", text)


def test_stacks_of_similar_size_on_the_same_class_are_set_against_it() -> None:
    (run,) = on_class(LANE, class_record(LANE, overall=60.0))
    # qwen3:8b at other quantizations and llama3.1:8b are 8B: similar. 70B and 1.7B are not; an
    # 8B stack on the H100 class is another machine.
    for quant, overall in (("Q8_0", 55.0), ("Q5_K_M", 58.0), ("Q6_K", 62.0)):
        on_class(LANE, *(class_record(LANE, quantization=quant, overall=overall) for _ in "ab"))
    on_class(LANE, class_record(LANE, model_id="llama3.1:8b", overall=40.0))
    on_class(LANE, class_record(LANE, model_id="llama3.1:70b", overall=90.0))
    on_class(LANE, class_record(LANE, model_id="qwen3:1.7b", overall=20.0))
    on_class("h100", class_record("h100", quantization="Q8_0", overall=99.0))
    standing = standing_of(Run.objects.get(pk=run.pk))
    similar = standing.similar
    assert similar is not None and similar.active_b == 8.0
    place = similar.place
    # Medians 55, 58, 62 and 40: above three of four; the 4th of five is p67.
    assert (place.others, place.below, place.percentile) == (4, 3, 67)
    assert standing.sentences[1] == (
        "Against 4 other stacks of similar size on RTX 4090 24 GB, this run's 60.0 would be "
        "p67: above the median overall score of 3 of them."
    )
    assert standing.sentences[2].startswith(
        "Similar size: 5.33B to 12B active parameters, within 1.5× of this model's 8B. Compared "
        "only with runs on the v3 scale, benchmark version not recorded, measured by BenchLoop "
        "stream, as this one."
    )
    # A run above every one of them (the five above) says so, not "above 5 of them": 6th of 6.
    (top,) = on_class(LANE, class_record(LANE, quantization="Q3_K_M", overall=70.0))
    assert (
        "Against 5 other stacks of similar size on RTX 4090 24 GB, this run's 70.0 would be p86: "
        "above the median overall score of every one." in _sentences(top)
    )


def test_a_mixture_of_experts_is_sized_by_its_active_parameters() -> None:
    (run,) = on_class(LANE, class_record(LANE, model_id="qwen3:4b", overall=50.0))
    # qwen3:30b is the 30B-A3B MoE: 3.3B active, similar to a 4B dense model.
    on_class(LANE, class_record(LANE, model_id="qwen3:30b", overall=70.0))
    text = _sentences(run)
    assert "The one other stack of similar size on RTX 4090 24 GB, qwen3:30b" in text
    assert "this run's 50.0 is lower" in text


def test_speed_only_runs_are_placed_by_decode_and_not_comparable_v3_runs_not_at_all() -> None:
    fast = on_class(
        LANE, *(class_record(LANE, score_scale="speed", decode=d) for d in (40, 50, 60))
    )
    assert (
        "This run is p75 of 3 runs of this stack on RTX 4090 24 GB by decode speed (60.0 tok/s"
        in _sentences(fast[2])
    )
    (odd,) = on_class(LANE, class_record(LANE, overall=70.0, comparable=False))
    standing = standing_of(Run.objects.get(pk=odd.pk))
    assert standing.lane is None and standing.similar is None
    assert "not comparable" in standing.sentences[0]


# --- the API --------------------------------------------------------------------------------


def test_the_api_answers_everyone_for_a_published_run(client: Client) -> None:
    runs = _nine()
    fourth = next(r for r in runs if r.overall_score == 53.0)
    body = client.get(f"/api/v1/runs/{fourth.id}/standing").json()
    assert body["published"] is True and body["figure"] == "overall" and body["value"] == 53.0
    assert body["lane"]["percentile"] == 40 and body["lane"]["n"] == 9
    assert body["hardware_class"]["label"] == "RTX 4090 24 GB"
    assert body["sentences"][0].startswith("This run is p40 of 9 runs of this stack")
    assert body["url"].endswith(f"/runs/{fourth.id}/") and body["note"] == ""
    assert client.get("/api/v1/runs/999999/standing").status_code == 404


def test_an_unpublished_run_answers_its_owner_only(
    client: Client, alice, alice_key, mallory_key
) -> None:
    _nine()
    (pending,) = on_class(LANE, class_record(LANE, overall=53.5), status=Status.PENDING)
    Submission.objects.filter(run=pending).update(submitter=alice)
    url = f"/api/v1/runs/{pending.id}/standing"
    assert client.get(url).status_code == 404
    theirs = client.get(url, headers={"Authorization": f"Bearer {mallory_key}"})
    assert theirs.status_code == 404 and "p40" not in theirs.content.decode()
    mine = client.get(url, headers={"Authorization": f"Bearer {alice_key}"})
    assert mine.status_code == 200
    body = mine.json()
    # Among the nine published runs: 4 below it of ten, the 5th, p45, and said as "would be".
    assert body["published"] is False and body["lane"]["percentile"] == 45
    assert "would be p45 of 10 runs of this stack" in body["sentences"][0]
    assert body["note"].startswith("This run waits for review")


# --- the run page ---------------------------------------------------------------------------


def _block(html: str, start: str) -> str:
    return html.split(start)[1].split("</section>")[0]


def test_the_run_page_says_where_the_run_stands(client: Client, alice) -> None:
    runs = _nine()
    fourth = next(r for r in runs if r.overall_score == 53.0)
    html = client.get(f"/runs/{fourth.id}/").content.decode()
    block = _block(html, 'id="standing-title"')
    assert "Where this run stands" in block
    assert "This run is p40 of 9 runs of this stack on RTX 4090 24 GB by overall score" in block
    assert "within 1.5× of this model" in block
    # A pending run: its owner sees where it would stand; anyone else gets no page at all.
    (pending,) = on_class(LANE, class_record(LANE, overall=53.5), status=Status.PENDING)
    Submission.objects.filter(run=pending).update(submitter=alice)
    assert client.get(f"/runs/{pending.id}/").status_code == 404
    client.force_login(alice)
    block = _block(client.get(f"/runs/{pending.id}/").content.decode(), 'id="standing-title"')
    assert "would be p45 of 10 runs" in block and "waits for review" in block


def test_an_unlisted_run_shows_its_standing_to_its_owner_only(client: Client, alice) -> None:
    _nine()
    (unlisted,) = on_class(LANE, class_record(LANE, overall=53.5))
    Submission.objects.filter(run=unlisted).update(submitter=alice)
    Run.objects.filter(pk=unlisted.pk).update(published=False, visibility="unlisted")
    html = client.get(f"/runs/{unlisted.id}/").content.decode()  # opens by its link
    assert 'id="standing-title"' not in html
    client.force_login(alice)
    html = client.get(f"/runs/{unlisted.id}/").content.decode()
    assert "would be p45 of 10 runs" in _block(html, 'id="standing-title"')


def test_in_context_writes_a_median_only_where_there_is_one(client: Client) -> None:
    """Issue 32: never "a median of — tok/s", and a not-comparable run is never called one of
    this stack's comparable runs."""
    (alone,) = on_class(LANE, class_record(LANE, overall=60.0, decode=52.0))
    context = _block(client.get(f"/runs/{alone.id}/").content.decode(), 'id="context-title"')
    assert "This is the only comparable run of this stack on" in context
    assert "52.0" in context and "median" not in context and "—" not in context
    # A speed-only run the benchmark marked not comparable still counts on its scale.
    (speed,) = on_class(
        LANE,
        class_record(
            LANE,
            score_scale="speed",
            decode=30.0,
            comparable=False,
            noncomparable_reasons=["sweep only"],
        ),
    )
    html = client.get(f"/runs/{speed.id}/").content.decode()
    context = _block(html, 'id="context-title"')
    assert "comparable" not in context and "n too small" not in context and "—" not in context
    assert "This is the only run of this stack on" in context
    notice = html.split('id="noncomparable"')[1].split("</div>")[0]
    assert "Not ranked with other runs" not in notice and "still counted" in notice
    # Three runs: a median with its interval, from the lane's runs.
    on_class(LANE, *(class_record(LANE, overall=60.0, decode=d) for d in (50.0, 54.0)))
    context = _block(client.get(f"/runs/{alone.id}/").content.decode(), 'id="context-title"')
    assert "this stack’s 3 comparable runs decode at a median of" in context
    assert "52.0" in context and "—" not in context and "n too small" not in context
