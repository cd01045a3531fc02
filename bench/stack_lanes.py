"""Server time of a stack page with 1,000 runs in 10 hardware lanes (issue 15's target: 100 ms).

Usage (a migrated database of its own; the stack is added on the first run):

    createdb -h 127.0.0.1 -U postgres benchloop_lanes
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchloop_lanes \
        .venv/bin/python manage.py migrate
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchloop_lanes \
        .venv/bin/python bench/stack_lanes.py [--repeat 20] [--check]

Requests go through Django's test client in-process (middleware, views, queries, templates; no
network or WSGI server). The page cache is cleared before every request of the "uncached" rows,
so they time the whole render; "?hw=" and "?profile=" views are never cached. "web CPU" is the
benchmark process's own CPU time per request (Postgres works in its own process), which a busy
machine inflates less than wall time. --check exits 1 when an uncached median reaches 100 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
os.environ.setdefault("DEBUG", "True")

import django  # noqa: E402

django.setup()

from django.core.cache import caches  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from runs.importers.records import HardwareRecord, ImportedSuite, RunRecord  # noqa: E402
from runs.models import HardwareClass, Run, Stack  # noqa: E402
from submissions.intake import import_records  # noqa: E402

TARGET_MS = 100.0
MODEL = "bench-lanes:8b"
CLASSES = 10
RUNS_PER_CLASS = 100


def seed() -> int:
    """The stack with 1,000 published runs, 100 on each of 10 classes (added once)."""
    stack = Stack.objects.filter(model_id=MODEL).first()
    if stack and stack.published_run_count >= CLASSES * RUNS_PER_CLASS:
        return stack.id
    rng = random.Random(15)
    now = datetime.now(UTC)
    for c in range(CLASSES):
        found, _ = HardwareClass.objects.get_or_create(
            slug=f"bench-gpu-{c}",
            defaults={"key": f"bench:{c}", "kind": "gpu", "label": f"Bench GPU {c} 24 GB"},
        )
        records = []
        for i in range(RUNS_PER_CLASS):
            decode = (20 + 15 * c) * rng.uniform(0.9, 1.1)
            records.append(
                RunRecord(
                    source_format="run-v3",
                    started_at=now - timedelta(hours=c * RUNS_PER_CLASS + i),
                    client_run_id=f"bench-lanes-{c}-{i}",
                    model_id=MODEL,
                    quantization="Q4_K_M",
                    engine="llama.cpp",
                    engine_version=f"b{6000 + 100 * (i % 4)}",
                    score_scale="v3",
                    comparable=True,
                    profile="core",
                    overall_score=rng.uniform(50, 70),
                    quality_score=rng.uniform(50, 70),
                    speed_score=50.0,
                    reliability_score=100.0,
                    hardware=HardwareRecord(cpu="AMD Ryzen 9", gpu=f"Bench GPU {c}", vram_gb=24),
                    speed={
                        "decode_tps_median": decode,
                        "decode_tps_mean": decode,
                        "decode_tps_stdev": 1.0,
                        "prefill_tps_median": decode * 20,
                        "ttft_ms_median": 2000 / decode,
                    },
                    speed_sample_count=5,
                    submitter_name=f"bench-{i % 7}",
                    suites=[
                        ImportedSuite(suite="toolcall", score=60.0, task_count=10, pass_count=6)
                    ],
                )
            )
        created = import_records(records).created
        Run.objects.filter(id__in=[r.id for r in created]).update(hardware_class=found)
    stack = Stack.objects.get(model_id=MODEL)
    from leaderboard.tests.lane_factories import refresh_lanes  # the stored lanes, as tests do

    refresh_lanes([stack.id])
    return stack.id


def measure(client: Client, path: str, repeat: int, *, uncached: bool) -> tuple:
    for _ in range(2):
        client.get(path)
    timings, cpu = [], []
    for _ in range(repeat):
        if uncached:
            caches["default"].clear()
        started, started_cpu = time.perf_counter(), time.process_time()
        response = client.get(path)
        timings.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    if uncached:
        caches["default"].clear()
    with CaptureQueriesContext(connection) as queries:
        body = client.get(path).content
    timings.sort()
    p90 = timings[int(0.9 * (len(timings) - 1))]
    return statistics.median(timings), p90, statistics.median(cpu), len(queries), body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stack_id = seed()
    client = Client()
    rows = [
        ("stack page, uncached", f"/stacks/{stack_id}/", True),
        ("stack page, cached", f"/stacks/{stack_id}/", False),
        ("stack page, ?hw= one class", f"/stacks/{stack_id}/?hw=bench-gpu-3", True),
        ("stack page, ?profile=core&days=365", f"/stacks/{stack_id}/?profile=core&days=365", True),
        ("stack share image", f"/stacks/{stack_id}/share.png", True),
    ]
    missed = False
    print(f"{'page':<36} {'median ms':>10} {'p90 ms':>8} {'web CPU ms':>10} {'queries':>8}")
    for label, path, uncached in rows:
        median, p90, cpu, queries, body = measure(client, path, args.repeat, uncached=uncached)
        if label == "stack page, uncached":
            assert body.count(b'class="lane-row"') == CLASSES, "expected ten lanes"
        if uncached and label.startswith("stack page"):
            missed |= median >= TARGET_MS
        print(f"{label:<36} {median:>10.1f} {p90:>8.1f} {cpu:>10.1f} {queries:>8}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
