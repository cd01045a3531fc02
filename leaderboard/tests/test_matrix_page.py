"""The harness matrix page, its CSV and JSON, and its links from the stack page and the board
(issue 19), on runs stored through the real intake."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client
from django.urls import reverse

from leaderboard import matrix
from leaderboard.stats import wilson
from leaderboard.tests.factories import HOSTILE, add_runs, record
from leaderboard.tests.matrix_bundles import MODEL, matrix_record, standard_matrix
from runs.models import HardwareClass, Run, Stack

pytestmark = pytest.mark.django_db


def _class() -> HardwareClass:
    return Run.objects.filter(stack__model_id=MODEL).first().hardware_class


def _url(hw: HardwareClass, model_id: str = MODEL, **query) -> str:
    path = reverse("leaderboard:matrix", kwargs={"hw": hw.slug, "model_id": model_id})
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return path


def _rows(html: str) -> list[str]:
    """The harness names of the table's rows, in order."""
    return re.findall(r'<span class="harness-name">([^<]*)</span>', html)


def test_wilson_interval_matches_the_textbook_values() -> None:
    # Wilson's score interval for 3 of 5 and for 0 of 10 (Newcombe 1998, table I style).
    three = wilson(3, 5)
    assert three is not None
    assert (round(three.low, 1), round(three.high, 1)) == (23.1, 88.2)
    none = wilson(0, 10)
    assert none is not None and none.low == 0.0 and round(none.high, 1) == 27.8
    assert wilson(0, 0) is None
    assert wilson(9, 5).passed == 5  # clamped, never above 100%


def test_rows_are_harnesses_raw_first_with_scores_intervals_and_overhead(client: Client) -> None:
    add_runs(*standard_matrix())
    hw = _class()
    response = client.get(_url(hw))
    assert response.status_code == 200
    html = response.content.decode()
    # raw first, then the prompt format, then the programs.
    assert _rows(html) == ["raw", "xml-tool-call", "aider", "hermes-agent", "mini-swe-agent"]
    assert "prompt format" in html and "agent program" in html and "baseline" in html
    # Columns: the three suites and the pooled column.
    for label in ("Bug fixes", "Tool use", "Long task", "All suites"):
        assert label in html
    found = matrix.build(MODEL, hw)
    assert found is not None
    aider = next(r for r in found.rows if r.harness == "aider")
    bugfix = aider.cells[0]
    assert bugfix.suite == "matrix_bugfix"
    assert (bugfix.score.passed, bugfix.score.n) == (4, 5)
    # Costs against raw on the same tasks: 2500 vs 1000 tokens, 3 vs 2 requests, 9 vs 4 s.
    assert bugfix.overhead.tokens_ratio == pytest.approx(2.5)
    assert bugfix.overhead.requests_ratio == pytest.approx(1.5)
    assert bugfix.overhead.wall_ratio == pytest.approx(2.25)
    assert bugfix.overhead.model_ms == pytest.approx(5400.0)
    assert bugfix.overhead.harness_ms == pytest.approx(3600.0)
    assert (bugfix.format_failures, bugfix.wrong, bugfix.sandbox) == (0, 1, 0)
    assert aider.overall.score.passed == 7 and aider.overall.score.n == 9
    assert aider.versions == ["0.86.2"] and aider.variant == "edit-format whole"
    # The page shows the same figures.
    assert "80%" in html and "n = 5" in html and "×2.50" in html and "×1.50" in html
    assert "edit-format whole" in html and "0.86.2" in html
    raw = found.baseline
    assert raw is not None and raw.harness == "raw"
    assert raw.cells[0].overhead.tokens_ratio is None  # raw is not compared with itself
    assert (raw.cells[0].format_failures, raw.cells[0].wrong) == (1, 2)


def test_best_harness_says_no_clear_winner_when_intervals_overlap(client: Client) -> None:
    add_runs(*standard_matrix())
    hw = _class()
    found = matrix.build(MODEL, hw)
    v = found.verdict
    assert v.best.harness == "aider" and v.runner_up.harness == "hermes-agent"
    assert not v.clear  # 7/9 and 5/9: the intervals overlap
    html = client.get(_url(hw)).content.decode()
    assert "No clear winner." in html
    assert "tokens sent ×2.50, requests ×1.50, wall time ×2.25" in html


def test_each_variant_of_a_program_is_its_own_row(client: Client) -> None:
    # Aider's edit format alone can take a model from failing every task to passing them.
    add_runs(
        matrix_record("raw", {"matrix_bugfix": [None, "wrong", "wrong", "wrong"]}),
        matrix_record("aider", {"matrix_bugfix": ["format"] * 4}, variant="edit-format diff"),
        matrix_record("aider", {"matrix_bugfix": [None] * 4}, variant="edit-format whole"),
    )
    found = matrix.build(MODEL, _class())
    assert [r.label for r in found.rows] == [
        "raw",
        "aider (edit-format diff)",
        "aider (edit-format whole)",
    ]
    diff, whole = found.rows[1], found.rows[2]
    assert (diff.overall.score.passed, diff.overall.format_failures) == (0, 4)
    assert whole.overall.score.passed == 4 and whole.runs == 1
    assert found.verdict.best.label == "aider (edit-format whole)"
    body = client.get(reverse("api-matrix") + f"?model={MODEL}&hw={_class().slug}").json()
    assert [(r["harness"], r["variant"]) for r in body["rows"]][1:] == [
        ("aider", "edit-format diff"),
        ("aider", "edit-format whole"),
    ]
    assert body["best_harness"]["variant"] == "edit-format whole"


def test_best_harness_is_clear_when_the_intervals_part(client: Client) -> None:
    ten = {"matrix_bugfix": [None] * 10}
    add_runs(
        matrix_record("raw", {"matrix_bugfix": ["wrong"] * 10}),
        matrix_record("aider", ten, prompt=3000),
    )
    hw = _class()
    v = matrix.build(MODEL, hw).verdict
    assert v.best.harness == "aider" and v.clear
    html = client.get(_url(hw)).content.decode()
    assert "clear of the runner-up, raw" in html and "tokens sent ×3.00" in html


def test_without_a_raw_baseline_the_page_says_so_and_shows_no_ratio(client: Client) -> None:
    add_runs(*[r for r in standard_matrix() if r.harness != "raw"])
    hw = _class()
    html = client.get(_url(hw)).content.decode()
    assert _rows(html)[0] == "xml-tool-call"
    assert "No <strong>raw</strong> baseline runs here" in html
    assert "its cost against raw is unknown" in html
    assert "×" not in html.split('<table class="board matrix-table">')[1].split("</table>")[0]


def test_one_harness_alone_has_nothing_to_compare(client: Client) -> None:
    add_runs(matrix_record("aider", {"matrix_bugfix": [None, "wrong"]}))
    html = client.get(_url(_class())).content.decode()
    assert _rows(html) == ["aider"]
    assert "the only harness measured on every suite here" in html


def test_a_harness_that_skipped_a_suite_is_shown_but_not_ranked(client: Client) -> None:
    add_runs(
        matrix_record("raw", {"matrix_bugfix": [None, "wrong"], "matrix_tools": [None]}),
        matrix_record("aider", {"matrix_bugfix": [None, None]}),
    )
    found = matrix.build(MODEL, _class())
    assert found.verdict.best.harness == "raw" and found.verdict.left_out == ["aider"]
    html = Client().get(_url(_class())).content.decode()
    assert "not run" in html and "Not compared (did not run every suite here): aider" in html


def test_only_published_runs_count(client: Client) -> None:
    add_runs(*standard_matrix())
    hidden = matrix_record("raw", {"matrix_bugfix": [None] * 20}, visibility="private")
    add_runs(hidden)
    found = matrix.build(MODEL, _class())
    assert found.baseline.cells[0].score.n == 5  # the private run's 20 tasks are not counted
    assert not Run.objects.get(client_run_id=hidden.client_run_id).published


def test_a_run_cut_short_does_not_count(client: Client) -> None:
    add_runs(*standard_matrix())
    add_runs(matrix_record("raw", {"matrix_bugfix": [None] * 7}, outcome="incomplete"))
    assert matrix.build(MODEL, _class()).baseline.cells[0].score.n == 5


def test_each_hardware_class_has_its_own_matrix(client: Client) -> None:
    add_runs(*standard_matrix())
    add_runs(
        matrix_record(
            "raw", {"matrix_bugfix": [None] * 4}, gpu="NVIDIA GeForce RTX 3090", wall_ms=9999.0
        )
    )
    classes = matrix.classes_for(MODEL)
    assert len(classes) == 2
    other = next(c for c in classes if "3090" in c.label)
    here = matrix.build(MODEL, _class())
    there = matrix.build(MODEL, other)
    assert here.baseline.cells[0].overhead.wall_ms == pytest.approx(4000.0)
    assert there.baseline.cells[0].overhead.wall_ms == pytest.approx(9999.0)
    assert [r.harness for r in there.rows] == ["raw"]
    html = client.get(_url(other)).content.decode()
    assert 'class="class-picker"' in html and "RTX 4090" in html


def test_setups_are_never_mixed(client: Client) -> None:
    add_runs(*standard_matrix())
    add_runs(matrix_record("raw", {"matrix_bugfix": [None] * 3}, quantization="Q8_0"))
    hw = _class()
    default = matrix.build(MODEL, hw)
    assert default.setup.quantization == "Q4_K_M" and default.baseline.cells[0].score.n == 5
    q8 = matrix.build(MODEL, hw, quantization="Q8_0", engine="llama.cpp")
    assert [r.harness for r in q8.rows] == ["raw"] and q8.baseline.cells[0].score.n == 3
    html = client.get(_url(hw, quant="Q8_0", engine="llama.cpp")).content.decode()
    assert "served more than one way here" in html and _rows(html) == ["raw"]


def test_hostile_metadata_is_escaped_and_ignored_never_a_500(client: Client) -> None:
    hostile = matrix_record(
        "aider", {"matrix_bugfix": ["format", None]}, variant=HOSTILE * 5, reason=HOSTILE
    )
    bad = hostile.suites[0].tasks[0].metadata
    bad["overhead"] = {
        "requests": "many",
        "prompt_tokens": -5,
        "completion_tokens": [1, 2],
        "wall_ms": 1e300,
        "model_ms": True,
        "peak_context": {"x": 1},
    }
    bad["failure"] = "<b>evil</b>"
    hostile.suites[0].tasks[1].metadata = ["not", "an", "object"]
    hostile.raw_payload["settings"] = {"harness_variant": ["not", "text"]}  # wrong type: skipped
    add_runs(hostile, matrix_record("raw", {"matrix_bugfix": [None, "wrong"]}))
    response = client.get(_url(_class()))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<b>evil</b>" not in html
    found = matrix.build(MODEL, _class())
    aider = next(r for r in found.rows if r.harness == "aider")
    cell = aider.cells[0]
    # Neither task recorded a usable overhead block; the unknown failure kind is "other".
    assert cell.overhead.tasks == 0 and cell.overhead.tokens_ratio is None
    assert cell.other_failures == 1 and cell.format_failures == 0
    assert len(aider.variant) == matrix.LABEL_CHARS  # cut short
    # The untrusted failure reasons are the owner's: never on the public page.
    assert "see the transcript" not in html


def test_unknown_model_or_class_is_404(client: Client) -> None:
    add_runs(*standard_matrix())
    hw = _class()
    assert client.get(_url(hw, model_id="no-such-model")).status_code == 404
    assert client.get("/matrix/no-such-class/" + MODEL + "/").status_code == 404


def test_a_model_without_matrix_runs_here_links_the_classes_that_have_them(client) -> None:
    add_runs(*standard_matrix())
    add_runs(record(model_id=MODEL, gpu="NVIDIA GeForce RTX 3090"))  # a plain run, no matrix
    other = HardwareClass.objects.get(label__contains="3090")
    html = client.get(_url(other)).content.decode()
    assert "No approved matrix runs" in html and _url(_class()) in html


def test_csv_and_json_carry_the_same_matrix(client: Client) -> None:
    add_runs(*standard_matrix())
    hw = _class()
    response = client.get(reverse("leaderboard:matrix_csv") + f"?model={MODEL}&hw={hw.slug}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert {len(line) for line in lines} == {len(lines[0])}  # every line fills the header
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 5 * 4  # five harnesses, three suites and "all"
    aider = next(r for r in rows if r["harness"] == "aider" and r["suite"] == "matrix_bugfix")
    assert (aider["passed"], aider["tasks"], aider["tokens_vs_raw"]) == ("4", "5", "2.5")
    assert (aider["harness_variant"], aider["harness_versions"]) == ("edit-format whole", "0.86.2")
    api = client.get(reverse("api-matrix") + f"?model={MODEL}&hw={hw.slug}")
    assert api.status_code == 200
    body = api.json()
    assert [r["harness"] for r in body["rows"]][0] == "raw"
    assert body["best_harness"] == {
        "harness": "aider",
        "variant": "edit-format whole",
        "runner_up": "hermes-agent",
        "clear": False,
        "not_compared": [],
    }
    cell = next(r for r in body["rows"] if r["harness"] == "aider")["cells"]["matrix_bugfix"]
    assert cell["score"]["passed"] == 4 and cell["overhead"]["tokens_vs_raw"] == 2.5
    assert client.get(reverse("api-matrix") + "?model=x&hw=nope").status_code == 404


def test_stack_page_and_board_link_the_matrix(client: Client) -> None:
    add_runs(*standard_matrix())
    hw = _class()
    aider = Stack.objects.get(model_id=MODEL, harness="aider")
    html = client.get(reverse("leaderboard:stack", args=[aider.id])).content.decode()
    assert "Harness matrix</strong> for" in html and _url(hw) in html
    assert "no clear winner: aider (edit-format whole) leads" in html
    board = client.get(reverse("leaderboard:leaderboard") + f"?hw={hw.slug}").content.decode()
    assert "harness matrix</a>" in board and _url(hw) in board


def test_page_is_server_rendered_without_javascript(client: Client) -> None:
    add_runs(*standard_matrix())
    html = client.get(_url(_class())).content.decode()
    table = html.split('<table class="board matrix-table">')[1].split("</table>")[0]
    assert table.count('class="matrix-row') == 5 and "n = 9" in table
    assert "hx-get" not in table and "<script" not in table


def test_the_harness_filter_groups_formats_and_programs_and_reads_old_names(client) -> None:
    add_runs(*standard_matrix())
    hw = _class()
    html = client.get(f"/leaderboard/?hw={hw.slug}").content.decode()
    menu = html.split('<select id="f-harness" name="harness">')[1].split("</select>")[0]
    formats = menu.split('<optgroup label="Prompt formats (the engine&#x27;s loop)">')[1]
    assert formats.split("</optgroup>")[0].count("<option") == 1 and "xml-tool-call" in formats
    programs = menu.split('<optgroup label="Agent programs">')[1].split("</optgroup>")[0]
    assert all(name in programs for name in ("aider", "hermes-agent", "mini-swe-agent"))
    xml = Stack.objects.get(harness="xml-tool-call")
    aider = Stack.objects.get(harness="aider")
    # An old link's ?harness=hermes finds the renamed format, and never the Hermes program.
    old = client.get(f"/leaderboard/?hw={hw.slug}&harness=hermes", follow=True).content.decode()
    assert f"/stacks/{xml.id}/" in old and f"/stacks/{aider.id}/" not in old
    assert "prompt format xml-tool-call" in old
    hermes = Stack.objects.get(harness="hermes-agent")
    program = client.get(f"/leaderboard/?hw={hw.slug}&harness=hermes-agent").content.decode()
    assert f"/stacks/{hermes.id}/" in program and f"/stacks/{xml.id}/" not in program
    assert "agent program hermes-agent" in program


def test_the_json_treats_an_empty_setup_filter_as_none(client: Client) -> None:
    """A client form that sends empty fields (?quant=&engine=) gets the default setup, as
    without them (issue 31, defect 13); an empty class or model is the declared 404."""
    add_runs(*standard_matrix())
    hw = _class()
    plain = client.get(f"/api/v1/matrix?model={MODEL}&hw={hw.slug}")
    empty = client.get(f"/api/v1/matrix?model={MODEL}&hw={hw.slug}&quant=&engine=")
    assert plain.status_code == empty.status_code == 200
    assert empty.json() == plain.json()
    for query in ("engine=&hw=", "model=&hw=&quant=&engine=", f"model={MODEL}&hw=&engine="):
        assert client.get(f"/api/v1/matrix?{query}").status_code == 404, query
