"""Degenerate repeating answers: find a span repeating at the end of a stream, to stop it early.

A small model that falls into a loop repeats the same text until ``max_tokens``; the answer is
already wrong, and the remaining tokens only cost time. A quality request watches the tail of
its output and ends the stream once one span has repeated back to back long enough
(docs/metrics.md: such a task is recorded with finish_reason ``"loop"`` and cannot pass).
"""

from __future__ import annotations

from dataclasses import dataclass

# A span is 8-200 characters, repeated at least 4 times back to back, and the repeats cover at
# least 256 characters: a row of "=" or a short "0, 0, " list in a real answer stays well below
# that, while a looping sentence reaches it within a few repeats.
MIN_SPAN = 8
MAX_SPAN = 200
MIN_REPEATS = 4
MIN_CHARS = 256
# The tail is checked every this many output chunks (about one token each), so a 4K-token
# answer costs a few hundred cheap checks.
CHECK_EVERY = 16
# What the watcher keeps: enough for the longest span's repeats.
KEEP_CHARS = max(MAX_SPAN * MIN_REPEATS, MIN_CHARS)

FINISH_REASON = "loop"


@dataclass(frozen=True)
class Loop:
    """A span of ``span`` characters that ends the text ``repeats`` times back to back."""

    span: int
    repeats: int
    text: str

    def to_dict(self) -> dict:
        """Sizes only: the span is model output, which never leaves the machine (bundle.py)."""
        return {"span_chars": self.span, "repeats": self.repeats}


def repeats_needed(span: int) -> int:
    """How many back-to-back copies of a span of this length make a loop."""
    return max(MIN_REPEATS, -(-MIN_CHARS // span))


def tail_loop(text: str) -> Loop | None:
    """The shortest span (MIN_SPAN..MAX_SPAN characters) whose copies end ``text`` often enough
    to count as a loop (``repeats_needed``), or None. Pure, and cheap on a short tail."""
    size = len(text)
    for span in range(MIN_SPAN, MAX_SPAN + 1):
        needed = repeats_needed(span)
        if span * needed > size:
            continue
        unit = text[size - span :]
        # The previous copy first: almost every span fails there.
        if text[size - 2 * span : size - span] != unit:
            continue
        if text[size - span * needed :] != unit * needed:
            continue
        repeats = needed
        while text.endswith(unit, 0, size - span * repeats):
            repeats += 1
        return Loop(span=span, repeats=repeats, text=unit)
    return None


class LoopWatch:
    """The tail of one streamed answer (reasoning and answer text as they arrive), checked every
    CHECK_EVERY output chunks; ``loop`` is set once a loop is found."""

    def __init__(self) -> None:
        self.tail = ""
        self.chunks = 0
        self.loop: Loop | None = None
        self.at_chunk: int | None = None

    def feed(self, text: str) -> bool:
        """Add one output chunk's text; True once the answer is looping."""
        if self.loop is not None:
            return True
        self.chunks += 1
        self.tail = (self.tail + text)[-KEEP_CHARS:]
        if self.chunks % CHECK_EVERY:
            return False
        self.loop = tail_loop(self.tail)
        if self.loop is not None:
            self.at_chunk = self.chunks
        return self.loop is not None

    def record(self) -> dict | None:
        """The loop as the task record's metadata keeps it; None without one."""
        if self.loop is None:
            return None
        return {**self.loop.to_dict(), "stopped_at_chunk": self.at_chunk}
