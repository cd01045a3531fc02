"""Estimated, not measured (issue 29): a class's board lists stacks measured elsewhere, apart from
its ranked rows and never ranked, each with its arithmetic one click away.

Runs are imported through the real service and put on real accelerator classes (an RTX 4090,
an H100), so the ceilings come from the real accelerator data file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from django.urls import reverse

from leaderboard import cache as board_cache
from leaderboard import estimated
from leaderboard.tests.factories import HOSTILE
from leaderboard.tests.lane_factories import class_record, on_class
from runs.models import HardwareClass, Stack

pytestmark = pytest.mark.django_db

BOARD = "/leaderboard/?hw=rtx-4090"


@pytest.fixture
def world() -> dict[str, Stack]:
    """Ten 8B stacks and a 70B one measured on an H100; the first 8B stack and four others on
    the RTX 4090 too."""
    # One import per class (the lanes are built once per batch, not once per run).
    h100 = [class_record("h100", model_id=f"acme/m{i}-8b", decode=90.0 + 3 * i) for i in range(10)]
    h100.append(class_record("h100", model_id="acme/big-70b", quantization="Q8_0", decode=20))
    on_class("h100", *h100)
    rtx = [class_record("rtx-4090", model_id="acme/m0-8b", decode=60.0)]
    rtx += [class_record("rtx-4090", model_id=f"acme/r{i}-8b", decode=55.0 + i) for i in range(4)]
    on_class("rtx-4090", *rtx)
    return {stack.model_id: stack for stack in Stack.objects.all()}


def _section(html: str) -> str:
    start = html.index('id="estimated"')
    return html[start : html.index("</section>", start)]


def test_the_board_lists_stacks_measured_only_elsewhere(client, world):
    html = client.get(BOARD).content.decode()
    section = _section(html)
    assert "Estimated, not measured" in section
    shown = set(re.findall(r'class="estimate-name"><a [^>]*>([^<]+)</a>', section))
    # Measured on the H100 only, and small enough for 24 GB.
    assert shown == {f"acme/m{i}-8b" for i in range(1, 10)}
    # Each is labelled, with both speeds, its arithmetic and the command that measures it.
    assert section.count("estimated, not measured") == 9
    assert section.count("tok/s") >= 18
    pk = world["acme/m1-8b"].pk
    assert reverse("leaderboard:estimate", args=[pk, "rtx-4090"]) in section
    assert "benchloop run --url http://127.0.0.1:8080 --model acme/m1-8b --profile core" in section
    assert f"{reverse('leaderboard:methodology')}#estimates" in section


def test_estimates_come_after_the_ranked_rows_and_carry_no_rank(client, world):
    html = client.get(BOARD).content.decode()
    section = _section(html)
    table = html[: html.index('id="estimated"')]
    # The ranked table holds the measured stacks and none of the estimated ones.
    assert "acme/r0-8b" in table
    assert "acme/m1-8b" not in table
    # No rank cell (the board's is td.rank), numbered list or "#1" in the estimates.
    assert 'class="num rank"' in table
    assert re.search(r'class="[^"]*\brank\b', section) is None
    assert "<ol" not in section and "<table" not in section
    assert "#1" not in section
    # Each card starts with its name: nothing numbers it.
    assert len(re.findall(r'<li class="estimate-card">\s*<p class="estimate-name">', section)) == 9


def test_no_estimates_for_a_measured_stack_or_where_nothing_fits(client, world):
    section = _section(client.get(BOARD).content.decode())
    assert "acme/m0-8b" not in section  # measured on the RTX 4090
    assert "acme/big-70b" not in section  # 74 GB of weights, 24 GB of memory
    # The H100 board: the 70B fits in 80 GB, and the RTX 4090's own stacks are estimated.
    h100 = _section(client.get("/leaderboard/?hw=h100").content.decode())
    assert "acme/r0-8b" in h100 and "acme/m0-8b" not in h100
    # The all-hardware view ranks by quality across machines: no estimates there.
    assert 'id="estimated"' not in client.get("/leaderboard/?hw=all").content.decode()


def test_the_arithmetic_multiplies_out(client, world):
    pk = world["acme/m1-8b"].pk
    response = client.get(reverse("leaderboard:estimate", args=[pk, "rtx-4090"]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "estimated, not measured" in html
    assert f"{reverse('leaderboard:methodology')}#estimates" in html
    decode = response.context["metrics"][0]
    bandwidth, weights, ceiling = (row.value for row in decode.ceiling)
    assert bandwidth == pytest.approx(1008)  # the RTX 4090's datasheet GB/s
    assert weights == pytest.approx(8 * 4.85 / 8, rel=0.05)
    assert ceiling == pytest.approx(bandwidth / weights)
    found = decode.est
    shifts = math.prod(s.factor for s in decode.shifts)
    assert found.efficiency == pytest.approx(decode.hierarchy_efficiency * shifts)
    assert found.value == pytest.approx(ceiling * found.efficiency)
    assert found.low < found.value < found.high
    # What the page prints is what multiplies out, at its shown precision.
    for figure in (f"{bandwidth:,.0f} GB/s", f"{ceiling:,.0f} tok/s", f"{found.value:,.0f} tok/s"):
        assert figure in html
    assert f"n = {decode.group.n}" in html


def test_a_measured_lane_has_no_estimate_page(client, world):
    pk = world["acme/m0-8b"].pk
    response = client.get(reverse("leaderboard:estimate", args=[pk, "rtx-4090"]))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('leaderboard:stack', args=[pk])}?hw=rtx-4090"
    too_big = world["acme/big-70b"].pk
    assert (
        client.get(reverse("leaderboard:estimate", args=[too_big, "rtx-4090"])).status_code == 404
    )
    assert (
        client.get(reverse("leaderboard:estimate", args=[pk, "no-such-class"])).status_code == 404
    )


def test_hostile_stored_names_are_escaped(client, world):
    stack = world["acme/m1-8b"]
    Stack.objects.filter(pk=stack.pk).update(model_id=f"{HOSTILE}/m1-8b", engine=HOSTILE[:60])
    board_cache.bump()
    pages = [
        client.get(BOARD).content.decode(),
        client.get(reverse("leaderboard:estimate", args=[stack.pk, "rtx-4090"])).content.decode(),
    ]
    for html in pages:
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<script>alert(1)" not in html
        assert "onmouseover=alert(2) x=" not in html.replace("&quot;onmouseover", "")


def test_a_lab_job_is_offered_only_where_the_lab_has_measured(client, world):
    assert reverse("lab:new_job") not in _section(client.get(BOARD).content.decode())
    from leaderboard.tests.factories import add_runs
    from runs.models import HardwareClass, Run

    runs = add_runs(class_record("rtx-4090", model_id="acme/lab-8b", decode=50.0), verified=True)
    Run.objects.filter(pk=runs[0].pk).update(
        hardware_class=HardwareClass.objects.get(slug="rtx-4090")
    )
    board_cache.bump()
    assert reverse("lab:new_job") in _section(client.get(BOARD).content.decode())


def test_the_published_accuracy_is_what_bench_readme_and_methodology_say(client):
    """The board's and arithmetic pages' figures (estimated.ACCURACY) are the ones
    bench/estimate_accuracy.py printed into bench/README.md, and the methodology page's."""
    readme = (Path(__file__).resolve().parents[2] / "bench" / "README.md").read_text()
    section = readme[readme.index("## Estimate accuracy (issue 29)") :]
    section = section[: section.index("\n## ", 5)]
    rows = re.findall(r"^\| all \| (\d+) \| ([\d.]+)% \| ([\d.]+)% \|", section, re.M)
    assert len(rows) == 2
    methodology = client.get(reverse("leaderboard:methodology")).content.decode()
    methodology = methodology[methodology.index('id="estimates"') :]
    for metric, (lanes, error, held) in zip(("decode", "prefill"), rows, strict=True):
        assert estimated.ACCURACY[metric] == pytest.approx(
            (int(lanes), float(error) / 100, float(held) / 100)
        )
        assert f"{lanes} lanes" in methodology
        assert f"{error}%" in methodology and f"{held}%" in methodology


def test_the_api_gives_the_same_estimates_marked_as_not_measured(client, world):
    answer = client.get("/api/v1/estimates?hw=rtx-4090")
    assert answer.status_code == 200
    body = answer.json()
    assert body["measured"] is False and "estimated, not measured" in body["note"]
    assert {row["model_id"] for row in body["estimates"]} == {f"acme/m{i}-8b" for i in range(1, 10)}
    html = client.get(BOARD).content.decode()
    for row in body["estimates"]:
        assert "rank" not in row
        decode = row["decode_tps"]
        assert decode["low"] <= decode["value"] <= decode["high"]
        assert f"<strong>{decode['value']:,.0f}</strong> tok/s" in html
        assert row["arithmetic"] in html
    assert client.get("/api/v1/estimates?hw=no-such-class").status_code == 404
    assert client.get("/api/v1/estimates").status_code == 404


def test_the_calibration_outlives_a_page_version_and_a_lane_change_waits_for_the_worker(
    world, monkeypatch, private_queue
):
    """A cold board (the page cache's version moved) reads the stored calibration. New measured
    lanes do not make a page calibrate again (seconds on a large site): the pages go on with the
    one before, one task is queued on the real broker however many pages ask, and once the
    worker has run it the pages read the new one."""
    calls: list[int] = []
    real = estimated._calibrate

    def counted() -> dict:
        calls.append(1)
        return real()

    monkeypatch.setattr(estimated, "_calibrate", counted)
    first = estimated.calibrations()
    board_cache.bump()
    assert estimated.calibrations()["decode"].n == first["decode"].n
    assert (len(calls), private_queue()) == (1, 0)
    on_class("rtx-4090", class_record("rtx-4090", model_id="acme/late-8b", decode=57.0))
    for _ in range(3):
        assert estimated.calibrations()["decode"].n == first["decode"].n
    assert (len(calls), private_queue()) == (1, 1)
    # The worker's task: the lanes as they are now.
    from leaderboard.tasks import calibrate_estimates

    assert calibrate_estimates() == first["decode"].n + 1
    assert estimated.calibrations()["decode"].n == first["decode"].n + 1
    assert len(calls) == 2
    # Once it has started, the next change asks again.
    on_class("rtx-4090", class_record("rtx-4090", model_id="acme/later-8b", decode=58.0))
    assert estimated.calibrations()["decode"].n == first["decode"].n + 1
    assert private_queue() == 2


def test_a_class_s_estimates_are_kept_with_the_calibration_they_used(world, private_queue):
    """Estimates outlive a page version like the calibration they come from; those worked out
    meanwhile with the calibration before a lane change are kept by that one, so the new one
    has them worked out again as soon as it is in."""
    rtx = HardwareClass.objects.get(slug="rtx-4090")
    estimated.calibrate_now()
    kept = estimated.for_class(rtx)
    board_cache.bump()
    assert estimated.for_class(rtx) is kept
    # A narrowed view's are not kept (its free text would fill the cache).
    assert estimated.for_class(rtx, q="acme") is not estimated.for_class(rtx, q="acme")
    on_class("h100", class_record("h100", model_id="acme/new-8b", decode=99.0))
    meanwhile = estimated.for_class(rtx)  # the calibration before the change
    assert "acme/new-8b" in {row.stack.model_id for row in meanwhile}
    board_cache.bump()
    assert estimated.for_class(rtx) is meanwhile
    assert private_queue() == 1
    estimated.calibrate_now()  # the worker's task
    after = estimated.for_class(rtx)
    assert estimated.for_class(rtx) is after
    assert [row.stack.pk for row in after] == [row.stack.pk for row in meanwhile]
    assert [row.decode for row in after] != [row.decode for row in meanwhile]


def test_a_large_site_that_lost_its_calibration_asks_the_worker_and_says_so(
    client, world, monkeypatch, private_queue
):
    """With no calibration anywhere (a new site, a flushed or evicted cache) a page does not
    calibrate more lanes than estimated.INLINE_LANES itself (12 s at 1,000,000 runs, for every
    visitor at once): it says the estimates are being worked out, one task is queued however
    many pages ask, and once the worker has run the estimates show."""
    monkeypatch.setattr(estimated, "INLINE_LANES", 0)
    calls: list[int] = []
    real = estimated._calibrate
    monkeypatch.setattr(estimated, "_calibrate", lambda: calls.append(1) or real())
    rtx = world["acme/r0-8b"]
    for _ in range(2):
        board_cache.bump()
        section = _section(client.get(BOARD).content.decode())
        assert "being worked out again" in section
        assert "acme/m1-8b" not in section
        page = client.get(f"/stacks/{rtx.pk}/?hw=h100")
        assert "Its estimate here is being worked out again" in page.content.decode()
    response = client.get(
        reverse("leaderboard:estimate", args=[world["acme/m1-8b"].pk, "rtx-4090"])
    )
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "60"
    assert "being worked out again" in response.content.decode()
    api = client.get("/api/v1/estimates?hw=rtx-4090")
    assert (api.status_code, api.json()["error"]["code"]) == (503, "not_ready")
    assert (len(calls), private_queue()) == (0, 1)
    from leaderboard.tasks import calibrate_estimates

    calibrate_estimates()  # the worker
    board_cache.bump()
    section = _section(client.get(BOARD).content.decode())
    assert "acme/m1-8b" in section and "being worked out again" not in section
    assert len(calls) == 1


def test_a_process_keeps_its_own_newest_calibration_when_the_cache_loses_it(
    world, monkeypatch, private_queue
):
    """A running process that computed or read a calibration goes on with it after the cache
    lost every copy (a restart of the capped cache), asking the worker for the current one."""
    from django.core.cache import cache

    from core import pagecache

    monkeypatch.setattr(estimated, "INLINE_LANES", 0)
    first = estimated.calibrate_now() and estimated.calibrations()
    on_class("rtx-4090", class_record("rtx-4090", model_id="acme/late-8b", decode=57.0))
    latest = f"{pagecache._prefix()}:{estimated.CALIBRATION}:latest"
    cache.delete_many([cache.get(latest), latest])
    assert cache.get(latest) is None
    assert estimated.calibrations() is first
    assert private_queue() == 1
