"""Stored speed trials whose prefill window ran from the send though a slot started later
(issue 35).

Until the engine knew that llama.cpp sends a stream's headers only when a slot starts on it,
headers in the second half of TTFT were not taken as that start: such a trial's prefill window
ran from the send (``prefill_window_source: "sent"``). On a busy server that window held the
wait for a slot, so its prefill read a fraction of the server's rate and its client share of
TTFT held the wait. The stored trial keeps its clock readings, so the engine's own rule
(worker.rules.timings) picks out those trials and gives what came before the slot's start and
the window after it. The run page shows the stored figure marked, next to the one from the
slot's start; nothing stored is rewritten, and bundles from older clients, uploaded later, are
read the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leaderboard import payload
from worker.rules.timings import ServerTimings, StreamTiming, prefill_window, ttft_split


@dataclass(frozen=True)
class LateSlotStart:
    """What a stored "sent" window held before the slot started, and the prefill after it."""

    before_ms: float  # request written → slot start
    queued: bool  # the engine's rule reads that span as a wait for a slot, not setup alone
    prefill_tps: float | None


def late_slot_start(trial: Any) -> LateSlotStart | None:
    """For a stored trial whose window was taken from the send although its headers mark the
    slot's start: the span before that start and the prefill from it; None for every other."""
    if not isinstance(trial, Mapping) or trial.get("prefill_window_source") != "sent":
        return None
    clocks, server = trial.get("timings"), trial.get("server")
    if not isinstance(clocks, Mapping) or not isinstance(server, Mapping):
        return None
    timing = StreamTiming(
        first_token_ms=payload.number(clocks.get("first_token_ms")),
        headers_ms=payload.number(clocks.get("headers_ms")),
        written_ms=payload.number(clocks.get("written_ms")),
    )
    timings = ServerTimings(
        source=payload.text(server.get("source")) or "server",
        prompt_ms=payload.number(server.get("prompt_ms")),
        prompt_n=payload.count(server.get("prompt_n"), high=10**9),
        cache_n=payload.count(server.get("cache_n"), high=10**9),
    )
    window, source = prefill_window(timing, timings)
    if source != "headers" or not window:
        return None
    split = ttft_split(timing, timings)
    queue, setup = split["ttft_queue_ms"], split["ttft_server_setup_ms"]
    tokens = payload.count(trial.get("prefill_tokens"), high=10**9)
    return LateSlotStart(
        before_ms=queue or setup or 0.0,
        queued=bool(queue),
        prefill_tps=tokens / (window / 1000) if tokens else None,
    )


def late_starts_by_index(metadata: Any) -> dict[int, LateSlotStart]:
    """A task's such trials by trial index (as the importer numbers them: the trial's own,
    else its place)."""
    trials = metadata.get("trials") if isinstance(metadata, Mapping) else None
    if not isinstance(trials, list):
        return {}
    found = {}
    for position, trial in enumerate(trials, 1):
        mark = late_slot_start(trial)
        if mark is not None:
            index = payload.count(trial.get("trial_index"), high=32767) or position
            found[index] = mark
    return found
