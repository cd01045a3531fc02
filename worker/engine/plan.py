"""What a run is: its settings (RunConfig) and, once preflight passed, the run prepared to go
(PreparedRun).

A leaf under the orchestrator and its helpers (preflight, resources, skeleton, sweeps): each
takes these types, none imports the orchestrator back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..rules.reasoning import OutputLimits
from .contention import INTERVAL_S
from .detect import EndpointInfo
from .launch import StackInfo
from .locality import Locality
from .parallel import Parallelism
from .providers import Provider
from .suites import Suite
from .transport import Transport


@dataclass
class RunConfig:
    """Everything a run needs; mirrors the `benchloop run` flags."""

    url: str
    model: str | None = None
    provider: str = "auto"
    suites: list[str] | None = None
    profile: str | None = None
    tasks: list[str] | None = None
    # None: the profile's ``speed_trials``; where it names none, the speed suite's trials are
    # adaptive (worker.engine.adaptive) and the sweeps run DEFAULT_TRIALS.
    trials: int | None = None
    harness: str = "raw"
    # A program harness's variant (Aider's edit format); part of the stack's settings.
    harness_variant: str = ""
    scoring: str | None = None
    hardware_label: str | None = None
    gpu: str | None = None
    gpu_memory_gb: float | None = None
    api_key: str | None = None
    timeout: float = 300.0
    # Each quality task's answer cap, raised or lowered (worker.rules.reasoning.OutputLimits).
    max_tokens: int | None = None
    # Tokens added to each quality task's limit for thinking; None: automatic (the default
    # budget for a model whose warm-up answer reasoned, else 0).
    thinking_budget: int | None = None
    home: Path | None = None
    # The weights file when the server cannot say where it is (hashed, only its name recorded).
    model_file: str | None = None
    # How the server was started, when it runs elsewhere or its process is not visible here.
    launch_command: str | None = None
    hash_weights: bool = True
    contention_interval: float = INTERVAL_S
    # Seconds from launching the server to its health check passing, when whoever launched it
    # for this run measured it (a lab job's managed server): the cold start's load time.
    server_load_s: float | None = None
    # The sweeps' cells and request sizes when not the profile's (--depths, --concurrency,
    # --sweep-prompt-tokens, --sweep-output-tokens); any of them makes the run not comparable.
    sweep_depths: list[int] | None = None
    sweep_concurrency: list[int] | None = None
    sweep_prompt_tokens: int | None = None
    sweep_output_tokens: int | None = None
    # Quality tasks at once (--parallel); None: the server's slot count, capped
    # (worker.engine.parallel). Speed and the sweeps always run alone.
    parallel: int | None = None

    def sweep_options(self) -> dict[str, Any]:
        """The sweep settings given for this run, by the names the sweep suite reads."""
        given = {
            "depths": self.sweep_depths,
            "concurrency": self.sweep_concurrency,
            "prompt_tokens": self.sweep_prompt_tokens,
            "output_tokens": self.sweep_output_tokens,
        }
        return {key: value for key, value in given.items() if value is not None}


@dataclass
class PreparedRun:
    """A run that passed preflight: endpoint known, model served, suites resolved."""

    config: RunConfig
    transport: Transport
    info: EndpointInfo
    model: str
    provider: Provider
    locality: Locality
    profile_name: str
    profile: dict[str, Any]
    benchmark_profile: str
    suites: list[Suite]
    tasks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Every task id of the requested profile, unfiltered: what comparability is measured against.
    expected: dict[str, list[str]] = field(default_factory=dict)
    stack: StackInfo = field(default_factory=StackInfo)
    limits: OutputLimits = field(default_factory=OutputLimits)
    # "option", "detected" or "none" (preflight.output_limits); whether the warm-up reasoned
    # (None until it ran).
    thinking_budget_source: str = "none"
    reasoning_detected: bool | None = None
    parallel: Parallelism = field(default_factory=Parallelism)
