"""`benchloop run`'s word before a long run: what the selected tasks cost, and leave to go on.

Long means an estimated time over LONG_RUN_S on this server (from worker.engine.cost's two-request
probe); a run under PROBE_FLOOR_TOKENS tokens is never long and sends no probe. ``--yes`` skips
the probe and the question (the token budget is still said). Where stdin is not a terminal (a
script, CI) nothing can answer: the estimate is printed and the run goes ahead. The lab agent
calls the engine directly and never comes here.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console
from rich.text import Text

from worker.cli.formatting import say
from worker.engine.adaptive import ADAPTIVE_CEILING, ADAPTIVE_FLOOR
from worker.engine.cost import Budget, Rates, budget, minutes, probe
from worker.engine.errors import EngineError
from worker.engine.resources import ollama_model_loaded


class RunDeclined(Exception):
    """The user answered no: nothing ran (the CLI exits 130, as for Ctrl-C before a run)."""


LONG_RUN_S = 120.0
# About a minute of decoding at 300 tok/s, or seconds on a GPU: too short to ask about.
PROBE_FLOOR_TOKENS = 20_000


def run_budget(prep, chars_per_token: float | None = None) -> Budget:
    """The prepared run's budget: its tasks, trials and the server's context."""
    return budget(
        prep.tasks,
        prep.config.trials,
        context_length=prep.limits.context_length,
        chars_per_token=chars_per_token,
    )


def cost_line(prep, plan: Budget, rates: Rates | None, why: str = "") -> str:
    """'profile core sends about N prompt tokens and generates about M; on this server …'."""
    what = f"profile {prep.profile_name}"
    if prep.benchmark_profile == "custom" or prep.config.tasks:
        what = "this selection"
    generated = f"about {plan.generated_tokens:,}"
    if plan.generated_ceiling:
        # Quality answers may stop before their limit: the count (and the time) is a ceiling.
        generated = f"at most {plan.generated_tokens:,}"
    line = (
        f"{what} sends about {plan.prompt_tokens:,} prompt tokens and generates {generated} "
        f"in {plan.requests:,} requests"
    )
    if plan.adaptive and prep.tasks.get("speed"):
        floor, ceiling = ADAPTIVE_FLOOR, ADAPTIVE_CEILING
        line += f" (speed cells at {floor} trials; a noisy server runs up to {ceiling})"
    if rates is None:
        return line + (f"; {why}" if why else "")
    seconds = rates.seconds(plan)
    bound = "at most about" if plan.generated_ceiling else "about"
    return (
        f"{line}; on this server that is {bound} {minutes(seconds)} (probe: prefill "
        f"{rates.prefill_tps:,.0f} tok/s, decode {rates.decode_tps:,.1f} tok/s)"
    )


def _rates(prep) -> tuple[Rates | None, str]:
    """The probe's rates, or None and why there are none."""
    if prep.provider.api == "ollama" and ollama_model_loaded(prep) is False:
        # A probe would load the model now, outside the run's cold-start measurement.
        return None, "no time estimate: Ollama has not loaded the model yet"
    try:
        return probe(prep.provider), ""
    except (EngineError, ValueError) as exc:
        message = exc.message if isinstance(exc, EngineError) else str(exc)
        return None, f"no time estimate ({message})"


def confirm_cost(prep, *, yes: bool, err: Console, stdin: TextIO | None = None) -> bool:
    """Say what a long run costs and ask whether to go on; True to start the run."""
    stdin = stdin or sys.stdin
    plan = run_budget(prep)
    if plan.total_tokens < PROBE_FLOOR_TOKENS:
        return True
    if yes:
        say(err, cost_line(prep, plan, None), style="dim")
        return True
    rates, why = _rates(prep)
    if rates is not None:
        plan = run_budget(prep, rates.chars_per_token)
        if rates.seconds(plan) <= LONG_RUN_S:
            return True
    say(err, cost_line(prep, plan, rates, why))
    if not stdin.isatty():
        say(err, "stdin is not a terminal, so no one can answer: going ahead (--yes: no probe)")
        return True
    err.print(Text("Continue? [y/N] "), end="")  # Text: "[y/N]" is not markup
    try:
        answer = stdin.readline()
    except (EOFError, KeyboardInterrupt):
        answer = ""
    if answer.strip().casefold() in ("y", "yes"):
        return True
    say(err, "not started: nothing was measured (pass --yes to skip this question)")
    return False
