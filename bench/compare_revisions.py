"""The upload, import and read benchmarks on two revisions, alternated on this machine.

Each revision gets a worktree of its own (under $TMPDIR) and runs this checkout's benchmark
scripts (copied into it) with this checkout's virtualenv, round after round, A then B, so that
a drift of the shared machine falls on both. Prints every round and the medians; quote one run.

    .venv/bin/python bench/compare_revisions.py OLD NEW [--rounds 3] [--seed-runs 20000]

Figures: in-process upload (`upload_profile.py`: ms per upload, web and Postgres CPU),
gunicorn upload load (`load_submit.py --uploads 1500`: accepted/s, p50), import
(`import_speed.py --bundles 1000`: bundles/s) and reads (`leaderboard_render.py` on a database
seeded by each revision's own `seed_demo --runs N`: default view warm and cold, ms).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SCRIPTS = (
    "loadlib.py",
    "upload_profile.py",
    "load_submit.py",
    "import_speed.py",
    "leaderboard_render.py",
)
FIGURES = {
    "upload ms (in-process)": ("upload", r"uploads: ([\d.]+) ms each"),
    "upload web CPU ms": ("upload", r"web process ([\d.]+) ms"),
    "upload Postgres CPU ms": ("upload", r"Postgres backend ([\d.]+) ms"),
    "uploads accepted/s (gunicorn)": ("load", r"accepted \(200\+201\): ([\d.]+)/s"),
    "upload p50 ms (gunicorn)": ("load", r"accepted uploads: p50 (\d+) ms"),
    "import bundles/s": ("import", r": ([\d.]+) bundles/s"),
    "board warm ms": ("read", r"\| leaderboard, default view \(`[^`]*`\) \| ([\d.]+) \|"),
    "board cold ms": ("read-cold", r"\| leaderboard, default view \(`[^`]*`\) \| ([\d.]+) \|"),
}


def worktree(revision: str) -> Path:
    sha = subprocess.run(
        ["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"benchloop-rev-{sha}"
    if not path.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(path), sha], cwd=REPO, check=True)
    # One measuring stick for both: this checkout's benchmark scripts, run on each tree's code
    # (an older tree's own copies can lag behind its output formats).
    for script in SCRIPTS:
        shutil.copy2(REPO / "bench" / script, path / "bench" / script)
    return path


def run(tree: Path, *args: str, env: dict | None = None, check: bool = True) -> str:
    """One benchmark script of the tree; its output. ``check=False`` keeps the figures of a
    script whose own correctness check failed (the failure is printed, not fatal)."""
    done = subprocess.run(
        [PYTHON, *args],
        cwd=tree,
        # The worktrees sit outside the checkout: the fixtures stay where this one finds them.
        env={
            "BENCHLOOP_FIXTURES_DIR": str(REPO.parent / "shared/fixtures/benchloop"),
            **os.environ,
            "PYTHONPATH": str(tree),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0 and not check:
        problems = done.stdout.count("PROBLEM:")
        print(f"{tree.name}: {' '.join(args)}: its check failed ({problems} problems)", flush=True)
    elif done.returncode != 0:
        raise SystemExit(f"{tree.name}: {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def seed(tree: Path, db: str, runs: int) -> dict:
    env = {"DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{db}", "DEBUG": "True"}
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE IF EXISTS {db}",
         "-c", f"CREATE DATABASE {db}"],
        check=True, capture_output=True,
    )  # fmt: skip
    run(tree, "manage.py", "migrate", "-v", "0", env=env)
    run(tree, "manage.py", "seed_demo", "--runs", str(runs), env=env)
    return env


def one_round(tree: Path, db_env: dict) -> dict[str, str]:
    return {
        "upload": run(tree, "bench/upload_profile.py", "--uploads", "200"),
        # Its answers' check is reported, not fatal: the figures still compare the two trees.
        "load": run(tree, "bench/load_submit.py", "--uploads", "1500", check=False),
        "import": run(tree, "bench/import_speed.py", "--bundles", "1000"),
        # Warm pages take ~3 ms: 10 of them measured the cache's state more than the code (1.20x
        # in one table, equal over 300); the default view alone, 300 times.
        "read": run(
            tree,
            "bench/leaderboard_render.py",
            "--repeat",
            "300",
            "--only",
            "default view",
            env=db_env,
        ),
        "read-cold": run(
            tree, "bench/leaderboard_render.py", "--repeat", "10", "--cold", env=db_env
        ),
    }


def figures(outputs: dict[str, str]) -> dict[str, float]:
    found = {}
    for name, (source, pattern) in FIGURES.items():
        match = re.search(pattern, outputs[source])
        if match:
            found[name] = float(match.group(1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed-runs", type=int, default=20000)
    args = parser.parse_args()
    trees = {args.old: worktree(args.old), args.new: worktree(args.new)}
    dbs = {
        rev: seed(tree, f"benchloop_rev_{i}", args.seed_runs)
        for i, (rev, tree) in enumerate(trees.items())
    }
    rounds: dict[str, list[dict[str, float]]] = {rev: [] for rev in trees}
    for number in range(1, args.rounds + 1):
        for rev, tree in trees.items():
            load = os.getloadavg()[0]
            rounds[rev].append(figures(one_round(tree, dbs[rev])))
            print(f"round {number} {rev}: {rounds[rev][-1]} (load {load:.1f})", flush=True)
    print(f"\n| Figure | {args.old} (median of {args.rounds}) | {args.new} | new ÷ old |")
    print("|---|---:|---:|---:|")
    for name in FIGURES:
        old = [r[name] for r in rounds[args.old] if name in r]
        new = [r[name] for r in rounds[args.new] if name in r]
        if old and new:
            a, b = statistics.median(old), statistics.median(new)
            print(f"| {name} | {a:.1f} | {b:.1f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
