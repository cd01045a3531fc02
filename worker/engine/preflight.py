"""Preflight: a run's options checked and its tasks picked (no request yet), then what answers
at the URL probed and the stack named. The orchestrator's prepare_run puts the two together."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..contract import HashingWeights, RunCallback
from .detect import EndpointInfo, detect_endpoint, resolve_model
from .errors import UsageError
from .harnesses import HARNESSES
from .launch import StackInfo, identify
from .locality import Locality
from .paths import benchloop_home
from .suites import Suite, available_suites, load_profiles
from .transport import Transport

if TYPE_CHECKING:
    from .orchestrator import RunConfig

DEFAULT_TRIALS = 5


def select_tasks(
    suite: Suite,
    patterns: list[str] | None,
    cap: int | None,
    options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    tasks = suite.effective_tasks(cap, options)
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


def select(config: RunConfig) -> Selection:
    """Check the run's options against the installed profiles, suites and harnesses (a
    UsageError before any request) and pick the tasks; fills in the profile's trial count."""
    profiles = load_profiles()
    profile_name = config.profile or profiles["default"]
    if profile_name not in profiles["profiles"]:
        raise UsageError(
            f"unknown profile {profile_name!r}",
            hint=f"Profiles: {', '.join(profiles['profiles'])}.",
        )
    profile = profiles["profiles"][profile_name]
    if config.trials is None:
        config.trials = int(profile.get("speed_trials", DEFAULT_TRIALS))
    if config.trials < 1 or config.trials > 50:
        raise UsageError("--trials must be between 1 and 50")
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
    options = config.sweep_options()
    tasks = {s.name: select_tasks(s, config.tasks, config.max_tokens, options) for s in suites}
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
