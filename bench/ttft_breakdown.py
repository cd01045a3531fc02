"""Where the client's share of TTFT goes (issue 17, Must show 1): each part of a streamed request,
on our own engine's request path, against one llama.cpp server.

For every request the clock readings are (ms after the request was handed to httpx):
  written      our part of writing the request done (Transport: its CPU clock, httpcore's trace)
  headers      the response headers in
  first_byte   the first bytes of the body read from the socket (a timing httpx transport)
  first_token  our engine's first output event, parsed (StreamTiming.first_token_ms)
and the server's own prompt_ms. The client's share (worker.rules.timings.ttft_split) is then
  write    = written                              our request out
  delivery = first_byte - headers - prompt_ms     the server's sampling and send of token one,
                                                  loopback, and waking our thread to read it
  parse    = first_token - first_byte             httpx's line decoding and our SSE handling

    .venv/bin/python bench/ttft_breakdown.py --runs 20 --threads 2 1

`--threads` starts one server per value (the server's compute threads): on a machine whose cores
the server fills, its threads and ours queue for a CPU at the first token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.engine.metrics import request_metrics  # noqa: E402
from worker.engine.providers import ChatRequest, OpenAIProvider  # noqa: E402
from worker.engine.suites import RunContext, available_suites  # noqa: E402
from worker.engine.suites.prompts import new_nonce, speed_messages  # noqa: E402
from worker.engine.testing.xllama_launcher import MODEL_ALIAS, start_server  # noqa: E402
from worker.engine.transport import Transport  # noqa: E402
from worker.rules.stats import percentile  # noqa: E402


class _FirstBytes(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, marks: dict[str, float]):
        self.inner, self.marks = inner, marks

    def __iter__(self):
        for chunk in self.inner:
            self.marks.setdefault("first_byte", time.perf_counter())
            yield chunk

    def close(self) -> None:
        self.inner.close()


class TimingTransport(httpx.HTTPTransport):
    """httpx's own transport, noting when a request started and its body's first bytes came."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: dict[str, float] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.marks = {"start": time.perf_counter()}
        response = super().handle_request(request)
        response.stream = _FirstBytes(response.stream, self.marks)  # type: ignore[arg-type]
        return response


def _provider(url: str) -> tuple[OpenAIProvider, TimingTransport]:
    transport = Transport(url, timeout=600)
    timing = TimingTransport()
    old = transport.client
    transport.client = httpx.Client(
        base_url=old.base_url, headers=old.headers, timeout=old.timeout, transport=timing
    )
    old.close()
    return OpenAIProvider(transport, MODEL_ALIAS, supports_ignore_eos=True), timing


def measure(url: str, pp_sizes: list[int], runs: int, tg: int) -> dict[str, list[dict]]:
    provider, timing = _provider(url)
    suite = available_suites()["speed"]
    ctx = RunContext(provider=provider, trials=1)
    suite.prepare(ctx)
    instruction = suite.tasks[0]["speed"]["instruction"]
    rows: dict[str, list[dict]] = {str(pp): [] for pp in pp_sizes}
    for index in range(runs + 1):
        for pp in pp_sizes:
            task = {"speed": {"prompt_tokens": pp, "instruction": instruction}}
            words = suite._filler_words(task, ctx)
            response = provider.chat_stream(
                ChatRequest(
                    messages=speed_messages(new_nonce(), instruction, words),
                    max_tokens=tg,
                    temperature=0.0,
                    ignore_eos=True,
                )
            )
            if index == 0:
                continue  # one warm-up per size
            m = request_metrics(response)
            t = response.timing
            assert t is not None and response.server is not None
            # The request's t_sent lies between the call and the transport's start; the
            # transport's start is within microseconds of it (httpx's send overhead).
            first_byte = (timing.marks["first_byte"] - timing.marks["start"]) * 1000
            prompt_ms = response.server.prompt_ms or 0.0
            rows[str(pp)].append(
                {
                    "client_ms": m["ttft_client_ms"],
                    "write_ms": t.written_ms,
                    "setup_ms": m["ttft_server_setup_ms"],
                    "prompt_ms": prompt_ms,
                    "delivery_ms": first_byte - (t.headers_ms or 0.0) - prompt_ms,
                    "parse_ms": (t.first_token_ms or 0.0) - first_byte,
                    "new_connection": t.new_connection,
                }
            )
    provider.close()
    return rows


def _stat(values: list[float], q: float) -> float:
    return round(percentile(sorted(values), q), 3)


def summary(rows: dict[str, list[dict]]) -> dict[str, dict]:
    keys = ("client_ms", "write_ms", "delivery_ms", "parse_ms", "setup_ms", "prompt_ms")
    return {
        pp: {
            "n": len(cell),
            "new_connections": sum(r["new_connection"] for r in cell),
            **{
                key: {
                    "median": _stat([r[key] for r in cell], 0.5),
                    "p90": _stat([r[key] for r in cell], 0.9),
                }
                for key in keys
            },
        }
        for pp, cell in rows.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tg", type=int, default=16)
    parser.add_argument("--pp", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict = {"load_before": os.getloadavg()[0], "cpus": os.cpu_count(), "servers": {}}
    for threads in args.threads:
        server = start_server(n_ctx=4096, threads=threads, tools_template=False)
        try:
            rows = measure(server.base_url, args.pp, args.runs, args.tg)
        finally:
            server.stop()
        report["servers"][f"threads={threads}"] = {"summary": summary(rows), "requests": rows}
    report["load_after"] = os.getloadavg()[0]
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        json.dumps(
            {
                k: {t: s["summary"] for t, s in v.items()} if k == "servers" else v
                for k, v in report.items()
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
