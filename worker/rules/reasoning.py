"""Reasoning models' rules: the output limit with its thinking budget, the budget a run chose,
and the run's reasoning summary read from a bundle (docs/metrics.md, "Reasoning models")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .scoring import SPEED_SUITES
from .stats import median

# No request asks for more output than this, whatever --max-tokens and --thinking-budget say.
MAX_TOKENS_CEILING = 32768
# The thinking budget of a model whose warm-up answer reasoned, unless --thinking-budget is given.
DEFAULT_THINKING_BUDGET = 2048


@dataclass(frozen=True)
class OutputLimits:
    """The run's output limits: ``max_tokens`` (--max-tokens) replaces each task's answer cap,
    raising or lowering it; ``thinking_budget`` is added to it for quality tasks. Every limit
    stays under MAX_TOKENS_CEILING and under the server's context where that is known."""

    max_tokens: int | None = None
    thinking_budget: int = 0
    context_length: int | None = None

    @property
    def ceiling(self) -> int:
        if self.context_length:
            return min(MAX_TOKENS_CEILING, self.context_length)
        return MAX_TOKENS_CEILING

    def apply(self, config: dict[str, Any], *, thinks: bool = True) -> dict[str, Any]:
        """A task's config with these limits. ``thinks`` is false for the speed suite, whose
        output lengths define what it measures: --max-tokens only lowers them, with no budget.

        A task the run leaves as it is keeps its config unchanged (today's manifests hold);
        one with a budget records its answer cap and budget beside the request limit.
        """
        if "max_tokens" not in config:
            return config
        own = int(config["max_tokens"])
        if not thinks:
            answer = own if self.max_tokens is None else min(own, self.max_tokens)
            return config if answer == own else {**config, "max_tokens": answer}
        answer = own if self.max_tokens is None else self.max_tokens
        limit = min(answer + self.thinking_budget, self.ceiling)
        if limit == own and not self.thinking_budget:
            return config
        out = {**config, "max_tokens": limit}
        if self.thinking_budget:
            out["answer_max_tokens"] = answer
            out["thinking_budget"] = self.thinking_budget
        return out


def chosen_budget(settings: dict[str, Any]) -> int | None:
    """A thinking budget the options set that differs from the automatic one (0, or the
    default for a model that reasons), read from a bundle's settings; None if there is none."""
    budget = settings.get("thinking_budget")
    if settings.get("thinking_budget_source") != "option" or not isinstance(budget, int):
        return None
    automatic = DEFAULT_THINKING_BUDGET if settings.get("reasoning_detected") is True else 0
    return None if budget == automatic else budget


BUDGET_SOURCES = {"detected": "the warm-up answer reasoned", "option": "--thinking-budget"}
_MAX_COUNT = 10**9


def _count(value: Any) -> int | None:
    """A token count from a bundle that may be an old or hostile one: a whole number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return int(value) if 0 <= value <= _MAX_COUNT and value == int(value) else None


def _ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value < 1e9 else None  # also drops NaN


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def reasoning_summary(bundle: Any) -> dict[str, Any] | None:
    """The run's reasoning over its quality tasks: the thinking budget and its source, the
    reasoning and answer tokens, the median time to the first answer token beside the median
    TTFT, and the tasks cut off while thinking. None when the run saw no reasoning and set no
    budget. Reads every value by its type: the site passes stored payloads of any age."""
    if not isinstance(bundle, dict):
        return None
    settings = _object(bundle.get("settings"))
    metas = [
        task["metadata"]
        for name, suite in _object(bundle.get("suites")).items()
        if name not in SPEED_SUITES
        for task in _list(_object(suite).get("tasks"))
        if isinstance(task, dict)
        and isinstance(task.get("metadata"), dict)
        and "reasoning_tokens" in task["metadata"]
    ]
    reasoning = sum(_count(m.get("reasoning_tokens")) or 0 for m in metas)
    budget = _count(settings.get("thinking_budget")) or 0
    if not reasoning and not budget:
        return None
    source = settings.get("thinking_budget_source")
    sources = {m.get("reasoning_token_source") for m in metas if _count(m.get("reasoning_tokens"))}
    firsts = [v for v in (_ms(m.get("ttft_answer_ms")) for m in metas) if v is not None]
    return {
        "budget": budget,
        "budget_source": source if source in BUDGET_SOURCES else "none",
        "tasks": len(metas),
        "reasoning_tokens": reasoning,
        "answer_tokens": sum(_count(m.get("answer_tokens")) or 0 for m in metas),
        "token_sources": sorted(s for s in sources if s in ("server", "stream", "estimated")),
        "ttft_ms": median(_ms(m.get("ttft_ms")) for m in metas),
        "ttft_answer_ms": median(firsts),
        "answered": len(firsts),
        "truncated_in_reasoning": sum(1 for m in metas if m.get("truncated_in_reasoning") is True),
    }
