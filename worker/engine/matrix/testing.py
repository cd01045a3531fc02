"""Test helpers for the matrix (used by every adapter's tests): the server's own request log, and
forcing a real model's reply with a llama.cpp grammar (so sandbox tests need no fake model)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

# llama.cpp's per-request lines, e.g.
# "slot print_timing: id  0 | task 1 | prompt eval time =     216.38 ms /    31 tokens (...)"
# "slot print_timing: id  0 | task 1 |        eval time =      64.64 ms /     5 tokens (...)"
_PROMPT = re.compile(r"task (\d+) \|\s+prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"task (\d+) \|\s+eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def log_offset(path: Path | str) -> int:
    """The log's current size: pass it to ``server_log_requests`` to read only what follows."""
    return Path(path).stat().st_size


def server_log_requests(path: Path | str, start_offset: int = 0) -> list[dict]:
    """The requests the server logged after ``start_offset``, in order: one dict per task with
    ``task``, ``prompt_tokens`` (evaluated, i.e. not from the cache), ``completion_tokens``,
    ``prompt_ms`` and ``eval_ms``. A task appears once both of its lines are there."""
    with open(path, "rb") as handle:
        handle.seek(start_offset)
        text = handle.read().decode("utf-8", errors="replace")
    tasks: dict[int, dict] = {}
    for line in text.splitlines():
        if "print_timing" not in line:
            continue
        if match := _PROMPT.search(line):
            entry = tasks.setdefault(int(match[1]), {"task": int(match[1])})
            entry["prompt_ms"], entry["prompt_tokens"] = float(match[2]), int(match[3])
        elif match := _EVAL.search(line):
            entry = tasks.setdefault(int(match[1]), {"task": int(match[1])})
            entry["eval_ms"], entry["completion_tokens"] = float(match[2]), int(match[3])
    return [e for e in tasks.values() if "prompt_tokens" in e and "completion_tokens" in e]


def wait_for_server_log(
    path: Path | str, start_offset: int, count: int, timeout_s: float = 10.0
) -> list[dict]:
    """``server_log_requests``, polled until it has ``count`` entries (the server's log is
    written asynchronously) or ``timeout_s`` passes; returns what it has."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = server_log_requests(path, start_offset)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _gbnf_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def forced_reply_grammar(text: str) -> str:
    """A GBNF grammar (llama.cpp's ``grammar`` field) whose only sentence is ``text``."""
    return f"root ::= {_gbnf_literal(text)}\n"


def force_reply(text: str, *, drop_tools: bool = False) -> Callable[[dict], dict]:
    """A proxy ``rewrite`` hook that makes every model reply exactly ``text``.

    llama.cpp refuses a custom grammar together with tools, so ``drop_tools`` removes them
    (the reply is then plain text, as a text-format harness expects)."""

    def rewrite(body: dict) -> dict:
        body = dict(body)
        if drop_tools:
            for key in ("tools", "tool_choice", "parallel_tool_calls", "functions"):
                body.pop(key, None)
        body.pop("response_format", None)
        body["grammar"] = forced_reply_grammar(text)
        return body

    return rewrite
