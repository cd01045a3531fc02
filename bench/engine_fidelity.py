"""How close is the engine's client-side speed measurement to the server's own clock?

Sends streamed requests (unique nonce each, fixed output length) to a real llama.cpp server and
compares, per request:
  * our decode tok/s (TPOT over N-1 token intervals) with llama.cpp's predicted_per_second;
  * our TTFT with the server's prompt_ms (the gap is HTTP, template, tokenisation, first write);
  * our client's CPU time per streamed token;
and, on the same prompts, the naive non-streamed method (completion tokens / wall time).

    .venv/bin/python bench/engine_fidelity.py                 # starts its own SmolLM2 server
    .venv/bin/python bench/engine_fidelity.py --url http://127.0.0.1:8080 --requests 30
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.engine.detect import detect_endpoint, resolve_model  # noqa: E402
from worker.engine.hardware import detect_hardware  # noqa: E402
from worker.engine.metrics import request_metrics  # noqa: E402
from worker.engine.providers import ChatRequest, OpenAIProvider  # noqa: E402
from worker.engine.stats import summarize  # noqa: E402
from worker.engine.suites.prompts import new_nonce, speed_messages  # noqa: E402
from worker.engine.transport import Transport  # noqa: E402

INSTRUCTION = "From the notes above, write a short report on the week."
# (filler words, output tokens): ~128- and ~512-token prompts, 64- and 128-token answers.
SHAPES = [(60, 64), (60, 128), (380, 64), (380, 128)]


def _request(nonce: str, words: int, out_tokens: int) -> ChatRequest:
    return ChatRequest(
        messages=speed_messages(nonce, INSTRUCTION, words),
        max_tokens=out_tokens,
        temperature=0.0,
        ignore_eos=True,
    )


def run(url: str, requests: int, warmup: int) -> dict:
    transport = Transport(url, timeout=300)
    info = detect_endpoint(transport)
    model = resolve_model(info, None)
    provider = OpenAIProvider(transport, model, supports_ignore_eos=info.supports_ignore_eos)
    for _ in range(warmup):
        provider.chat_stream(_request(new_nonce(), 60, 16))
    streamed, naive = [], []
    for i in range(requests):
        words, out_tokens = SHAPES[i % len(SHAPES)]
        cpu0 = time.process_time()
        response = provider.chat_stream(_request(new_nonce(), words, out_tokens))
        cpu = time.process_time() - cpu0
        m = request_metrics(response)
        m["client_cpu_ms_per_token"] = 1000 * cpu / m["completion_tokens"]
        m["shape"] = [words, out_tokens]
        streamed.append(m)
        # The naive method on the same shape: one non-streamed request timed end to end.
        t0 = time.perf_counter()
        plain = provider.chat(_request(new_nonce(), words, out_tokens))
        wall = time.perf_counter() - t0
        naive_tps = plain.completion_tokens / wall
        naive.append(
            {
                "naive_tps": naive_tps,
                "server_decode_tps": plain.server.predicted_per_second,
                "naive_ratio_vs_server": naive_tps / plain.server.predicted_per_second,
                "shape": [words, out_tokens],
            }
        )
        print(
            f"{i + 1:3d}/{requests} prompt {m['prompt_tokens']:4d} out {m['completion_tokens']:3d}"
            f"  ours {m['decode_tps']:7.2f}  server {m['server_decode_tps']:7.2f}"
            f"  ratio {m['decode_ratio_vs_server']:.4f}"
            f"  ttft-prompt_ms {m['ttft_minus_server_prompt_ms']:6.2f}"
            f"  naive/server {naive[-1]['naive_ratio_vs_server']:.3f}",
            file=sys.stderr,
        )
    provider.close()
    return {
        "when": datetime.now(UTC).isoformat(),
        "engine": info.engine,
        "model": model,
        "machine": {
            "cpu": detect_hardware()["cpu_model"],
            "logical_cores": detect_hardware()["cpu_logical_cores"],
            "python": platform.python_version(),
        },
        "requests": requests,
        "warmup_excluded": warmup,
        "summary": {
            "decode_ratio_vs_server": summarize(m["decode_ratio_vs_server"] for m in streamed),
            "ttft_minus_server_prompt_ms": summarize(
                (m["ttft_minus_server_prompt_ms"] for m in streamed), higher_is_better=False
            ),
            "client_cpu_ms_per_token": summarize(
                (m["client_cpu_ms_per_token"] for m in streamed), higher_is_better=False
            ),
            "our_decode_tps": summarize(m["decode_tps"] for m in streamed),
            "server_decode_tps": summarize(m["server_decode_tps"] for m in streamed),
            "naive_ratio_vs_server": summarize(n["naive_ratio_vs_server"] for n in naive),
            "naive_tps": summarize(n["naive_tps"] for n in naive),
        },
        "streamed": [{k: v for k, v in m.items() if k != "timings"} for m in streamed],
        "naive": naive,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="existing server (default: start SmolLM2 via xllamacpp)")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "engine_fidelity.json"))
    args = parser.parse_args()
    handle = None
    url = args.url
    if not url:
        from worker.engine.testing.xllama_launcher import start_server

        handle = start_server()
        url = handle.base_url
    try:
        result = run(url, args.requests, args.warmup)
    finally:
        if handle is not None:
            handle.stop()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    s = result["summary"]
    print(f"requests: {result['requests']} streamed + {result['requests']} non-streamed")
    for key in (
        "decode_ratio_vs_server",
        "ttft_minus_server_prompt_ms",
        "client_cpu_ms_per_token",
        "naive_ratio_vs_server",
        "our_decode_tps",
        "server_decode_tps",
        "naive_tps",
    ):
        row = s[key]
        print(
            f"{key:28s} median {row['median']:9.4f}  p5 {row['p5']:9.4f}  "
            f"p95 {row['p95']:9.4f}  n {row['n']}"
        )
    print(f"full results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
