"""The stack page: one lane per hardware class with CI95, quality pooled and said so, charts
that never mix classes, profiles or non-comparable runs, the leaderboard's filters, the
reproduction recipe and every run."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils.html import escape

from leaderboard.tests.factories import HOSTILE, add_runs, record
from leaderboard.tests.lane_factories import class_record, hw_class, on_class, refresh_lanes
from runs.models import Run, Stack
from submissions.models import Status, Submission

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
SETTINGS = {"model_file": "qwen3-8b-Q4_K_M.gguf", "threads": 48}


def _run(slug: str, *, profile: str = "core", **fields):
    """A run of the one stack these tests are about (same weights digest and settings)."""
    made = class_record(slug, model_sha256=SHA, launch_settings=SETTINGS, **fields)
    made.profile = profile
    return made


def _lane(html: str, label: str) -> str:
    """The lane table's row for one hardware class."""
    match = re.search(
        rf'<tr class="lane-row"[^>]*>\s*<th scope="row"><a [^>]*>{re.escape(label)}</a>.*?</tr>',
        html,
        re.S,
    )
    assert match, label
    return match.group(0)


def _stack() -> Stack:
    on_class(
        "rtx-4090",
        *(
            _run("rtx-4090", decode=d, submitter=s, engine_version=v, days_ago=a)
            for d, s, v, a in (
                (52, "ada", "b6000", 9),
                (61, "grace", "b6500", 2),
                (63, "grace", "b6500", 1),
                (55, "ada", "b6000", 8),
            )
        ),
    )
    on_class("h100", *(_run("h100", decode=d) for d in (301, 305, 310)))
    runs = on_class(
        "cpu-epyc",
        _run(
            "cpu-epyc",
            decode=25,
            command_used="llama-server -m /home/ada/models/q.gguf --host 10.0.0.7 --port 8080 "
            "--api-key sk-SECRET123 -c 8192 HF_TOKEN=hf_abcdef https://gpu.example.com:9000/v1",
        ),
    )
    return Stack.objects.get(id=runs[0].stack_id)


def test_one_lane_per_hardware_class_with_medians_and_ci95(client: Client) -> None:
    stack = _stack()
    html = client.get(f"/stacks/{stack.id}/").content.decode()
    rtx = _lane(html, "RTX 4090 24 GB")
    # Median of 52, 55, 61, 63 = 58.0; with four runs the 95% interval is min to max.
    assert "58.0" in rtx and "95% CI 52.0–63.0" in rtx and ">4<" in rtx
    h100 = _lane(html, "H100 80 GB")
    assert "305.0" in h100 and "95% CI 301.0–310.0" in h100
    # One run: its own figure as the median, marked "1 run", with no interval made up.
    cpu = _lane(html, "CPU only: AMD EPYC 9454")
    assert "25.0" in cpu and "1 run" in cpu and "95% CI" not in cpu
    assert "n too small" not in html
    # Nothing on the page pools the classes: not the old headline, not the mean of all runs.
    assert "Decode tok/s, median of runs" not in html and "146.5" not in html
    assert "Quality, all hardware pooled:" in html


def test_attempts_count_flagged_rejected_and_withdrawn_uploads(client: Client) -> None:
    stack = _stack()
    for status in (Status.FLAGGED, Status.REJECTED, Status.WITHDRAWN):
        on_class("h100", _run("h100", decode=999), status=status)
    html = client.get(f"/stacks/{stack.id}/").content.decode()
    h100 = _lane(html, "H100 80 GB")
    assert "best of 6 attempts" in h100  # 3 published + 3 that are not
    assert ">3<" in h100 and "999" not in h100  # only the published ones are measured
    assert "best of 4 attempts" in _lane(html, "RTX 4090 24 GB")


def test_the_charts_never_mix_classes_profiles_or_non_comparable_runs(client: Client) -> None:
    stack = _stack()
    on_class("h100", _run("h100", decode=700, comparable=False))
    on_class("h100", _run("h100", decode=800, profile="full"))
    html = client.get(f"/stacks/{stack.id}/").content.decode()
    strip = html.split('id="decode-strip-desc"')[1].split("</desc>")[0]
    # One lane per class, each with its own median; no "all runs" lane.
    assert "RTX 4090 24 GB: median 58.0, 4 runs." in strip
    assert "H100 80 GB: median 305.0, 3 runs." in strip
    assert "All runs" not in html
    dots = html.split('class="chart-svg strip"')[1].split("</svg>")[0]
    assert "700.0 ·" not in dots and "800.0 ·" not in dots  # not comparable, other profile
    assert "profile core, comparable runs only" in html
    scores = html.split('id="score-strip-desc"')[1].split("</desc>")[0]
    assert "Quality · all hardware: median" in scores and "Overall · H100 80 GB" in scores
    # The profile filter draws the other profile instead, alone.
    full = client.get(f"/stacks/{stack.id}/?profile=full").content.decode()
    assert "800.0 ·" in full and "305.0" not in full


def test_the_trend_across_engine_versions_is_drawn_per_class(client: Client) -> None:
    stack = _stack()
    html = client.get(f"/stacks/{stack.id}/").content.decode()
    desc = html.split('id="decode-trend-desc"')[1].split("</desc>")[0]
    # b6000: 52, 55 on the 4090 (median 53.5); b6500: 61, 63 (62.0). The H100's runs are on
    # b6512 and stay on their own line: never averaged with the 4090's.
    assert "RTX 4090 24 GB: b6000 53.5 over 2 runs; b6500 62.0 over 2 runs" in desc
    assert "H100 80 GB: b6512 305.0 over 3 runs" in desc
    assert 'class="legend"' in html


def test_it_accepts_the_leaderboards_filters(client: Client) -> None:
    stack = _stack()
    html = client.get(f"/stacks/{stack.id}/?hw=h100").content.decode()
    assert "H100 80 GB" in html and 'data-class="rtx-4090"' not in html
    assert "<strong>3</strong> approved runs" in html
    assert "Only runs matching <strong>H100 80 GB" in html
    # A date filter: only the two newest 4090 runs (and the others, a day old) are counted.
    recent = client.get(f"/stacks/{stack.id}/?days=7&hw=rtx-4090").content.decode()
    assert "2 runs" in _lane(recent, "RTX 4090 24 GB")
    # The leaderboard's machine filters work here too: NVIDIA keeps two classes, apart.
    nvidia = client.get(f"/stacks/{stack.id}/?vendor=nvidia").content.decode()
    assert 'data-class="h100"' in nvidia and 'data-class="cpu-epyc"' not in nvidia
    # The form's empty fields are dropped in one redirect.
    response = client.get(f"/stacks/{stack.id}/?hw=h100&profile=&days=")
    assert response.status_code == 302 and response.url == f"/stacks/{stack.id}/?hw=h100"


def test_the_recipe_names_the_file_digest_build_and_redacted_command(client: Client) -> None:
    stack = _stack()
    html = client.get(f"/stacks/{stack.id}/?hw=cpu-epyc").content.decode()
    recipe = html.split('id="recipe"')[1].split("</section>")[0]
    assert f"sha256:{SHA}" in recipe  # the whole digest, not a prefix
    assert "qwen3-8b-Q4_K_M.gguf" in recipe and "llama.cpp b6512" in recipe
    assert "-c 8192" in recipe and "threads" in recipe
    for secret in ("10.0.0.7", "sk-SECRET123", "hf_abcdef", "gpu.example.com", "/home/ada"):
        assert secret not in html
    assert "RAWPAYLOADMARKER" not in html


def test_an_htmx_request_gets_only_the_runs_table_filtered(client: Client) -> None:
    stack = _stack()
    html = client.get(f"/stacks/{stack.id}/?sort=decode", headers=HTMX).content.decode()
    assert "<html" not in html and html.lstrip().startswith('<section id="results"')
    assert html.index(">310.0") < html.index(">63.0") < html.index(">52.0")
    only = client.get(f"/stacks/{stack.id}/?hw=h100", headers=HTMX).content.decode()
    assert "<strong>3</strong> approved runs" in only and ">63.0" not in only


def test_the_query_count_does_not_grow_with_runs(client: Client, django_assert_num_queries) -> None:
    # stack, run count and page, run values, attempts, classes, suites, whether the model has
    # harness matrix runs, the recipe's run, the counted runs' sweeps
    stack = _stack()
    # and the lanes' places on their classes' boards (one read of the class boards)
    with django_assert_num_queries(11):
        client.get(f"/stacks/{stack.id}/")
    for slug in ("rtx-4090", "h100", "m3-max-64"):
        on_class(slug, *(_run(slug, decode=40 + i) for i in range(30)))
    with django_assert_num_queries(11):
        client.get(f"/stacks/{stack.id}/?page=2")
    with django_assert_num_queries(3):
        client.get(f"/stacks/{stack.id}/", headers=HTMX)


def test_unpublished_runs_and_stacks_stay_private(client: Client) -> None:
    (run,) = add_runs(record(model_id="hidden:8b"))
    Submission.objects.filter(run=run).update(status=Status.PENDING)
    Run.objects.filter(pk=run.pk).update(published=False)
    refresh_lanes([run.stack_id])
    assert client.get(f"/stacks/{run.stack_id}/").status_code == 404
    assert client.get(f"/stacks/{run.stack_id}/share.png").status_code == 404


def test_hostile_submitter_and_class_names_are_escaped_in_the_charts(client: Client) -> None:
    hostile = hw_class("rtx-4090")
    hostile.label = f"NVIDIA {HOSTILE}"
    hostile.save()
    (run,) = on_class("rtx-4090", class_record("rtx-4090", submitter=HOSTILE))
    on_class("rtx-4090", class_record("rtx-4090", submitter="ada"))
    html = client.get(f"/stacks/{run.stack_id}/").content.decode()
    assert "<script>alert(1)</script>" not in html and '"onmouseover=' not in html
    strip = html.split('class="chart-svg strip"')[1].split("</svg>")[0]
    assert escape(HOSTILE)[:20] in strip
