"""Where one upload's time goes: N new-bundle uploads in-process (Django test client, no HTTP),
with the web process's CPU time and its Postgres backend's CPU time per upload.

The load benchmark (`load_submit.py`) says how many uploads per second the machine takes;
this says what each one costs and on which side, one process at a time.

Usage: .venv/bin/python bench/upload_profile.py [--uploads 300] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_submit import make_bundle, template  # noqa: E402
from loadlib import fresh_database, manage, server_env  # noqa: E402

DB = "benchloop_profile"
WARMUP = 20


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uploads", type=int, default=300)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions")
    args = parser.parse_args()

    env = server_env(DB, THROTTLE_UPLOAD="100000/minute")
    fresh_database(DB)
    manage(env, "migrate", "-v", "0")
    os.environ.update({k: v for k, v in env.items() if k != "PATH"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from submissions.models import SubmitterProfile
    from submissions.services import create_api_key

    user = User.objects.create_user("profiler")
    SubmitterProfile.objects.create(user=user, is_trusted=True)  # published: the costly path
    key = create_api_key(user=user, name="profile", scopes=["submit"])[1]
    rng, base = random.Random(1), template()
    bodies = [
        json.dumps(make_bundle(base, rng, number, client=1)).encode()
        for number in range(WARMUP + args.uploads)
    ]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="127.0.0.1")

    def upload(body: bytes) -> None:
        answer = client.post("/api/v1/runs", body, content_type="application/json")
        if answer.status_code != 201:
            raise SystemExit(f"upload failed: {answer.status_code} {answer.content[:300]!r}")

    for body in bodies[:WARMUP]:
        upload(body)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = psutil.Process(cursor.fetchone()[0])
    me = psutil.Process()
    profiler = cProfile.Profile()
    web_before, db_before = cpu_seconds(me), cpu_seconds(backend)
    started = time.perf_counter()
    if args.profile:
        profiler.enable()
    for body in bodies[WARMUP:]:
        upload(body)
    profiler.disable()
    wall = time.perf_counter() - started
    n = args.uploads
    print(
        f"{n} uploads: {wall / n * 1000:.1f} ms each (wall); CPU per upload: web process "
        f"{(cpu_seconds(me) - web_before) / n * 1000:.1f} ms, Postgres backend "
        f"{(cpu_seconds(backend) - db_before) / n * 1000:.1f} ms"
    )
    if args.profile:
        pstats.Stats(profiler).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(
            int(os.environ.get("PROFILE_TOP", "40"))
        )


if __name__ == "__main__":
    main()
