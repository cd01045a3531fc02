"""Server time of the public pages on a large database (median of N requests per page).

Usage (after `bash bench/seed_scale.sh 100000`):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchloop_bench \
        .venv/bin/python bench/leaderboard_render.py [--repeat 20] [--check]

Requests go through Django's test client in-process: middleware, views, queries and template
rendering, but no network or WSGI server. --check exits 1 when a targeted page's median is at
or above 150 ms. --cold makes every request miss the leaderboard cache (a new data version
before each one), which is what a page costs right after a publish.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
os.environ.setdefault("DEBUG", "True")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from leaderboard import cache as board_cache  # noqa: E402
from runs.models import Run, Stack  # noqa: E402

TARGET_MS = 150.0
THREE_FILTERS = "/leaderboard/?vendor=nvidia&vram=24&engine=llama.cpp"


def pages() -> list[tuple[str, str, bool, dict]]:
    """(label, path, has a target, extra headers)."""
    busiest = Stack.objects.filter(best_run__isnull=False).order_by("-published_run_count")
    first, second = list(busiest.values_list("id", flat=True)[:2])
    htmx = {"HX-Request": "true"}
    return [
        ("leaderboard, default view", "/leaderboard/", True, {}),
        ("leaderboard, three filters (vendor, VRAM, engine)", THREE_FILTERS, True, {}),
        (
            "leaderboard, three filters (GPU, quant, sort by decode)",
            "/leaderboard/?gpu=RTX+4090&quant=Q4_K_M&sort=decode",
            True,
            {},
        ),
        ("leaderboard, default view, htmx partial", "/leaderboard/", False, htmx),
        ("leaderboard, three filters, htmx partial", THREE_FILTERS, False, htmx),
        ("leaderboard, page 20", "/leaderboard/?page=20", False, {}),
        ("leaderboard, all hardware (pooled quality)", "/leaderboard/?hw=all", False, {}),
        ("leaderboard, what fits in 24 GB", "/leaderboard/?fits=24", False, {}),
        ("leaderboard, last 30 days (from runs)", "/leaderboard/?days=30", False, {}),
        ("leaderboard, free text 'qwen3'", "/leaderboard/?q=qwen3", False, {}),
        ("landing page", "/", False, {}),
        ("stack page (busiest stack)", f"/stacks/{first}/", False, {}),
        ("compare two busiest stacks", f"/compare/?stacks={first},{second}", False, {}),
        ("CSV export, three filters", THREE_FILTERS.replace("/?", "/export.csv?"), False, {}),
    ]


def measure(
    client: Client, path: str, headers: dict, repeat: int, *, cold: bool = False
) -> tuple[float, float, int]:
    for _ in range(2):  # warm caches and connections
        client.get(path, headers=headers)
    timings = []
    for _ in range(repeat):
        if cold:
            board_cache.bump()
        started = time.perf_counter()
        response = client.get(path, headers=headers)
        timings.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{path}: HTTP {response.status_code}")
    if cold:
        board_cache.bump()
    with CaptureQueriesContext(connection) as queries:
        client.get(path, headers=headers)
    timings.sort()
    return statistics.median(timings), timings[int(0.9 * (len(timings) - 1))], len(queries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--cold", action="store_true", help="miss the cache on every request")
    args = parser.parse_args()
    client = Client()
    runs = Run.objects.count()
    stacks = Stack.objects.filter(best_run__isnull=False).count()
    print(f"database: {connection.settings_dict['NAME']} ({runs:,} runs, {stacks:,} ranked stacks)")
    how = ", each missing the cache" if args.cold else ""
    print(f"median of {args.repeat} requests after 2 warm-ups{how}\n")
    print("| Page | Median ms | p90 ms | Queries | Target |")
    print("|---|---:|---:|---:|---|")
    missed = False
    for label, path, targeted, headers in pages():
        median, p90, count = measure(client, path, headers, args.repeat, cold=args.cold)
        verdict = ""
        if targeted:
            ok = median < TARGET_MS
            missed |= not ok
            verdict = f"< {TARGET_MS:.0f} ms: {'met' if ok else 'MISSED'}"
        print(f"| {label} (`{path}`) | {median:.1f} | {p90:.1f} | {count} | {verdict} |")
    return 1 if (missed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
