"""Matrix runs shaped as the engine uploads them (issue 19), for the site's tests.

One run = one stack: the harness is part of the stack's identity, its version on the run. Each
suite record carries `metadata.harness`, `metadata.overhead` (spec.summarize of its tasks) and
`metadata.failures`; each task record `metadata.overhead` (spec.Overhead.as_dict()),
`metadata.failure` and `metadata.failure_reason`. The records go through the real intake.
"""

from __future__ import annotations

from collections import Counter

from leaderboard.tests.factories import record
from runs.importers.records import ImportedSuite, ImportedTask, RunRecord
from worker.engine.matrix.programs import PROGRAMS
from worker.engine.matrix.spec import Overhead, summarize
from worker.rules.harnesses import FAILURES

MODEL = "qwen2.5-coder:7b"
SUITES = ("matrix_bugfix", "matrix_tools", "matrix_long")


def overhead(
    *, requests: int, prompt: int, completion: int, wall_ms: float, model_ms: float, peak: int
) -> dict:
    return Overhead(
        requests=requests,
        prompt_tokens=prompt,
        cached_tokens=0,
        completion_tokens=completion,
        wall_ms=wall_ms,
        model_ms=model_ms,
        harness_ms=round(wall_ms - model_ms, 1),
        peak_context=peak,
        format_failures=0,
    ).as_dict()


def task(
    suite: str,
    index: int,
    failure: str | None,
    *,
    requests: int,
    prompt: int,
    wall_ms: float,
    model_share: float,
    reason: str = "",
) -> ImportedTask:
    block = overhead(
        requests=requests,
        prompt=prompt,
        completion=prompt // 10,
        wall_ms=wall_ms,
        model_ms=round(wall_ms * model_share, 1),
        peak=prompt // max(requests, 1) + prompt // 10,
    )
    if failure == "format":
        block["format_failures"] = 1
    return ImportedTask(
        task_id=f"{suite}-{index:02d}",
        passed=failure is None,
        score=100.0 if failure is None else 0.0,
        latency_ms=wall_ms,
        execution_ok=failure not in ("harness_error", "endpoint_error"),
        metadata={
            "overhead": block,
            "failure": failure,
            "failure_reason": reason or (f"{failure}: see the transcript" if failure else ""),
        },
    )


def matrix_record(
    harness: str,
    outcomes: dict[str, list[str | None]],
    *,
    prompt: int = 1000,
    requests: int = 2,
    wall_ms: float = 4000.0,
    model_share: float = 0.9,
    version: str | None = None,
    variant: str = "",
    model_id: str = MODEL,
    gpu: str = "NVIDIA GeForce RTX 4090",
    vram_gb: float = 24,
    reason: str = "",
    **extra,
) -> RunRecord:
    """One matrix run of `harness`: per suite, one entry per task (None: passed, else the
    failure kind). Every task of the run costs `prompt` tokens over `requests` requests."""
    spec = PROGRAMS.get(harness)
    version = version if version is not None else (spec.version if spec else "v1")
    suites, payload_suites = [], {}
    for suite, results in outcomes.items():
        tasks = [
            task(
                suite,
                i,
                failure,
                requests=requests,
                prompt=prompt,
                wall_ms=wall_ms,
                model_share=model_share,
                reason=reason,
            )
            for i, failure in enumerate(results, 1)
        ]
        passed = sum(t.passed for t in tasks)
        failures = Counter(t.metadata["failure"] for t in tasks if t.metadata["failure"])
        suites.append(
            ImportedSuite(
                suite=suite,
                score=100.0 * passed / len(tasks),
                task_count=len(tasks),
                pass_count=passed,
                fail_count=len(tasks) - passed,
                tasks=tasks,
            )
        )
        payload_suites[suite] = {
            "metadata": {
                "harness": {
                    "name": harness,
                    "package": spec.package if spec else "",
                    "version": version,
                    "variant": variant,
                },
                "overhead": summarize([t.metadata["overhead"] for t in tasks]),
                "failures": {kind: failures[kind] for kind in FAILURES},
            },
        }
    found = record(model_id=model_id, gpu=gpu, vram_gb=vram_gb, **extra)
    found.harness = harness
    found.harness_version = version
    found.profile = "matrix"
    found.suites = suites
    # As the engine's bundle holds them: suites by name, the variant in the run's settings too.
    found.raw_payload = {
        "harness": harness,
        "harness_version": version,
        "settings": {"harness": harness, "harness_variant": variant},
        "suites": payload_suites,
    }
    return found


def standard_matrix(**extra) -> list[RunRecord]:
    """raw, one prompt format and the three programs on every suite, each with its own
    pass rate and cost: aider passes most and costs the most tokens."""
    return [
        matrix_record(
            "raw",
            {
                "matrix_bugfix": [None, None, "wrong", "wrong", "format"],
                "matrix_tools": [None, "wrong", "wrong"],
                "matrix_long": ["timeout"],
            },
            prompt=1000,
            requests=2,
            wall_ms=4000.0,
            **extra,
        ),
        matrix_record(
            "xml-tool-call",
            {
                "matrix_bugfix": [None, "format", "format", "wrong", "wrong"],
                "matrix_tools": [None, "format", "wrong"],
                "matrix_long": ["wrong"],
            },
            prompt=1200,
            requests=2,
            wall_ms=4400.0,
            **extra,
        ),
        matrix_record(
            "aider",
            {
                "matrix_bugfix": [None, None, None, None, "wrong"],
                "matrix_tools": [None, None, "sandbox"],
                "matrix_long": [None],
            },
            prompt=2500,
            requests=3,
            wall_ms=9000.0,
            model_share=0.6,
            variant="edit-format whole",
            **extra,
        ),
        matrix_record(
            "hermes-agent",
            {
                "matrix_bugfix": [None, None, None, "wrong", "format"],
                "matrix_tools": [None, None, "wrong"],
                "matrix_long": ["harness_error"],
            },
            prompt=4000,
            requests=6,
            wall_ms=12000.0,
            model_share=0.5,
            **extra,
        ),
        matrix_record(
            "mini-swe-agent",
            {
                "matrix_bugfix": [None, None, "wrong", "wrong", "sandbox"],
                "matrix_tools": [None, "wrong", "wrong"],
                "matrix_long": ["wrong"],
            },
            prompt=1500,
            requests=4,
            wall_ms=6000.0,
            model_share=0.8,
            **extra,
        ),
    ]
