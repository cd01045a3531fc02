"""`sweeps` blocks shaped as the engine writes them (profiles full and speed-deep), for the page
tests: a depth sweep with a skipped depth and a concurrency sweep with a failed level."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "runs/schemas/upload-1.schema.json").read_text()
)
SKIPPED = "exceeds the server context (8192 tokens)"
FAILED = "HTTP 500: slot unavailable"


def summary(median: float, *, n: int = 3, spread: float = 0.02) -> dict:
    """worker.rules.stats.summarize's shape around a median."""
    low, high = round(median * (1 - spread), 4), round(median * (1 + spread), 4)
    return {
        "n": n,
        "median": median,
        "mean": median,
        "stdev": round(median * spread, 4),
        "p5": low,
        "p95": high,
        "p99": high,
        "ci95_low": low,
        "ci95_high": high,
        # What the sign-test interval covers at this n (min to max below six values).
        "ci95_coverage": {3: 0.75, 4: 0.875, 5: 0.9375}.get(n, 0.9688),
        "peak": high,
    }


def sweeps(decode: float = 50.0, *, slots: int | None = 4) -> dict:
    """A run's sweeps: decode falls with depth, 32K is past the context; 8 streams failed."""
    depth_cells = []
    for depth, factor in ((0, 1.0), (4096, 0.9), (16384, 0.7)):
        depth_cells.append(
            {
                "depth": depth,
                "status": "measured",
                "n": 3,
                "depth_tokens": depth + (26 if depth else 0),
                "token_count_source": "server",
                "prefill_tps": summary(round(20 * decode * factor, 4)),
                "decode_tps": summary(round(decode * factor, 4)),
                "ttft_ms": summary(round(30.0 / factor, 4)),
            }
        )
    depth_cells.append({"depth": 32768, "status": "skipped", "reason": SKIPPED})
    streams_cells = []
    for streams in (1, 2, 4):
        streams_cells.append(
            {
                "streams": streams,
                "status": "measured",
                "requests": 4 * streams,
                "aggregate_tps": round(decode * streams * 0.8, 4),
                "per_stream_tps": summary(round(decode * 0.8, 4), n=4 * streams),
                "ttft_ms": summary(40.0 * streams, n=4 * streams),
                "ttft_p50_ms": 40.0 * streams,
                "ttft_tail_ms": 60.0 * streams,
                "ttft_tail_label": "max",
                "wall_s": 3.5,
            }
        )
    streams_cells.append({"streams": 8, "status": "failed", "reason": FAILED})
    return {
        "depth": {
            "method": "llama-bench -d: d context tokens are cached by a first request, then p "
            "new tokens are prefilled and n decoded on top of them",
            "prompt_tokens": 512,
            "output_tokens": 128,
            "trials": 3,
            "server_context": 8192,
            "cells": depth_cells,
        },
        "concurrency": {
            "prompt_tokens": 128,
            "output_tokens": 128,
            "server_slots": slots,
            "slots_source": "llama.cpp /props total_slots" if slots is not None else None,
            "cells": streams_cells,
        },
    }


def valid(block: dict) -> dict:
    """The block, checked against the upload schema once the schema describes it (the engine's
    side adds `sweeps` to it; until then the shape is docs' and sweep_bundles' own)."""
    described = SCHEMA["properties"].get("sweeps")
    if described is not None:
        jsonschema.validate(block, {**described, "$defs": SCHEMA.get("$defs", {})})
    return block
