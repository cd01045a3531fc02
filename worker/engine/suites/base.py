"""The suite interface: tasks from a data file, a runner, and a verifier that scores answers.

A quality suite needs only a ``<name>.suite.json`` data file and a verifier function
``verify(task, response) -> Verdict`` named in that file; the default ``Suite.run_task`` sends the
task's messages once and records the verdict. Suites with special needs (speed's trials,
multi-turn agents) name their own ``runner`` class.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...rules.contract import RunEvent, TaskRecord, TrialRule
from ...rules.reasoning import OutputLimits
from ..errors import EngineError
from ..providers.base import ChatRequest, ChatResponse, Provider
from ..reasoning import reasoning_metrics

OUTPUT_LIMIT = 500
_VERIFYING = threading.Lock()

EmitFn = Callable[[RunEvent], None]


class RunCancelled(Exception):
    """Raised at a task or trial boundary when the run's ``should_stop`` says so."""


@dataclass
class Verdict:
    """A verifier's judgement of one answer."""

    score: float
    passed: bool
    details: dict = field(default_factory=dict)


Verifier = Callable[[dict, ChatResponse], Verdict]


@dataclass
class RunContext:
    """What a suite may use while running: the provider, run settings and the event sink."""

    provider: Provider
    trials: int = 5
    # The speed suite's trials (worker.engine.adaptive); None: exactly ``trials``.
    trial_rule: TrialRule | None = None
    scoring_local: bool = True
    max_tokens_cap: int | None = None
    emit: EmitFn = lambda event: None
    should_stop: Callable[[], bool] = lambda: False
    suite_metadata: dict = field(default_factory=dict)
    # GPU power and memory sampling (worker.engine.power.PowerMonitor) while the server runs
    # here; None, with `power_note` saying why, where nothing can be sampled.
    power: Any = None
    power_note: str = "not measured: no power sampling in this run"
    # What the endpoint says about itself (context_length, depth_context, model_context,
    # parallel_slots, slots_source), for suites that size requests to the server (the sweeps).
    server: dict = field(default_factory=dict)
    # The provider for the sweep's depth cells where they need a larger context than the run's
    # other requests (Ollama's num_ctx, worker.engine.sweeps); None: ``provider``.
    depth_provider: Provider | None = None
    # A fresh provider on its own connection (httpx clients are not shared across threads);
    # None where the run cannot open one. The caller closes what it gets.
    new_provider: Callable[[], Provider] | None = None
    # The matrix suites: the run's harness (a prompt format or a real program) and variant, and
    # the endpoint's API root (no /v1: the proxy forwards paths as the harness sends them).
    harness: str = "raw"
    harness_variant: str = ""
    endpoint: str = ""
    model: str = ""
    api_key: str | None = None

    def check_stop(self) -> None:
        """Suites call this between requests; a cancelled run stops there."""
        if self.should_stop():
            raise RunCancelled()


def load_object(path: str) -> object:
    """Import ``package.module:attribute``."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def task_record(task: dict, suite: str, **fields: Any) -> TaskRecord:
    """A v3-shaped task result with every key present; ``fields`` are TaskRecord keys."""
    record = TaskRecord(
        task_id=task["id"],
        suite=suite,
        passed=False,
        score=0.0,
        latency_ms=0.0,
        tokens_generated=0,
        tokens_prompt=0,
        error="",
        output="",
        execution_ok=False,
        finish_reason=None,
        metadata={},
    )
    unknown = set(fields) - set(TaskRecord.__annotations__)
    if unknown:
        raise TypeError(f"not task record fields: {sorted(unknown)}")
    record.update(fields)  # type: ignore[typeddict-item]  # keys checked above, values by tests
    return record


class Suite:
    """A named set of tasks loaded from a data file."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.name: str = spec["suite"]
        self.version: str = spec["version"]
        self.description: str = spec.get("description", "")
        self.defaults: dict = spec.get("defaults", {})
        self.tasks: list[dict] = spec["tasks"]
        verifier = spec.get("verifier")
        self.verifier: Verifier | None = load_object(verifier) if verifier else None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Suite {self.name} v{self.version}: {len(self.tasks)} tasks>"

    # Whether the thinking budget applies: quality tasks think, speed's fixed lengths do not.
    thinks = True
    # Whether tasks may run at once under --parallel (worker.engine.parallel). True where each
    # task is independent and thread-safe: one request (or, for the agent suite, a tool loop
    # whose messages and in-process tools are the task's own) and a verifier. Speed and the
    # sweeps never run in parallel, whatever this says.
    parallel_tasks = True

    def effective_tasks(
        self, limits: OutputLimits | None = None, options: Mapping[str, Any] | None = None
    ) -> list[dict]:
        """Tasks with suite defaults and the run's output limits applied (the manifest input).

        ``options`` are the run's suite options (the sweeps' ``--depths``); plain suites have none.
        """
        out = []
        for task in self.tasks:
            config = {**self.defaults, **task.get("config", {})}
            if limits is not None:
                config = limits.apply(config, thinks=self.thinks)
            out.append({**task, "config": config})
        return out

    def prepare(self, ctx: RunContext) -> None:
        """Called once before the suite's first task (speed calibrates its prompts here)."""

    def run_task(self, task: dict, ctx: RunContext) -> TaskRecord:
        """Send the task once and let the verifier score the answer."""
        config = task.get("config", {})
        request = ChatRequest(
            messages=task["messages"],
            max_tokens=config.get("max_tokens"),
            temperature=config.get("temperature", 0.0),
            tools=config.get("tools"),
            tool_choice=config.get("tool_choice"),
            stop_loops=True,
        )
        started = time.perf_counter()
        try:
            if config.get("stream", True) and not request.tools:
                response = ctx.provider.chat_stream(request)
            else:
                response = ctx.provider.chat(request)
        except EngineError as exc:
            return task_record(
                task,
                self.name,
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
                error=exc.message,
                metadata={"error_kind": exc.kind},
            )
        if self.verifier is None:
            verdict = Verdict(
                score=100.0 if response.content else 0.0, passed=bool(response.content)
            )
        else:
            # One verdict at a time: the coding checks run in a sandbox with wall and CPU
            # limits, which must not be met because other tasks' checks ran beside them.
            with _VERIFYING:
                verdict = self.verifier(task, response)
        return task_record(
            task,
            self.name,
            passed=verdict.passed,
            score=round(float(verdict.score), 2),
            latency_ms=round(response.wall_ms or 0.0, 3),
            tokens_generated=response.completion_tokens or 0,
            tokens_prompt=response.prompt_tokens or 0,
            output=response.content[:OUTPUT_LIMIT],
            execution_ok=True,
            finish_reason=response.finish_reason,
            metadata={
                "verdict": verdict.details,
                "reasoning_chars": len(response.reasoning),
                "ttft_ms": response.timing.first_token_ms if response.timing else None,
                **reasoning_metrics(response),
                "tool_calls": [
                    {"name": c.name, "arguments": c.arguments} for c in response.tool_calls
                ],
                **({"loop": response.loop} if response.loop else {}),
            },
        )

    def summary(self, records: list[TaskRecord], ctx: RunContext) -> dict:
        """What the suite record's metadata adds from its task records (the matrix's overhead)."""
        return {}

    def score(self, records: list[TaskRecord]) -> float | None:
        """Suite score: the mean task score."""
        return round(sum(r["score"] or 0.0 for r in records) / len(records), 2) if records else 0.0
