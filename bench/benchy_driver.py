"""llama-benchy kept running, one cell per command: run under llama-benchy's own venv.

    $BENCHY_VENV/bin/python bench/benchy_driver.py <llama-benchy's own arguments>

Reads one JSON object per line on stdin, ``{"depth": d, "concurrency": c, "runs": n}``, runs
that one cell with llama-benchy's own runner (its warm-up, its prompts, its client, its
statistics) and answers one line on stdout: ``{"benchmarks": [...]}`` as its ``--format json``
report holds them. Its corpus and tokenizer load once, so consecutive cells of two tools are
seconds apart rather than a process start apart (bench/sweep_fidelity.py interleaves them).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from llama_benchy.client import LLMClient
from llama_benchy.config import BenchmarkConfig
from llama_benchy.corpus import TokenizedCorpus
from llama_benchy.prompts import PromptGenerator
from llama_benchy.runner import BenchmarkRunner


def main() -> None:
    protocol = sys.stdout
    sys.stdout = sys.stderr  # llama-benchy prints its progress; our answers stay one per line
    config = BenchmarkConfig.from_args()
    corpus = TokenizedCorpus(config.book_url, config.tokenizer, config.model)
    prompts = PromptGenerator(corpus)
    client = LLMClient(
        config.base_url,
        config.api_key,
        config.served_model_name,
        config.extra_body,
        config.exact_tg,
    )
    out = Path(tempfile.mkdtemp(prefix="benchy-driver-")) / "cell.json"
    for line in sys.stdin:
        if not line.strip():
            continue
        ask = json.loads(line)
        cell = config.model_copy(
            update={
                "depths": [ask["depth"]],
                "concurrency_levels": [ask["concurrency"]],
                "num_runs": ask["runs"],
                "save_result": str(out),
                "result_format": "json",
            }
        )
        asyncio.run(BenchmarkRunner(cell, client, prompts).run_suite())
        benchmarks = json.loads(out.read_text())["benchmarks"]
        protocol.write(json.dumps({"benchmarks": benchmarks}) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
