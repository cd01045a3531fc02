"""Our engine and llama-benchy against the same llama.cpp server, each request held against the
server's own timings (issue 17, Must show 1).

Rounds alternate which tool goes first; within a round each prompt size gets `--runs` requests
from each tool. Every request is matched to what the server measured for it:
  * ours: the streamed answer's own `timings` block (prompt_n, prompt_ms, predicted_*);
  * llama-benchy: the difference of llama.cpp's /metrics counters (prompt tokens and seconds,
    predicted tokens and seconds) taken by its --post-run-cmd after each of its runs.
Per request: prefill ÷ the server's prompt rate, decode ÷ the server's predicted rate, and for
ours the client's share of TTFT (worker.rules.timings.ttft_split).

    .venv/bin/python bench/engine_fidelity.py                      # starts its own SmolLM2 server
    .venv/bin/python bench/engine_fidelity.py --rounds 3 --runs 3 --out /tmp/fidelity.json
    .venv/bin/python bench/engine_fidelity.py --threads 1     # leave the client a core

llama-benchy 0.4.0 runs from its own virtualenv (--benchy-venv; `pip install llama-benchy==0.4.0
gguf==0.19.0` there): its tokenizer is rebuilt from the GGUF (bench/gguf_tokenizer.py) and its
corpus, normally a downloaded book, is our own text in its download cache
(bench/sweep_fidelity.py's prepare_benchy).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sweep_fidelity import BOOK_URL, prepare_benchy  # noqa: E402
from worker.engine.metrics import request_metrics  # noqa: E402
from worker.engine.providers import ChatRequest, OpenAIProvider  # noqa: E402
from worker.engine.suites import RunContext, available_suites  # noqa: E402
from worker.engine.suites.prompts import new_nonce, speed_messages  # noqa: E402
from worker.engine.testing.xllama_launcher import MODEL_ALIAS, start_server  # noqa: E402
from worker.engine.transport import Transport  # noqa: E402
from worker.rules.stats import median, percentile  # noqa: E402

METRIC = re.compile(r"^llamacpp:(\w+) ([0-9.eE+-]+)$", re.MULTILINE)


def _p90(values: list[float]) -> float | None:
    clean = sorted(v for v in values if v is not None)
    return round(percentile(clean, 0.9), 4) if clean else None


class Ours:
    """Our provider, with prompts sized by the speed suite's own calibration."""

    def __init__(self, url: str):
        self.provider = OpenAIProvider(
            Transport(url, timeout=600), MODEL_ALIAS, supports_ignore_eos=True
        )
        self.suite = available_suites()["speed"]
        self.ctx = RunContext(provider=self.provider, trials=1)
        self.suite.prepare(self.ctx)
        self.instruction = self.suite.tasks[0]["speed"]["instruction"]

    def request(self, pp: int, tg: int) -> dict:
        task = {"speed": {"prompt_tokens": pp, "instruction": self.instruction}}
        words = self.suite._filler_words(task, self.ctx)
        response = self.provider.chat_stream(
            ChatRequest(
                messages=speed_messages(new_nonce(), self.instruction, words),
                max_tokens=tg,
                temperature=0.0,
                ignore_eos=True,
            )
        )
        m = request_metrics(response)
        return {
            "prompt_tokens": m["prompt_tokens"],
            "prefill_ratio": m["prefill_ratio_vs_server"],
            "decode_ratio": m["decode_ratio_vs_server"],
            "ttft_ms": m["ttft_ms"],
            "ttft_minus_prompt_ms": m["ttft_minus_server_prompt_ms"],
            "ttft_client_ms": m["ttft_client_ms"],
            "ttft_server_setup_ms": m["ttft_server_setup_ms"],
            "new_connection": m["timings"]["new_connection"],
        }


def _counters(text: str) -> dict[str, float]:
    return {name: float(value) for name, value in METRIC.findall(text)}


class Benchy:
    """llama-benchy's own CLI, one invocation per cell, /metrics snapshotted after each run."""

    def __init__(self, url: str, venv: Path, work: Path):
        self.url, self.python, self.work = url, str(venv / "bin" / "python"), work
        # The same offline set-up as the sweep bench: a tokenizer.json from the GGUF and our own
        # corpus in llama-benchy's download cache.
        self.tokenizer = prepare_benchy(venv, work)
        self.version = subprocess.run(
            [self.python, "-m", "llama_benchy", "--version"], capture_output=True, text=True
        ).stdout.strip()

    def cell(self, pp: int, tg: int, runs: int) -> tuple[list[dict], str]:
        snaps = self.work / f"snaps-{pp}-{os.getpid()}.txt"
        snaps.unlink(missing_ok=True)
        out = self.work / f"benchy-{pp}.json"
        take = f"(curl -s {self.url}/metrics; echo '#SNAP') >> {snaps}"
        proc = subprocess.run(
            [self.python, "-m", "llama_benchy", "--base-url", f"{self.url}/v1"]
            + ["--model", MODEL_ALIAS, "--tokenizer", str(self.tokenizer)]
            + ["--pp", str(pp), "--tg", str(tg), "--runs", str(runs), "--exact-tg"]
            + ["--skip-coherence", "--book-url", BOOK_URL]
            + ["--format", "json", "--save-result", str(out)]
            + ["--post-run-cmd", take],
            capture_output=True,
            text=True,
        )
        text = snaps.read_text() if snaps.exists() else ""
        # Block 0: after the warm-up run; then one per measured run.
        blocks = [_counters(b) for b in text.split("#SNAP") if b.strip()]
        deltas = [
            {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
            for before, after in zip(blocks, blocks[1:], strict=False)
        ]
        if proc.returncode != 0 or not out.exists():
            return [], proc.stdout[-2000:] + proc.stderr[-2000:]
        report = json.loads(out.read_text())
        run = next(r for r in report["benchmarks"] if not r["is_context_prefill_phase"])
        pp_values = (run.get("pp_throughput") or {}).get("values") or []
        tg_values = (run.get("tg_throughput") or {}).get("values") or []
        ttft = (run.get("e2e_ttft") or {}).get("values") or []
        # A run llama-benchy dropped (a refused connection: it prints the error and moves on)
        # left the counters unchanged; its values list skips it, so skip its delta too.
        served = [d for d in deltas if d.get("tokens_predicted_total", 0) > 0]
        dropped = len(deltas) - len(pp_values)
        rows = []
        for d, pp_v, tg_v, t in zip(served, pp_values, tg_values, ttft, strict=False):
            prompt_rate = d["prompt_tokens_total"] / d["prompt_seconds_total"]
            decode_rate = d["tokens_predicted_total"] / d["tokens_predicted_seconds_total"]
            rows.append(
                {
                    "prompt_tokens_evaluated": d["prompt_tokens_total"],
                    "prefill_ratio": round(pp_v / prompt_rate, 4),
                    "decode_ratio": round(tg_v / decode_rate, 4),
                    "ttft_ms": round(t, 3),
                    "ttft_minus_prompt_ms": round(t - d["prompt_seconds_total"] * 1000, 3),
                }
            )
        note = f"{dropped} of {len(deltas)} runs dropped by llama-benchy" if dropped > 0 else ""
        return rows, note


def run(args: argparse.Namespace) -> dict:
    server = None
    url = args.url
    if not url:
        # The GGUF's own chat template, as a llama-server user gets it (its system prompt is a
        # cached prefix: the error issue 17 found).
        server = start_server(n_ctx=4096, threads=args.threads, tools_template=False)
        url = server.base_url
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ours, benchy = Ours(url), Benchy(url, args.benchy_venv, Path(tmp))
            results: dict[str, dict[str, list]] = {
                tool: {str(pp): [] for pp in args.pp} for tool in ("ours", "benchy")
            }
            notes: list[str] = []
            for rnd in range(args.rounds):
                for pp in args.pp if rnd % 2 == 0 else list(reversed(args.pp)):
                    order = ("ours", "benchy") if rnd % 2 == 0 else ("benchy", "ours")
                    for tool in order:
                        if tool == "ours":
                            for _ in range(args.runs):
                                results["ours"][str(pp)].append(ours.request(pp, args.tg))
                        else:
                            rows, note = benchy.cell(pp, args.tg, args.runs)
                            results["benchy"][str(pp)].extend(rows)
                            if note:
                                notes.append(f"pp {pp}, round {rnd + 1}: {note}")
                    print(f"round {rnd + 1} pp {pp} done", file=sys.stderr)
            ours.provider.close()
            version = benchy.version
    finally:
        if server is not None:
            server.stop()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs), load {os.getloadavg()[0]:.1f}",
        "server": "xllamacpp (llama.cpp) SmolLM2-135M-Instruct Q4_1, its own chat template",
        "llama_benchy": version,
        "settings": {
            "rounds": args.rounds,
            "runs": args.runs,
            "tg": args.tg,
            "pp": args.pp,
            "server_threads": None if args.url else args.threads,
        },
        "summary": _summary(results),
        "notes": notes,
        "requests": results,
    }


def _summary(results: dict) -> dict:
    out: dict = {}
    for tool, cells in results.items():
        for pp, rows in cells.items():
            cell = {
                "n": len(rows),
                "prefill_ratio_median": median((r["prefill_ratio"] for r in rows), digits=4),
                "decode_ratio_median": median((r["decode_ratio"] for r in rows), digits=4),
                "ttft_minus_prompt_ms_median": median(
                    (r["ttft_minus_prompt_ms"] for r in rows), digits=4
                ),
            }
            if tool == "ours":
                client = [r["ttft_client_ms"] for r in rows]
                cell["ttft_client_ms_median"] = median(client, digits=4)
                cell["ttft_client_ms_p90"] = _p90(client)
                cell["new_connections"] = sum(bool(r["new_connection"]) for r in rows)
            out.setdefault(tool, {})[pp] = cell
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running llama.cpp server (default: start one)")
    parser.add_argument("--benchy-venv", type=Path, default=Path("/work/venv-benchy"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tg", type=int, default=64)
    parser.add_argument("--pp", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument(
        "--threads", type=int, default=2, help="the started server's compute threads"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = run(args)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "requests"}, indent=2))


if __name__ == "__main__":
    main()
