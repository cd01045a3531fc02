"""What a run costs before it starts (issue 35): the token budget of the selected tasks, read from
the suite data and the trial count, and a time estimate from a two-request probe of the server.

The budget counts the prompt tokens the server evaluates (a depth cell's cached context is not
evaluated again) and the tokens it generates. Speed and sweep requests have fixed lengths, so
their counts are exact up to the prompt calibration; a quality answer may stop before its limit,
so its generated tokens are a ceiling (``Budget.generated_ceiling``). Django-free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .adaptive import ADAPTIVE_FLOOR
from .errors import EngineError
from .metrics import request_metrics
from .preflight import DEFAULT_TRIALS
from .providers.base import ChatRequest, Provider
from .suites.longcontext import CHARS_PER_TOKEN
from .suites.prompts import new_nonce, speed_messages
from .suites.speed import CALIBRATION_WORDS, FALLBACK_BASE_TOKENS, FALLBACK_TOKENS_PER_WORD
from .sweeps import sweep_token_budget

# Chat-template tokens around each message (role markers, separators): a few in every template.
MESSAGE_TOKENS = 6
# The run's first request ("Say OK.", up to 16 tokens: orchestrator._first_request).
FIRST_REQUEST = (16, 16)
# What a tool result adds to an agent's conversation per turn, beside the model's own answer.
TOOL_RESULT_TOKENS = 40
# The probe: a short prompt that decodes PROBE_DECODE tokens, then PROBE_WORDS words of filler
# that decode one; the difference in time to first token is the prefill of the extra tokens.
PROBE_DECODE = 48
PROBE_WORDS = 400
PROBE_INSTRUCTION = "Count upward from one, one number per line."


@dataclass
class SuiteBudget:
    """One suite's share: requests, evaluated prompt tokens, generated tokens (and of those,
    how many are only a ceiling)."""

    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    generated_ceiling: int = 0

    def add(self, prompt: float, generated: float, *, ceiling: bool = False, times: int = 1):
        self.requests += times
        self.prompt_tokens += round(prompt) * times
        self.generated_tokens += round(generated) * times
        if ceiling:
            self.generated_ceiling += round(generated) * times


@dataclass
class Budget:
    """The whole run's token budget, by suite, with the run's first request under "run"."""

    by_suite: dict[str, SuiteBudget] = field(default_factory=dict)
    # Speed cells counted at the adaptive rule's floor (no --trials, no profile count): a noisy
    # server repeats them up to ADAPTIVE_CEILING times.
    adaptive: bool = False

    @property
    def requests(self) -> int:
        return sum(s.requests for s in self.by_suite.values())

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.by_suite.values())

    @property
    def generated_tokens(self) -> int:
        return sum(s.generated_tokens for s in self.by_suite.values())

    @property
    def generated_ceiling(self) -> int:
        """Generated tokens that are a quality answer's limit, not a fixed length."""
        return sum(s.generated_ceiling for s in self.by_suite.values())

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.generated_tokens


def text_tokens(
    messages: Sequence[Mapping[str, Any]], tools: object = None, *, chars: float | None = None
) -> float:
    """About how many prompt tokens these messages (and tool definitions) make."""
    per_token = chars or CHARS_PER_TOKEN
    size = sum(len(str(m.get("content") or "")) for m in messages)
    if tools:
        size += len(json.dumps(tools))
    return size / per_token + MESSAGE_TOKENS * (len(messages) + 1)


def _speed(task: Mapping[str, Any], trials: int, into: SuiteBudget) -> None:
    into.add(task["speed"]["prompt_tokens"], task["config"].get("max_tokens", 128), times=trials)


def _sweeps(
    tasks: Sequence[Mapping[str, Any]], trials: int, context: int | None, into: SuiteBudget
) -> None:
    """The sweep's cells as the sweep itself plans them (sweeps.sweep_token_budget: a depth
    cell primes its context once, the first concurrency level warms up); cells the server's
    context cannot hold are skipped by the suite, and cost nothing."""
    plan = sweep_token_budget(tasks, trials, context=context or None)
    into.requests += plan["requests"]
    into.prompt_tokens += plan["prompt_tokens"]
    into.generated_tokens += plan["generated_tokens"]


def _quality(
    task: Mapping[str, Any], chars: float | None, context: int | None, into: SuiteBudget
) -> None:
    """One request, or a tool loop of up to ``max_turns`` (agent) or ``max_steps`` (matrix)
    requests whose conversation grows by each answer and tool result: a ceiling either way.
    A prompt the server's context cannot hold is refused before it is evaluated: no cost."""
    config = task.get("config") or {}
    prompt = text_tokens(task.get("messages") or [], config.get("tools"), chars=chars)
    if context and prompt > context:
        return
    answer = config.get("max_tokens") or 256
    turns = (task.get("validation") or {}).get("max_turns") or config.get("max_steps") or 1
    for turn in range(int(turns)):
        into.add(prompt + turn * (answer + TOOL_RESULT_TOKENS), answer, ceiling=True)


def _calibration(name: str, tasks: Sequence[Mapping[str, Any]], into: SuiteBudget) -> None:
    """The excluded requests a speed suite sends before its tasks (one token decoded each):
    two length calibrations, and for the sweep two overhead counts per instruction."""
    if not tasks:
        return
    calibration = FALLBACK_BASE_TOKENS + CALIBRATION_WORDS * FALLBACK_TOKENS_PER_WORD
    into.add(FALLBACK_BASE_TOKENS, 1)
    into.add(calibration, 1)
    if name == "speed_sweep":
        instructions = {t["sweep"]["instruction"] for t in tasks}
        into.add(FALLBACK_BASE_TOKENS, 1, times=2 * len(instructions))


def budget(
    tasks: Mapping[str, Sequence[Mapping[str, Any]]],
    trials: int | None,
    *,
    context_length: int | None = None,
    chars_per_token: float | None = None,
) -> Budget:
    """The token budget of a run's effective tasks (``PreparedRun.tasks``, or
    ``preflight.select``'s) at the run's ``trials`` (None: adaptive speed cells, counted at their
    floor, and the sweeps' default), on a server whose context holds ``context_length`` tokens
    (None: every cell), prompts at ``chars_per_token`` characters a token (None: 4)."""
    speed_trials = trials or ADAPTIVE_FLOOR
    sweep_trials = trials or DEFAULT_TRIALS
    out = Budget(by_suite={"run": SuiteBudget()}, adaptive=trials is None)
    out.by_suite["run"].add(*FIRST_REQUEST)
    for name, selected in tasks.items():
        share = SuiteBudget()
        if any("speed" in t or "sweep" in t for t in selected):
            _calibration(name, selected, share)
        _sweeps([t for t in selected if "sweep" in t], sweep_trials, context_length, share)
        for task in selected:
            if "speed" in task:
                _speed(task, speed_trials, share)
            elif "sweep" not in task:
                _quality(task, chars_per_token, context_length, share)
        out.by_suite[name] = share
    return out


@dataclass(frozen=True)
class Rates:
    """This server's speed as the probe saw it, and its tokenizer's characters per token."""

    prefill_tps: float
    decode_tps: float
    overhead_s: float
    chars_per_token: float | None = None

    def seconds(self, plan: Budget) -> float:
        """time ≈ prompt ÷ prefill + generated ÷ decode + requests × overhead."""
        return (
            plan.prompt_tokens / self.prefill_tps
            + plan.generated_tokens / self.decode_tps
            + plan.requests * self.overhead_s
        )


class ProbeError(EngineError):
    """The probe's answers could not give a rate (too few tokens, no timings)."""

    kind = "probe"


def probe(provider: Provider) -> Rates:
    """Two requests, never part of a run's measurements: a short prompt that decodes
    PROBE_DECODE tokens, and one PROBE_WORDS words longer that decodes one. Decode from the
    first; prefill from the two times to first token; what is left of the first TTFT is the
    per-request overhead. Each opens with a fresh nonce, so no cached prefix helps either."""
    short = speed_messages(new_nonce(), PROBE_INSTRUCTION, 0)
    long = speed_messages(new_nonce(), PROBE_INSTRUCTION, PROBE_WORDS)
    ignore_eos = bool(getattr(provider, "supports_ignore_eos", False))
    first = request_metrics(
        provider.chat_stream(
            ChatRequest(messages=short, max_tokens=PROBE_DECODE, ignore_eos=ignore_eos)
        )
    )
    second = request_metrics(provider.chat_stream(ChatRequest(messages=long, max_tokens=1)))
    decode = first["decode_tps"]
    p1, p2 = first["prompt_tokens"], second["prompt_tokens"]
    t1, t2 = first["ttft_ms"], second["ttft_ms"]
    if not decode or not p1 or not p2 or t1 is None or t2 is None or p2 <= p1:
        raise ProbeError("the server's answers to the probe gave no decode or prompt counts")
    prefill = (p2 - p1) / ((t2 - t1) / 1000.0) if t2 > t1 else None
    if not prefill or prefill <= 0:
        # The TTFT difference drowned in noise: the second request's own prefill rate instead.
        prefill = second["prefill_tps"] or second["server_prefill_tps"]
    if not prefill:
        raise ProbeError("the probe's times to first token gave no prefill rate")
    overhead = max(0.0, t1 / 1000.0 - p1 / prefill)
    extra_chars = len(long[0]["content"]) - len(short[0]["content"])
    return Rates(
        prefill_tps=round(prefill, 2),
        decode_tps=round(decode, 2),
        overhead_s=round(overhead, 4),
        chars_per_token=round(extra_chars / (p2 - p1), 3),
    )


def minutes(seconds: float) -> str:
    """A duration in words people read at a glance: "40 s", "7 min", "1.8 h"."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
