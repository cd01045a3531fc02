"""Read load: public pages on gunicorn over a seeded database, against a constant view.

For 8 and then 32 concurrent connections, each page is requested back to back for `--seconds`
(after one second of warm-up that also fills the leaderboard cache): a constant Django view
(`/bench/baseline`, routed only with BENCHLOOP_BENCH_BASELINE on), the leaderboard's default
view (the hardware class with the most runs), a three-filter view (vendor, VRAM size, engine),
one named class, what fits in 24 GB, the all-hardware view, the busiest stack's page and the
API leaderboard. Each page's throughput is reported as a ratio of the baseline's at the same
concurrency, with p50/p99 latency and the web workers' peak resident memory.

Usage (after `BENCH_DB=benchloop_bench bash bench/seed_scale.sh 1000000`; the seed keeps the
lanes through runs.services):

    .venv/bin/python bench/load_read.py [--db benchloop_bench] [--seconds 10] [--workers 3]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadlib import (  # noqa: E402
    Gunicorn,
    RssSampler,
    load_average,
    manage,
    percentile,
    server_env,
    timed_loop,
)

DB = "benchloop_bench"
FILTERED = "/leaderboard/?vendor=nvidia&vram=24&engine=llama.cpp"


def _psql(db: str, sql: str) -> str:
    return subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-tAc", sql],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def busiest_stack(db: str) -> int:
    out = _psql(
        db,
        "SELECT id FROM runs_stack WHERE best_run_id IS NOT NULL "
        "ORDER BY published_run_count DESC, id LIMIT 1",
    )
    if not out:
        raise SystemExit(f"{db} has no ranked stacks: run `bash bench/seed_scale.sh 1000000`")
    return int(out)


def second_class(db: str) -> str:
    """The slug of the class with the second most runs (the default view shows the first)."""
    out = _psql(
        db,
        "SELECT c.slug FROM runs_lane l JOIN runs_hardwareclass c ON c.id = l.hardware_class_id"
        " WHERE l.score_scale = 'v3' GROUP BY c.slug ORDER BY sum(l.run_count) DESC, c.slug"
        " OFFSET 1 LIMIT 1",
    )
    if not out:
        raise SystemExit(f"{db} has no lanes: seed it with `manage.py seed_demo --runs N`")
    return out


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn sync workers")
    parser.add_argument("--port", type=int, default=8612)
    parser.add_argument("--connections", default="8,32")
    parser.add_argument("--db", default=DB)
    parser.add_argument("--redis-db", type=int, default=None, help="cache and broker database")
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="measure the constant view again before each page; each ratio is to that one",
    )
    parser.add_argument("--only", default="", help="page labels to measure, separated by |")
    return parser.parse_args()


def _pages(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(label, path) of every page measured; the constant view comes first, as the baseline."""
    stack = busiest_stack(args.db)
    other = second_class(args.db)
    pages = [
        ("baseline (constant view)", "/bench/baseline"),
        ("leaderboard, default view", "/leaderboard/"),
        ("leaderboard, three filters", FILTERED),
        (f"leaderboard, hw={other}", f"/leaderboard/?hw={other}"),
        ("leaderboard, fits in 24 GB", "/leaderboard/?fits=24"),
        ("leaderboard, all hardware", "/leaderboard/?hw=all"),
        ("landing page", "/"),
        ("stack page (busiest stack)", f"/stacks/{stack}/"),
        ("API leaderboard", "/api/v1/leaderboard"),
    ]
    if args.only:
        wanted = set(args.only.split("|"))
        pages = [pages[0]] + [p for p in pages[1:] if p[0] in wanted]
    return pages


async def _measure(
    server: Gunicorn, pages: list[tuple[str, str]], args: argparse.Namespace, rows: list
) -> dict[int, float]:
    """Every page at every connection count, a row each in ``rows``; the workers' peak RSS."""
    sampler = RssSampler(server)
    sampler.start()
    for connections in [int(c) for c in args.connections.split(",")]:
        baseline = None
        for label, path in pages:
            if args.interleave and baseline is not None:
                # The constant view again, just before this page: on a shared machine the
                # load moves between pages, and a ratio to a baseline measured minutes
                # earlier says more about the neighbours than us.
                again = await timed_loop(
                    server.port, pages[0][1], connections=connections, seconds=args.seconds
                )
                baseline = len(again.samples) / again.wall_s
            result = await timed_loop(
                server.port, path, connections=connections, seconds=args.seconds
            )
            rate = len(result.samples) / result.wall_s
            baseline = baseline or rate
            times = result.latencies_ms()
            p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
            rows.append((connections, label, rate, rate / baseline, p50, p99, load_average()))
            print(
                f"{connections:>3} {label:<32} {rate:8.1f}/s  ratio {rate / baseline:5.2f}"
                f"  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  load {load_average()}",
                flush=True,
            )
    await sampler.stop()
    return sampler.peak


def main() -> None:
    args = _arguments()
    pages = _pages(args)
    env = server_env(
        args.db,
        BENCHLOOP_BENCH_BASELINE="True",
        THROTTLE_ANON="1000000/minute",
        THROTTLE_USER="1000000/minute",
        THROTTLE_PAGE_RENDER="1000000/minute",
    )
    if args.redis_db is not None:
        env["CELERY_BROKER_URL"] = f"redis://127.0.0.1:6379/{args.redis_db}"
    manage(env, "collectstatic", "--noinput", "-v", "0")
    rows: list = []
    with Gunicorn(env, args.port, args.workers) as server:
        server.wait_ready()
        idle_rss = server.worker_rss_mib()
        peak = asyncio.run(_measure(server, pages, args, rows))

    print()
    print("| Connections | Page | Requests/s | ÷ baseline | p50 ms | p99 ms | Load average |")
    print("|---:|---|---:|---:|---:|---:|---|")
    for connections, label, rate, ratio, p50, p99, load in rows:
        print(
            f"| {connections} | {label} | {rate:.1f} | {ratio:.2f} | {p50:.1f} | {p99:.1f} "
            f"| {load} |"
        )
    print(
        f"\n{args.workers} gunicorn sync workers; RSS at start "
        f"{', '.join(f'{v:.0f}' for v in idle_rss)} MiB; peak "
        f"{', '.join(f'{v:.0f}' for v in peak.values())} MiB"
    )


if __name__ == "__main__":
    main()
