"""At 100,000 runs no public page's cold render reads the runs or their suite results whole
(issue 30): every SELECT the page makes is planned by Postgres (EXPLAIN with its own
parameters), and no plan may hold a sequential scan of either table.

The runs are written with SQL (`INSERT ... SELECT ... generate_series`), copies of runs, suite
results and submissions stored through the real intake, spread over a few thousand stacks and
forty hardware classes with their lanes, and ANALYZEd, as a big site's tables are. Plans are
Postgres's (the site runs on it: the root conftest refuses anything else).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Model
from django.test import Client
from pytest_django import DjangoDbBlocker

from leaderboard import cache as board_cache
from leaderboard import places
from leaderboard.tests.factories import add_runs, record
from runs.importers.records import ImportedSuite
from runs.models import Hardware, HardwareClass, Lane, Run, Stack, SuiteResult
from submissions.models import Submission

# A minute and a half with its 100,000 runs: CI runs it, the fast lane does not.
pytestmark = [pytest.mark.django_db, pytest.mark.scale]

RUNS = 100_000
STACKS = 2_500  # about 40 runs a stack, as seed_demo --runs makes them
CLASSES = 40
# The tables whose size is the number of runs: a plan may read a part of them through an index,
# never the whole.
WATCHED = {Run._meta.db_table, SuiteResult._meta.db_table}
BULK = "bulk-"  # every copied row's client run id, slug or key starts so


def _copy(
    cursor: CursorWrapper,
    model: type[Model],
    template_id: int,
    source: str,
    overrides: dict[str, str],
    where: str = "TRUE",
    params: tuple[Any, ...] = (),
) -> None:
    """INSERT copies of one stored row of `model`, one per row of `source` (SQL joined to the
    template as `t`); `overrides` gives a column's SQL, every other column is the template's."""
    table = model._meta.db_table
    columns = [f.column for f in model._meta.concrete_fields if f.column != "id"]
    assert set(overrides) <= set(columns), set(overrides) - set(columns)
    values = ", ".join(overrides.get(c, f't."{c}"') for c in columns)
    names = ", ".join(f'"{c}"' for c in columns)
    cursor.execute(
        f'INSERT INTO "{table}" ({names}) SELECT {values} '  # noqa: S608 (names from the model)
        f'FROM "{table}" t, {source} WHERE t.id = %s AND ({where})',
        (*params, template_id),
    )


def _seed(template: Run) -> None:
    """RUNS published-or-rejected runs (one in twenty rejected) on STACKS stacks, each stack on
    three of CLASSES classes, with their suites, submissions and lanes."""
    submission = Submission.objects.get(run=template)
    suite = SuiteResult.objects.filter(run=template).first()
    lane = Lane.objects.filter(best_run=template, hardware_class__isnull=False).first()
    assert suite is not None and lane is not None and template.hardware is not None
    klass = template.hardware_class
    assert klass is not None
    with connection.cursor() as cursor:
        _copy(
            cursor,
            HardwareClass,
            klass.id,
            "generate_series(1, %s) g",
            {
                "key": f"'{BULK}' || g",
                "slug": f"'{BULK}gpu-' || g || '-' || (8 * (1 + mod(g, 6))) || 'gb'",
                "label": "'Bulk GPU ' || g || ' ' || (8 * (1 + mod(g, 6))) || ' GB'",
                "chip": "'Bulk GPU ' || g",
                "vendor": "(ARRAY['nvidia', 'amd'])[1 + mod(g, 2)]",
                "memory_gb": "8 * (1 + mod(g, 6))",
            },
            params=(CLASSES,),
        )
        _copy(
            cursor,
            Hardware,
            template.hardware.id,
            "runs_hardwareclass c",
            {"canonical_key": "c.key", "hardware_class_id": "c.id", "gpu_model": "c.chip"},
            where=f"c.key LIKE '{BULK}%%'",
        )
        _copy(
            cursor,
            Stack,
            template.stack_id,
            "generate_series(1, %s) g",
            {
                "comparability_key": f"md5('{BULK}' || g)",
                "model_id": f"'{BULK}model-' || mod(g, 600) || ':8b'",
                "model_family": f"'{BULK}family'",
                "engine": "(ARRAY['llama.cpp', 'vllm', 'ollama', 'mlx', 'sglang'])[1 + mod(g, 5)]",
                "quantization": "(ARRAY['Q4_K_M', 'Q8_0', 'F16'])[1 + mod(g, 3)]",
                "best_run_id": "NULL",
                "published_run_count": str(RUNS // STACKS),
            },
            params=(STACKS,),
        )
        speed = f"mod(mod(g, {STACKS}), 5) = 0"  # a fifth of the stacks measured for speed only
        place = f"1 + mod(mod(g, {STACKS}) * 7 + mod(g / {STACKS}, 3), {CLASSES})"
        _copy(
            cursor,
            Run,
            template.id,
            "generate_series(1, %s) g, "
            f"(SELECT array_agg(id ORDER BY id) ids FROM runs_stack "
            f" WHERE model_family = '{BULK}family') s, "
            "(SELECT array_agg(h.id ORDER BY c.id) machines, array_agg(c.id ORDER BY c.id) classes"
            " FROM runs_hardware h JOIN runs_hardwareclass c ON c.id = h.hardware_class_id"
            f" WHERE c.key LIKE '{BULK}%%') k",
            {
                "stack_id": f"s.ids[1 + mod(g, {STACKS})]",
                "hardware_class_id": f"k.classes[{place}]",
                "hardware_id": f"k.machines[{place}]",
                "fingerprint": f"md5('{BULK}run-' || g)",
                "client_run_id": f"'{BULK}' || g",
                "published": "mod(g, 20) <> 0",
                "score_scale": f"CASE WHEN {speed} THEN 'speed' ELSE 'v3' END",
                "overall_score": f"CASE WHEN {speed} THEN NULL ELSE 40 + mod(g * 37, 500) / 10 END",
                "quality_score": f"CASE WHEN {speed} THEN NULL ELSE 30 + mod(g * 31, 600) / 10 END",
                "decode_tps_median": "10 + mod(g * 13, 1000) / 10.0",
                "profile": "(ARRAY['core', 'full', 'smoke'])[1 + mod(g, 3)]",
                "is_verified": "mod(g, 10) = 0",
                "started_at": "now() - make_interval(secs => g * 300)",
                "created_at": "now() - make_interval(secs => g * 300) + interval '1 hour'",
                "raw_payload": "'{}'::jsonb",
                "approved_at": "now() - make_interval(secs => g * 300) + interval '2 hours'",
            },
            params=(RUNS,),
        )
        bulk_runs = f"r.client_run_id LIKE '{BULK}%%'"
        _copy(
            cursor,
            SuiteResult,
            suite.id,
            "runs_run r, unnest(ARRAY['toolcall', 'coding', 'speed', 'matrix_bugfix']) x(name)",
            {"run_id": "r.id", "suite": "x.name", "score": "mod(r.id * 17, 1000) / 10.0"},
            # Matrix suites on one run in a hundred, and none on speed-only runs.
            where=f"{bulk_runs} AND r.score_scale = 'v3' "
            "AND (x.name <> 'matrix_bugfix' OR mod(r.id, 100) = 0)",
        )
        _copy(
            cursor,
            Submission,
            submission.id,
            "runs_run r",
            {
                "run_id": "r.id",
                "client_run_id": "r.client_run_id",
                "submitter_name": f"'{BULK}user-' || mod(r.id, 300)",
                "status": "CASE WHEN r.published THEN 'approved' ELSE 'rejected' END",
                "created_at": "r.created_at",
                "decided_at": "r.created_at + interval '1 hour'",
            },
            where=bulk_runs,
        )
        figures = (
            "SELECT stack_id, {klass} AS klass, score_scale, "
            "CASE WHEN score_scale = 'speed' THEN speed_version ELSE benchmark_version END v, "
            "count(*) n, max(id) best, avg(overall_score) o, avg(quality_score) q, "
            "avg(decode_tps_median) d FROM runs_run r "
            f"WHERE published AND {bulk_runs} {{only}} GROUP BY 1, 2, 3, 4"
        )
        lane_columns = {
            "stack_id": "a.stack_id",
            "hardware_class_id": "a.klass",
            "score_scale": "a.score_scale",
            "benchmark_version": "a.v",
            "run_count": "a.n",
            "submitter_count": "least(a.n, 5)",
            "attempt_count": "a.n",
            "best_run_id": "a.best",
            "best_score": "coalesce(a.o, a.d)",
            "quality_median": "a.q",
            "quality_low": "a.q - 2",
            "quality_high": "a.q + 2",
        }
        speeds = {
            "overall_median": "a.o",
            "overall_low": "a.o - 2",
            "overall_high": "a.o + 2",
            "decode_median": "a.d",
            "decode_low": "a.d - 3",
            "decode_high": "a.d + 3",
        }
        _copy(
            cursor,
            Lane,
            lane.id,
            f"({figures.format(klass='hardware_class_id', only='')}) a",
            lane_columns | speeds,
        )
        pooled = dict.fromkeys([*speeds, "prefill_median", "ttft_median"], "NULL")
        only_scored = "AND score_scale = 'v3'"
        _copy(
            cursor,
            Lane,
            lane.id,
            f"({figures.format(klass='NULL::integer', only=only_scored)}) a",
            lane_columns | pooled,
        )
        cursor.execute(
            "UPDATE runs_stack s SET best_run_id = b.best FROM "
            "(SELECT stack_id, max(best_run_id) best FROM runs_lane GROUP BY 1) b "
            f"WHERE s.id = b.stack_id AND s.model_family = '{BULK}family'"
        )
    # The class boards of the copied lanes, as the lanes' refresh writes them.
    boards = Lane.objects.filter(hardware_class__isnull=False).values_list(
        "hardware_class_id", "score_scale", "benchmark_version"
    )
    places.store_boards(boards.distinct())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


@pytest.fixture(scope="module")
def big_site(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[dict[str, str]]:
    """A few stacks stored through the real intake (one with a harness matrix run), RUNS
    copies of their runs, and the pages to request: {what: path}. Seeded once in a
    transaction rolled back after the module's last test."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            matrix = record(model_id="qwen2.5-coder:7b", harness="raw")
            matrix.suites = [
                ImportedSuite(suite="toolcall", score=60.0, task_count=10, pass_count=6),
                ImportedSuite(suite="matrix_bugfix", score=40.0, task_count=5, pass_count=2),
            ]
            made = add_runs(
                record(model_id="qwen3:8b"),
                record(model_id="qwen3:8b", days_ago=2),
                record(model_id="gemma3:12b", gpu="NVIDIA GeForce RTX 3090"),
                record(model_id="qwen3:8b", score_scale="speed"),
                matrix,
            )
            _seed(made[0])
            busiest = (
                Stack.objects.filter(model_family=f"{BULK}family")
                .order_by("-published_run_count", "id")
                .first()
            )
            assert busiest is not None and Run.objects.count() > RUNS
            slug = (
                HardwareClass.objects.filter(key__startswith=BULK, memory_gb=24)
                .order_by("id")
                .values_list("slug", flat=True)[0]
            )
            yield {
                "default board": "/leaderboard/",
                "board, vendor, VRAM and engine": "/leaderboard/?vendor=nvidia&vram=24&engine=vllm",
                "board, one class and engine": f"/leaderboard/?hw={slug}&engine=llama.cpp",
                "board, all hardware": "/leaderboard/?hw=all",
                "board, one profile": f"/leaderboard/?hw={slug}&profile=core",
                "board, last 30 days": "/leaderboard/?days=30",
                "board, suite columns": f"/leaderboard/?hw={slug}&cols=toolcall,coding",
                "board, sorted by a suite": f"/leaderboard/?hw={slug}&sort=suite:coding",
                "board, one profile, suite column": "/leaderboard/?profile=full&cols=coding",
                "stack page": f"/stacks/{busiest.id}/",
                "stack page, matrix model": f"/stacks/{made[-1].stack_id}/",
                "API leaderboard": "/api/v1/leaderboard",
                "API leaderboard, one profile": f"/api/v1/leaderboard?hw={slug}&profile=core",
                "feed": "/leaderboard/feed.atom",
                "feed, one class": f"/leaderboard/feed.atom?hw={slug}",
                "feed, all hardware, engine": "/leaderboard/feed.atom?hw=all&engine=vllm",
            }
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def whole_reads(node: dict[str, Any], *, limited: bool = False) -> Iterator[str]:
    """'<scan> on <table>' for each node of a plan that reads a watched table whole: a
    sequential scan, or an index scan with no condition on the index (a walk through every
    entry of it) unless a LIMIT above it stops the walk early."""
    table, kind = node.get("Relation Name"), node["Node Type"]
    unbounded = kind in ("Index Scan", "Index Only Scan") and "Index Cond" not in node
    if table in WATCHED and (kind == "Seq Scan" or (unbounded and not limited)):
        yield f"{kind} on {table}"
    for child in node.get("Plans", []):
        yield from whole_reads(child, limited=limited or kind == "Limit")


def cold_selects(client: Client, path: str) -> list[tuple[str, list[Any]]]:
    """Every SELECT a request for `path` makes with the page cache missed, with its params."""
    board_cache.bump()  # a new page version: every cached page and fragment misses
    captured: list[tuple[str, list[Any]]] = []

    def keep(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        captured.append((sql, list(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return [(sql, params) for sql, params in captured if sql.lstrip()[:6].upper() == "SELECT"]


def full_scans(selects: list[tuple[str, list[Any]]]) -> list[str]:
    """'<scan> on <table>: SQL' for each query whose plan reads a watched table whole."""
    found = []
    with connection.cursor() as cursor:
        for sql, params in selects:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()
            found += [f"{read}: {sql}" for read in whole_reads(plan[0]["Plan"])]
    return found


@pytest.mark.parametrize(
    "page",
    [
        "default board",
        "board, vendor, VRAM and engine",
        "board, one class and engine",
        "board, all hardware",
        "board, one profile",
        "board, last 30 days",
        "board, suite columns",
        "board, sorted by a suite",
        "board, one profile, suite column",
        "stack page",
        "stack page, matrix model",
        "API leaderboard",
        "API leaderboard, one profile",
        "feed",
        "feed, one class",
        "feed, all hardware, engine",
    ],
)
def test_a_cold_page_scans_neither_runs_nor_suite_results(
    big_site: dict[str, str], page: str
) -> None:
    assert connection.vendor == "postgresql"
    selects = cold_selects(Client(), big_site[page])
    assert selects, "the page made no query: it was served from a cache"
    found = full_scans(selects)
    assert not found, "\n\n".join(found)


def test_the_check_finds_a_full_scan(big_site: dict[str, str]) -> None:
    """The plan check itself: a query that must read every run is caught."""
    table = Run._meta.db_table
    unindexed = [(f"SELECT count(*) FROM {table} WHERE error <> %s", ["x"])]  # noqa: S608
    assert [f.split(":")[0] for f in full_scans(unindexed)] == [f"Seq Scan on {table}"]
    # An index walked end to end (no condition on it) reads the table whole too, unless a
    # LIMIT stops the walk (the newest 50 runs of an index in date order).
    walk = {"Node Type": "Index Scan", "Relation Name": table, "Index Name": "run_started_idx"}
    assert list(whole_reads(walk)) == [f"Index Scan on {table}"]
    assert list(whole_reads({"Node Type": "Limit", "Plans": [walk]})) == []
    assert list(whole_reads({**walk, "Index Cond": "(stack_id = 7)"})) == []
