"""Import speed: `manage.py import_results` (parser processes, COPY writes) on N generated v3
run bundles, one file each.

The bundles are the upload benchmark's (`bench/load_submit.py`): the smoke-profile fixture as
bundle 1 (~30 KB, 3 suites, 39 tasks, 27 speed trials), each with its own model, GPU, time and
scores. The command runs once on a fresh Postgres database (timed, wall clock including
Django's start-up), then again on the same files to show that a second import adds nothing.

Usage: .venv/bin/python bench/import_speed.py [--bundles 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_submit import make_bundle, template  # noqa: E402
from loadlib import REPO, fresh_database, load_average, server_env  # noqa: E402

DB = "benchloop_load"


def count_rows(env: dict[str, str]) -> dict[str, int]:
    code = (
        "import json; from runs.models import Run, TaskResult, SpeedSample, Stack;"
        "print(json.dumps({'runs': Run.objects.count(), 'tasks': TaskResult.objects.count(),"
        "'samples': SpeedSample.objects.count(), 'stacks': Stack.objects.count(),"
        "'published': Run.objects.filter(published=True).count()}))"
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def timed_import(env: dict[str, str], folder: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", "import_results", str(folder)],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    # The "total:" line; the lines after it say what the plausibility checks held back.
    total = [line for line in done.stdout.splitlines() if line.startswith("total:")]
    return time.perf_counter() - started, total[-1] if total else done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundles", type=int, default=2000)
    args = parser.parse_args()

    env = server_env(DB)
    fresh_database(DB)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True
    )
    folder = Path(tempfile.mkdtemp(prefix="benchloop-import-"))
    try:
        rng = random.Random(3)
        base = template()
        for number in range(args.bundles):
            bundle = make_bundle(base, rng, number, client=number % 32)
            (folder / f"run-{number:05d}.json").write_text(json.dumps(bundle))
        size = sum(p.stat().st_size for p in folder.iterdir()) / args.bundles / 1024
        before = load_average()
        seconds, total = timed_import(env, folder)
        after = load_average()
        rows = count_rows(env)
        again, total_again = timed_import(env, folder)
        rows_again = count_rows(env)
    finally:
        shutil.rmtree(folder)
    created = int(re.search(r"(\d+) created", total).group(1))
    print(f"{args.bundles} bundles of {size:.1f} KiB on average")
    print(
        f"first import: {total} in {seconds:.1f} s: {created / seconds:.1f} bundles/s, "
        f"{rows['tasks'] / seconds:,.0f} task rows/s ({rows})"
    )
    print(f"second import: {total_again} in {again:.1f} s; rows unchanged: {rows == rows_again}")
    print(f"load average (1, 5, 15 min) before: {before}; after: {after}")
    if created != args.bundles or rows != rows_again or rows["runs"] != args.bundles:
        sys.exit("FAILED: the import did not create exactly one run per bundle, once")


if __name__ == "__main__":
    main()
