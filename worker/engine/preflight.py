"""Preflight: a run's options checked and its tasks picked (no request yet), then what answers
at the URL probed and the stack named. The orchestrator's prepare_run puts the two together."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..rules.contract import HashingWeights, RunCallback
from ..rules.harnesses import HARNESSES, is_program
from ..rules.reasoning import DEFAULT_THINKING_BUDGET, MAX_TOKENS_CEILING, OutputLimits
from .detect import EndpointInfo, detect_endpoint, resolve_model
from .errors import UsageError
from .launch import StackInfo, identify
from .locality import Locality
from .matrix.adapters import adapter
from .matrix.install import require
from .matrix.programs import PROGRAMS
from .matrix.suite import MatrixSuite
from .paths import benchloop_home
from .reasoning import reasons
from .suites import Suite, available_suites, load_profiles
from .transport import Transport

if TYPE_CHECKING:
    from .plan import PreparedRun, RunConfig
    from .providers import ChatResponse

# The sweeps' trials where the run names none; the speed suite's are then adaptive
# (worker.engine.adaptive: 3 to 10 trials a cell, each until its figures are narrow enough).
DEFAULT_TRIALS = 5


def select_tasks(
    suite: Suite,
    patterns: list[str] | None,
    limits: OutputLimits | None,
    options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    tasks = suite.effective_tasks(limits, options)
    if not patterns:
        return tasks
    return [t for t in tasks if any(fnmatch.fnmatch(t["id"], p) for p in patterns)]


@dataclass
class Selection:
    """What a run will run: the profile, its suites and their tasks after --tasks and caps."""

    profile_name: str
    profile: dict[str, Any]
    benchmark_profile: str
    suites: list[Suite]
    tasks: dict[str, list[dict[str, Any]]]
    expected: dict[str, list[str]]
    limits: OutputLimits


def output_limits(
    config: RunConfig, *, context_length: int | None = None, reasons: bool = False
) -> tuple[OutputLimits, str]:
    """The run's output limits and where its thinking budget comes from: "option"
    (--thinking-budget), "detected" (the warm-up answer reasoned: DEFAULT_THINKING_BUDGET) or
    "none". --max-tokens without --thinking-budget sets the whole limit: no automatic budget."""
    if config.thinking_budget is not None:
        budget, source = config.thinking_budget, "option"
    elif reasons and config.max_tokens is None:
        budget, source = DEFAULT_THINKING_BUDGET, "detected"
    else:
        budget, source = 0, "none"
    limits = OutputLimits(
        max_tokens=config.max_tokens, thinking_budget=budget, context_length=context_length
    )
    return limits, source


def _check_limits(config: RunConfig) -> None:
    if config.max_tokens is not None and not 1 <= config.max_tokens <= MAX_TOKENS_CEILING:
        raise UsageError(f"--max-tokens must be between 1 and {MAX_TOKENS_CEILING}")
    budget = config.thinking_budget
    if budget is not None and not 0 <= budget <= MAX_TOKENS_CEILING:
        raise UsageError(f"--thinking-budget must be between 0 and {MAX_TOKENS_CEILING}")


def _check_program_harness(config: RunConfig, suites: list[Suite]) -> None:
    """A real harness program runs the matrix suites only, and must be installed."""
    if not is_program(config.harness):
        if config.harness_variant:
            raise UsageError("--harness-variant applies to a harness program only")
        return
    others = [s.name for s in suites if not isinstance(s, MatrixSuite)]
    if others:
        raise UsageError(
            f"the {config.harness} harness runs the matrix suites only, not {', '.join(others)}",
            hint="Use --profile matrix, or --suites matrix_bugfix,matrix_tools,matrix_long.",
        )
    adapter(config.harness, config.harness_variant)  # an unknown variant is a UsageError
    require(PROGRAMS[config.harness])


def select(config: RunConfig) -> Selection:
    """Check the run's options against the installed profiles, suites and harnesses (a
    UsageError before any request) and pick the tasks; fills in the profile's trial count
    (left None where the profile names none: adaptive speed trials)."""
    profiles = load_profiles()
    profile_name = config.profile or profiles["default"]
    if profile_name not in profiles["profiles"]:
        raise UsageError(
            f"unknown profile {profile_name!r}",
            hint=f"Profiles: {', '.join(profiles['profiles'])}.",
        )
    profile = profiles["profiles"][profile_name]
    if config.trials is None and "speed_trials" in profile:
        config.trials = int(profile["speed_trials"])
    if config.trials is not None and not 1 <= config.trials <= 50:
        raise UsageError("--trials must be between 1 and 50")
    _check_limits(config)
    for flag, value, least in (
        ("--sweep-prompt-tokens", config.sweep_prompt_tokens, 16),
        ("--sweep-output-tokens", config.sweep_output_tokens, 2),
    ):
        if value is not None and value < least:
            raise UsageError(f"{flag} must be at least {least}")
    if config.harness not in HARNESSES:
        raise UsageError(
            f"unknown harness {config.harness!r}", hint=f"Harnesses: {', '.join(HARNESSES)}."
        )
    selected = list(config.suites) if config.suites else list(profile["suites"])
    installed = available_suites()
    missing = [name for name in selected if name not in installed]
    if missing:
        raise UsageError(
            f"suite(s) not installed: {', '.join(missing)}",
            hint=f"Installed suites: {', '.join(installed)}.",
        )
    suites = [installed[name] for name in selected]
    _check_program_harness(config, suites)
    limits, _ = output_limits(config)
    options = config.sweep_options()
    tasks = {s.name: select_tasks(s, config.tasks, limits, options) for s in suites}
    if not any(tasks.values()):
        raise UsageError("no task matches --tasks", hint="`benchloop info` lists task ids.")
    return Selection(
        profile_name=profile_name,
        profile=profile,
        benchmark_profile=next(
            (n for n, p in profiles["profiles"].items() if set(p["suites"]) == set(selected)),
            "custom",
        ),
        suites=suites,
        tasks=tasks,
        # Every task id of the requested profile, unfiltered: what comparability counts.
        expected={
            name: [t["id"] for t in installed[name].effective_tasks(None)]
            for name in profile["suites"]
            if name in installed
        },
        limits=limits,
    )


def probe(
    config: RunConfig,
    transport: Transport,
    locality: Locality,
    on_event: RunCallback | None,
) -> tuple[EndpointInfo, str, StackInfo]:
    """What answers at the URL, the model it serves, and the stack (weights, launch)."""

    def hashing(path: Path, size: int) -> None:
        if on_event is not None:
            on_event(HashingWeights(type="hashing_weights", file=path.name, size_bytes=size))

    info = detect_endpoint(transport, provider=config.provider)
    model = resolve_model(info, config.model)
    stack = identify(
        transport=transport,
        info=info,
        model=model,
        same_machine=locality.same_machine,
        model_file=config.model_file,
        launch_command=config.launch_command,
        hash_weights=config.hash_weights,
        home=config.home or benchloop_home(),
        on_hashing=hashing,
    )
    return info, model, stack


def retask(prep: PreparedRun, limits: OutputLimits, source: str) -> None:
    """Put the run's tasks under new output limits (the server's context, a detected budget)."""
    if limits != prep.limits:
        options = prep.config.sweep_options()
        prep.tasks = {
            s.name: select_tasks(s, prep.config.tasks, limits, options) for s in prep.suites
        }
    prep.limits, prep.thinking_budget_source = limits, source


def after_warmup(prep: PreparedRun, response: ChatResponse) -> None:
    """A warm-up answer that reasoned marks a reasoning model: it gets the automatic thinking
    budget unless the options set one (``output_limits``)."""
    prep.reasoning_detected = reasons(response)
    limits, source = output_limits(
        prep.config,
        context_length=prep.limits.context_length,
        reasons=prep.reasoning_detected,
    )
    retask(prep, limits, source)
