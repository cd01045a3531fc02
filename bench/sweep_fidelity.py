"""Our depth and concurrency sweeps against llama-benchy's: the same llama.cpp server, interleaved.

    python bench/sweep_fidelity.py [--rounds 2] [--depths 0,1024,2048] [--concurrency 1,2,4]
                                   [--pp 128] [--tg 32] [--runs 3] [--out FILE.json]

One server (SmolLM2-135M, 4 slots in one unified KV buffer of 16,384 tokens, as llama-server sets
up when it picks the slot count itself; the GGUF's own chat template) serves both tools.
Each round measures every cell with both tools back to back, who goes first alternating from cell
to cell and round to round; llama-benchy's depth cells use ``--enable-prefix-caching`` (a
context-load request, then the measured one), as ours do. llama-benchy runs from its own venv
(``$BENCHY_VENV``, default /work/venv-benchy), its runner kept running between cells
(bench/benchy_driver.py), so the two tools' cells are seconds apart, with a tokenizer.json built
from the same GGUF (bench/gguf_tokenizer.py) and a corpus of our own filler text (no network,
never repeating: words drawn at random from our notes). Figures are means
over a cell's trials (llama-benchy reports means), then over rounds: ours ÷ benchy per cell.

Prefill at depth is compared three ways: as our bundle records it (``prefill_tps`` from
worker.engine.metrics.request_metrics), as the server-evaluated new tokens ÷ TTFT, and as the
tokens the server's log says it evaluated for each tool's requests ÷ that tool's own TTFT (one
count for both tools: llama-benchy divides the pp it asked for, without the turn markers the
server evaluates with it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from worker.engine.orchestrator import execute, prepare_run  # noqa: E402
from worker.engine.plan import RunConfig  # noqa: E402
from worker.engine.suites.prompts import NOTES  # noqa: E402
from worker.engine.testing.xllama_launcher import (  # noqa: E402
    MODEL_ALIAS,
    model_path,
    start_server,
)

BOOK_URL = "http://benchloop.invalid/harbour-notes.txt"


def _mean(values: list[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return statistics.fmean(clean) if clean else None


def prepare_benchy(venv: Path, work: Path) -> Path:
    """tokenizer.json from the GGUF, and our own corpus in llama-benchy's download cache."""
    tokenizer = subprocess.run(
        [
            str(venv / "bin/python"),
            str(REPO / "bench/gguf_tokenizer.py"),
            str(model_path()),
            str(work),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    cache = Path.home() / ".cache/llama-benchy"
    cache.mkdir(parents=True, exist_ok=True)
    # Words drawn at random (seeded) from our notes: no stretch of the corpus repeats, so two of
    # llama-benchy's prompts never share a prefix that the server's cache could serve (a corpus
    # that repeated made its depth-0 prompts partly cached, and its TTFT and prefill with them).
    words = " ".join(NOTES).split()
    rng = random.Random(1729)
    lines = (" ".join(rng.choice(words) for _ in range(14)) + "." for _ in range(5000))
    text = "\n".join(lines) + "\n"
    (cache / f"{hashlib.md5(BOOK_URL.encode()).hexdigest()}.txt").write_text(text)
    return Path(tokenizer)


class Benchy:
    """llama-benchy's runner kept running (bench/benchy_driver.py in its venv): a cell a call."""

    def __init__(self, venv: Path, tokenizer: Path, url: str, args) -> None:
        command = [str(venv / "bin/python"), str(REPO / "bench/benchy_driver.py")]
        command += ["--base-url", f"{url}/v1", "--model", MODEL_ALIAS]
        command += ["--tokenizer", str(tokenizer), "--book-url", BOOK_URL, "--skip-coherence"]
        command += ["--pp", str(args.pp), "--tg", str(args.tg), "--runs", str(args.runs)]
        command += ["--enable-prefix-caching", "--exact-tg", "--latency-mode", "none"]
        # Our sweep samples greedily (temperature 0); llama-benchy sends no temperature, so the
        # server would sample its requests with its default chain: the same sampling for both.
        command += ["--extra-body", json.dumps({"temperature": 0.0})]
        self.log = open(Path(tempfile.mkdtemp()) / "benchy.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        self.runs = args.runs

    def measure(self, *, depth: int, concurrency: int) -> list[dict]:
        assert self.process.stdin and self.process.stdout
        ask = {"depth": depth, "concurrency": concurrency, "runs": self.runs}
        self.process.stdin.write(json.dumps(ask) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self.log.flush()
            tail = Path(self.log.name).read_text()[-3000:]
            raise SystemExit(f"llama-benchy stopped:\n{tail}")
        return json.loads(line)["benchmarks"]

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        self.log.close()


def _ours(url: str, home: Path, args, *, kind: str) -> dict[str, Any]:
    config = RunConfig(
        url=url,
        profile="speed-deep",
        trials=args.runs,
        tasks=[f"sweep-{kind}-*"],
        home=home,
        sweep_depths=args.depths,
        sweep_concurrency=args.concurrency,
        sweep_prompt_tokens=args.pp,
        sweep_output_tokens=args.tg,
        hash_weights=False,
    )
    prep = prepare_run(config)
    try:
        bundle = execute(prep).bundle
    finally:
        prep.provider.close()
    return {"sweeps": bundle["sweeps"], "tasks": bundle["suites"]["speed_sweep"]["tasks"]}


def _our_depth(run: dict[str, Any]) -> dict[int, dict[str, float | None]]:
    out = {}
    for task in run["tasks"]:
        cell, trials = task["metadata"]["cell"], [t for t in task["metadata"]["trials"] if t["ok"]]
        if cell["status"] != "measured":
            continue
        out[cell["depth"]] = {
            "decode": cell["decode_tps"]["mean"],
            "prefill_recorded": cell["prefill_tps"]["mean"],
            "prefill_evaluated": _mean(
                [t["prefill_tokens"] / (t["ttft_ms"] / 1000) for t in trials if t["ttft_ms"]]
            ),
            "ttft": cell["ttft_ms"]["mean"],
            "depth_tokens": cell["depth_tokens"],
            "new_tokens": cell["prompt_tokens"],
        }
    return out


def _our_concurrency(run: dict[str, Any]) -> dict[int, dict[str, float | None]]:
    out = {}
    for cell in run["sweeps"]["concurrency"]["cells"]:
        if cell["status"] == "measured":
            out[cell["streams"]] = {
                "aggregate_decode": cell["aggregate_decode_tps"],
                "aggregate_e2e": cell["aggregate_tps"],
                "per_stream": cell["per_stream_tps"]["mean"],
                "ttft": cell["ttft_ms"]["mean"],
            }
    return out


def _metric(run: dict, key: str) -> float | None:
    value = run.get(key)
    return value["mean"] if isinstance(value, dict) else None


def _benchy_depth(runs: list[dict]) -> dict[int, dict[str, float | None]]:
    out = {}
    for run in runs:
        if run["is_context_prefill_phase"]:
            continue
        out[run["context_size"]] = {
            "decode": _metric(run, "tg_throughput"),
            "prefill": _metric(run, "pp_throughput"),
            "ttft": _metric(run, "e2e_ttft"),
        }
    return out


def _benchy_concurrency(runs: list[dict]) -> dict[int, dict[str, float | None]]:
    return {
        run["concurrency"]: {
            "aggregate_decode": _metric(run, "tg_throughput"),
            "per_stream": _metric(run, "tg_req_throughput"),
            "ttft": _metric(run, "e2e_ttft"),
        }
        for run in runs
    }


def _cell(who, kind, level, server, work, benchy, args) -> dict[int, dict]:
    """One cell measured by one tool: {level: figures, with the server's own for its requests}."""
    start = server.log_path.stat().st_size
    figures = _tool_cell(who, kind, level, server.base_url, work, benchy, args)
    with open(server.log_path, "rb") as log:
        log.seek(start)
        text = log.read().decode("utf-8", "replace")
    # Excluded warm-ups: llama-benchy's run 0 of every cell (c requests; at depth, one inference
    # after its context load), and our warm-up round of each concurrency level.
    warmups = level if kind == "concurrency" else (1 if who == "benchy" else 0)
    for row in figures.values():
        row["server"] = _server_figures(_server_requests(text), args, warmups)
    return figures


def _tool_cell(who, kind, level, url, work, benchy: Benchy, args) -> dict[int, dict]:
    if who == "ours":
        one = argparse.Namespace(**vars(args))
        if kind == "depth":
            one.depths = [level]
        else:
            one.concurrency = [level]
        run = _ours(url, work / "home", one, kind=kind)
        return (_our_depth if kind == "depth" else _our_concurrency)(run)
    if kind == "depth":
        return _benchy_depth(benchy.measure(depth=level, concurrency=1))
    return _benchy_concurrency(benchy.measure(depth=0, concurrency=level))


_TIMING = re.compile(
    r"^(?P<clock>[\d.]+) I slot print_timing: id +\d+ \| task (?P<task>\d+) \| +"
    r"(?P<what>prompt eval|eval) time = +(?P<ms>[\d.]+) ms / +(?P<n>\d+) tokens"
)


def _clock_s(text: str) -> float:
    """The server log's clock, ``[h.]m.ss.mmm.uuu`` since it started, in seconds."""
    *head, ms, us = (int(p) for p in text.split("."))
    seconds = 0.0
    for part in head:
        seconds = seconds * 60 + part
    return seconds + ms / 1e3 + us / 1e6


def _server_requests(text: str) -> list[dict[str, float]]:
    """Every finished request in a slice of llama-server's log: its own prompt and decode timing."""
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = _TIMING.match(line)
        if not match:
            continue
        entry = found.setdefault(match["task"], {})
        key = "prompt" if match["what"] == "prompt eval" else "eval"
        entry[f"{key}_ms"], entry[f"{key}_n"] = float(match["ms"]), int(match["n"])
        if key == "eval":
            entry["end_s"] = _clock_s(match["clock"])
    return [e for e in found.values() if "eval_n" in e and "prompt_n" in e]


def _server_figures(
    requests: list[dict[str, float]], args, warmups: int
) -> dict[str, float | None]:
    """The server's own rates for the requests a tool measured in one cell: every request that
    decoded tg tokens on a prompt of about pp new tokens (context loads and one-token
    calibrations are left out), less the tool's ``warmups`` (they finish first)."""
    shaped = sorted(
        (
            r
            for r in requests
            if r["eval_n"] == args.tg and r["prompt_n"] <= 1.5 * args.pp + 48 and r["eval_ms"] > 0
        ),
        key=lambda r: r["end_s"],
    )[warmups:]
    if not shaped:
        return {"decode": None, "prefill": None, "aggregate_decode": None, "prompt_n": None, "n": 0}
    # Decode windows on the server's clock; their union is the time anything was decoding.
    spans = sorted((r["end_s"] - r["eval_ms"] / 1e3, r["end_s"]) for r in shaped)
    busy, start, end = 0.0, spans[0][0], spans[0][1]
    for a, b in spans[1:]:
        if a > end:
            busy, start = busy + end - start, a
        end = max(end, b)
    busy += end - start
    return {
        "decode": statistics.fmean(1e3 * (r["eval_n"] - 1) / r["eval_ms"] for r in shaped),
        "prefill": statistics.fmean(1e3 * r["prompt_n"] / r["prompt_ms"] for r in shaped),
        "aggregate_decode": sum(r["eval_n"] - 1 for r in shaped) / busy if busy > 0 else None,
        "prompt_n": statistics.fmean(r["prompt_n"] for r in shaped),
        "n": len(shaped),
    }


def _rounds_mean(rounds: list[dict[int, dict]], cell: int, key: str) -> float | None:
    return _mean([r.get(cell, {}).get(key) for r in rounds])


def _round_ratios(ours: list, theirs: list, cell: int, key: str, their_key: str) -> list:
    """Ours ÷ benchy in each round (the pair measured minutes apart): the spread of the ratio."""
    return [
        _ratio(o.get(cell, {}).get(key), b.get(cell, {}).get(their_key))
        for o, b in zip(ours, theirs, strict=True)
    ]


def _vs_server(rounds: list[dict[int, dict]], cell: int, key: str, server_key: str) -> list:
    """A tool's figure ÷ the server's own for the same requests, in each round."""
    out = []
    for r in rounds:
        row = r.get(cell, {})
        out.append(_ratio(row.get(key), (row.get("server") or {}).get(server_key)))
    return out


def _fidelity(ours: list, theirs: list, cell: int, key: str, their_key: str, server_key: str):
    """Each tool against the server's clock, and ours ÷ benchy with the load's swings divided
    out: (ours ÷ server) ÷ (benchy ÷ server), round by round."""
    mine = _vs_server(ours, cell, key, server_key)
    other = _vs_server(theirs, cell, their_key, server_key)
    paired = [_ratio(a, b) for a, b in zip(mine, other, strict=True)]
    return {
        "ours_vs_server": mine,
        "benchy_vs_server": other,
        "normalised_ratio": paired,
        "normalised_ratio_mean": _ratio(_mean(paired), 1.0),
    }


def _same_count(rounds: list[dict[int, dict]], cell: int) -> float | None:
    """Prefill as the tokens the server says it evaluated for a tool's requests ÷ that tool's
    own TTFT: the tools' clocks compared on one count (llama-benchy counts the pp it asked for,
    not the turn markers the server evaluates with it)."""
    rates = []
    for r in rounds:
        row = r.get(cell, {})
        evaluated, ttft = (row.get("server") or {}).get("prompt_n"), row.get("ttft")
        rates.append(1e3 * evaluated / ttft if evaluated and ttft else None)
    return _mean(rates)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a and b else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--depths", default="0,1024,2048")
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--pp", type=int, default=128)
    parser.add_argument("--tg", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--slot-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2, help="the server's threads")
    parser.add_argument("--out", default=str(REPO / "bench/sweep_fidelity.json"))
    args = parser.parse_args()
    args.depths = [int(d) for d in args.depths.split(",")]
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    venv = Path(os.environ.get("BENCHY_VENV", "/work/venv-benchy"))
    work = Path(tempfile.mkdtemp(prefix="sweep-fidelity-"))
    tokenizer = prepare_benchy(venv, work)
    server = start_server(
        n_ctx=args.slots * args.slot_ctx,
        parallel=args.slots,
        threads=args.threads,
        tools_template=False,
        log_dir=work,
        # With the slots' KV apart, two streams on slots with ids that are not consecutive
        # decode in turn, at half speed, so a cell's figure would depend on which slots the
        # server chose (bench/README.md, "Issue 17: sweeps").
        kv_unified=True,
    )
    ours: dict[str, list] = {"depth": [], "concurrency": []}
    theirs: dict[str, list] = {"depth": [], "concurrency": []}
    cells = [("depth", d) for d in args.depths] + [("concurrency", c) for c in args.concurrency]
    benchy = Benchy(venv, tokenizer, server.base_url, args)
    try:
        for index in range(args.rounds):
            parts: dict[str, dict[str, dict]] = {
                "ours": {"depth": {}, "concurrency": {}},
                "benchy": {"depth": {}, "concurrency": {}},
            }
            for position, (kind, level) in enumerate(cells):
                # Cell by cell, and who goes first alternates, so drift in the load cancels.
                order = ("ours", "benchy") if (index + position) % 2 == 0 else ("benchy", "ours")
                for who in order:
                    print(f"round {index + 1}: {kind} {level}: {who}", flush=True)
                    parts[who][kind].update(_cell(who, kind, level, server, work, benchy, args))
            for kind in ("depth", "concurrency"):
                ours[kind].append(parts["ours"][kind])
                theirs[kind].append(parts["benchy"][kind])
            # Written after every round, so a run stopped early keeps what it measured.
            report = _report(args, ours, theirs)
            Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
            _print(report)
    finally:
        benchy.close()
        server.stop()


def _report(args, ours: dict[str, list], theirs: dict[str, list]) -> dict[str, Any]:
    depth_rows = []
    for d in args.depths:
        row: dict[str, Any] = {"depth": d}
        for key in ("depth_tokens", "new_tokens"):
            row[key] = _rounds_mean(ours["depth"], d, key)
        for ours_key, their_key in (
            ("decode", "decode"),
            ("prefill_evaluated", "prefill"),
            ("prefill_recorded", "prefill"),
            ("ttft", "ttft"),
        ):
            a = _rounds_mean(ours["depth"], d, ours_key)
            b = _rounds_mean(theirs["depth"], d, their_key)
            row[ours_key] = {"ours": a, "benchy": b, "ratio": _ratio(a, b)}
            row[ours_key]["round_ratios"] = _round_ratios(
                ours["depth"], theirs["depth"], d, ours_key, their_key
            )
            if ours_key != "ttft":
                server_key = "decode" if ours_key == "decode" else "prefill"
                row[ours_key].update(
                    _fidelity(ours["depth"], theirs["depth"], d, ours_key, their_key, server_key)
                )
        a, b = _same_count(ours["depth"], d), _same_count(theirs["depth"], d)
        row["prefill_same_count"] = {"ours": a, "benchy": b, "ratio": _ratio(a, b)}
        depth_rows.append(row)
    conc_rows = []
    for c in args.concurrency:
        row = {"streams": c}
        row["aggregate_e2e_ours"] = _rounds_mean(ours["concurrency"], c, "aggregate_e2e")
        for key in ("aggregate_decode", "per_stream", "ttft"):
            a = _rounds_mean(ours["concurrency"], c, key)
            b = _rounds_mean(theirs["concurrency"], c, key)
            row[key] = {"ours": a, "benchy": b, "ratio": _ratio(a, b)}
            row[key]["round_ratios"] = _round_ratios(
                ours["concurrency"], theirs["concurrency"], c, key, key
            )
            if key != "ttft":
                server_key = "decode" if key == "per_stream" else "aggregate_decode"
                row[key].update(
                    _fidelity(ours["concurrency"], theirs["concurrency"], c, key, key, server_key)
                )
        conc_rows.append(row)
    return {
        "command": " ".join(sys.argv),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "load_average": os.getloadavg(),
        "settings": {
            "rounds": args.rounds,
            "pp": args.pp,
            "tg": args.tg,
            "runs": args.runs,
            "slots": args.slots,
            "slot_ctx": args.slot_ctx,
            "threads": args.threads,
        },
        "depth": depth_rows,
        "concurrency": conc_rows,
        "raw": {"ours": ours, "benchy": theirs},
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _cell_text(figure: dict[str, Any]) -> str:
    text = f"{_fmt(figure['ours'])} / {_fmt(figure['benchy'])} ({_fmt(figure['ratio'], 3)}"
    if "normalised_ratio_mean" in figure:
        text += f"; {_fmt(figure['normalised_ratio_mean'], 3)}"
    return text + ")"


def _print(report: dict[str, Any]) -> None:
    """Markdown tables: ours / benchy (raw ratio; ratio with each tool held to the server)."""
    print(
        "\n| depth | cached | decode | prefill, evaluated ÷ TTFT | prefill as recorded"
        " | prefill, server's count ÷ each TTFT | TTFT ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in report["depth"]:
        keys = ("decode", "prefill_evaluated", "prefill_recorded", "prefill_same_count", "ttft")
        cells = " | ".join(_cell_text(row[k]) for k in keys)
        print(f"| {row['depth']} | {_fmt(row['depth_tokens'], 0)} | {cells} |")
    print("\n| streams | aggregate decode | per stream | TTFT ms | ours, sends to last token |")
    print("|---|---|---|---|---|")
    for row in report["concurrency"]:
        cells = " | ".join(_cell_text(row[k]) for k in ("aggregate_decode", "per_stream", "ttft"))
        print(f"| {row['streams']} | {cells} | {_fmt(row['aggregate_e2e_ours'])} |")


if __name__ == "__main__":
    main()
