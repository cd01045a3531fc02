"""Whether a run measured what its profile asks for, and if not, why (bundle 1.1 `comparability`).

A run is comparable only when every task of its profile was scored: the run finished, used the
profile's own task set unchanged, and no task was skipped, cut off by the server's context or
refused for want of a code sandbox. Coverage counts the profile's tasks that were scored.

One implementation: the orchestrator writes the block, and the site's importer derives the same
reasons for bundles written before it existed (``reasons_for_bundle``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from .contract import Comparability
from .reasoning import chosen_budget
from .redact import redact_text

# Why a task that ran has no score that can be compared (a task's `not_scored` state).
SKIPPED, CONTEXT, SANDBOX = "skipped", "context", "sandbox_unavailable"
IN_PROGRESS = "the run did not finish"
MAX_REASON = 300
# A prompt counted at under this share of its target size did not reach the model whole.
TRUNCATED_SHARE = 0.5


def _block(bundle: dict[str, Any], key: str) -> dict[str, Any]:
    """``bundle[key]`` when it is an object, else empty (old or hand-made bundles)."""
    value = bundle.get(key)
    return value if isinstance(value, dict) else {}


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def task_state(task: dict[str, Any]) -> str | None:
    """None for a scored task, else why it has no comparable score.

    A task that errored on the endpoint is scored (0, and it counts against reliability); one
    the engine could not put to the model at all is not.
    """
    meta = task.get("metadata") or {}
    if meta.get("skipped"):
        return CONTEXT if "context" in str(meta.get("skip_reason", "")).casefold() else SKIPPED
    kind = meta.get("error_kind")
    if kind == "sandbox_unavailable":
        return SANDBOX
    if kind == "context_overflow":
        return CONTEXT
    target = meta.get("target_tokens") or meta.get("target_context_tokens")
    counted = task.get("tokens_prompt") or meta.get("provider_prompt_tokens")
    if _number(target) and _number(counted) and 0 < counted < TRUNCATED_SHARE * target:
        # The server counted far fewer prompt tokens than were sent: it cut the prompt to
        # fit its context (Ollama does so without an error).
        return CONTEXT
    measured = [t for t in meta.get("trials") or [] if not t.get("warmup")]
    if measured and all(
        t.get("ok") is False and t.get("error_kind") == "context_overflow" for t in measured
    ):
        return CONTEXT
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _task_reasons(states: Counter[str], context_length: int | None) -> list[str]:
    reasons = []
    room = f" ({context_length} tokens)" if context_length else ""
    if states[CONTEXT]:
        reasons.append(
            f"{_plural(states[CONTEXT], 'task')} skipped or cut off: the server's "
            f"context{room} is too small"
        )
    if states[SANDBOX]:
        reasons.append(f"{_plural(states[SANDBOX], 'coding task')} not run: no code sandbox")
    if states[SKIPPED]:
        reasons.append(f"{_plural(states[SKIPPED], 'task')} skipped")
    return reasons


def _clip(text: str) -> str:
    text = redact_text(" ".join(str(text).split()))
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def assess(
    *,
    status: str,
    error: Mapping[str, Any] | None,
    expected: dict[str, list[str]],
    suites: Mapping[str, Mapping[str, Any]],
    custom_selection: bool,
    task_filter: Iterable[str] = (),
    max_tokens_cap: int | None = None,
    context_length: int | None = None,
    thinking_budget: int | None = None,
    sweep_options: Mapping[str, Any] | None = None,
) -> Comparability:
    """The `comparability` block for a run of the profile whose task ids are ``expected``.

    ``suites`` is the bundle's suites block (the tasks that ran). The coverage is the share of
    expected tasks that were scored; a task outside the profile (a custom extra suite) adds none.
    """
    want = {(suite, task_id) for suite, ids in expected.items() for task_id in ids}
    states: Counter[str] = Counter()
    scored = 0
    for name, suite in suites.items():
        for task in suite.get("tasks") or []:
            state = task_state(task)
            if state is not None:
                states[state] += 1
            elif (name, task.get("task_id")) in want:
                scored += 1
    reasons: list[str] = []
    if status == "incomplete":
        message = (error or {}).get("message") or IN_PROGRESS
        reasons.append(_clip(message))
    elif status == "failed":
        message = (error or {}).get("message") or "every task failed"
        reasons.append(_clip(f"the run failed: {message}"))
    if custom_selection:
        reasons.append("custom suite selection, not a named profile")
    filters = list(task_filter)
    if filters:
        reasons.append(_clip(f"--tasks {','.join(filters)} ran a subset of the profile"))
    if max_tokens_cap is not None:
        reasons.append(f"--max-tokens {max_tokens_cap} caps the answers")
    if thinking_budget is not None:
        # The automatic budget is the profile's; any other changes what the tasks allow.
        reasons.append(f"--thinking-budget {thinking_budget} sets the thinking allowed")
    changed = _sweep_changes(sweep_options or {})
    if changed:
        reasons.append(_clip(f"{changed} changes the sweep's cells"))
    reasons.extend(_task_reasons(states, context_length))
    present = {(name, t.get("task_id")) for name, s in suites.items() for t in s.get("tasks") or []}
    missing = len(want - present)
    if missing and status == "complete" and not custom_selection and not filters and not changed:
        reasons.append(f"{_plural(missing, 'task')} of the profile not run")
    total = len(want)
    return Comparability(
        comparable=not reasons and total > 0 and scored == total,
        reasons=reasons,
        tasks_expected=total,
        tasks_scored=scored,
        not_scored={key: states[key] for key in (CONTEXT, SANDBOX, SKIPPED)},
    )


_SWEEP_FLAGS = {
    "depths": "--depths",
    "concurrency": "--concurrency",
    "prompt_tokens": "--sweep-prompt-tokens",
    "output_tokens": "--sweep-output-tokens",
}


def _sweep_changes(options: Mapping[str, Any]) -> str:
    """``--depths 0,1024 --concurrency 1,2`` for the sweep settings a run changed, else ""."""
    parts = []
    for key, flag in _SWEEP_FLAGS.items():
        value = options.get(key)
        if isinstance(value, list):
            parts.append(f"{flag} {','.join(str(v) for v in value)}")
        elif value is not None:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def coverage_of(block: Mapping[str, Any]) -> float:
    """Share (0–100) of the profile's tasks that were scored."""
    total = block.get("tasks_expected") or 0
    if total <= 0:
        return 0.0
    return round(100.0 * min(1.0, (block.get("tasks_scored") or 0) / total), 2)


def reasons_for_bundle(bundle: dict[str, Any]) -> list[str]:
    """Why a bundle of any version is not comparable; [] when it is.

    A 1.1 bundle says so itself. Older ones (and legacy run files) get the reasons that can be
    seen in them: their status, their settings and their tasks' states. Their own `comparable`
    flag can only make them less comparable, never more.
    """
    block = bundle.get("comparability")
    if isinstance(block, dict) and isinstance(block.get("reasons"), list):
        reasons = [_clip(r) for r in block["reasons"] if isinstance(r, str) and r.strip()]
        if not reasons and not block.get("comparable", False):
            reasons = ["not comparable (no reason recorded)"]
        return reasons
    settings, suites, launch = (_block(bundle, key) for key in ("settings", "suites", "launch"))
    context = launch.get("context_length")
    status = str(bundle.get("status") or "complete")
    error = bundle.get("error") if isinstance(bundle.get("error"), dict) else None
    if error is None and isinstance(bundle.get("error"), str):
        error = {"message": bundle["error"]}
    assessed = assess(
        status="incomplete" if status == "cancelled" else status,
        error=error,
        # What the profile asked for is not in an old bundle: its own tasks stand in for it.
        expected={
            name: [str(t.get("task_id")) for t in (s.get("tasks") or []) if isinstance(t, dict)]
            for name, s in suites.items()
            if isinstance(s, dict)
        },
        suites={n: s for n, s in suites.items() if isinstance(s, dict)},
        custom_selection=bundle.get("benchmark_profile") == "custom",
        task_filter=[str(t) for t in settings.get("task_filter") or []],
        max_tokens_cap=settings.get("max_tokens_cap"),
        context_length=context if isinstance(context, int) else None,
        thinking_budget=chosen_budget(settings),
        sweep_options=settings.get("sweep_options")
        if isinstance(settings.get("sweep_options"), dict)
        else None,
    )
    reasons = assessed["reasons"]
    coverage = bundle.get("coverage_score")
    if isinstance(coverage, int | float) and not isinstance(coverage, bool) and coverage < 100:
        reasons.append(f"covers {coverage:g}% of its profile")
    if not reasons and bundle.get("comparable") is not True:
        reasons.append("not comparable (no reason recorded)")
    return reasons
