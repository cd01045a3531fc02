"""instructfollow verifier: named rule checks with parameters from the data file.

Score = 100 × rules met / rules; a task passes only when every rule holds. Helpers: lines are the
non-empty stripped lines, paragraphs are split on blank lines, words are ``[^\\W_][\\w'-]*``
runs, sentences end with ``.``, ``!`` or ``?`` followed by whitespace or the end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from ..providers.base import ChatResponse
from .base import Verdict
from .common import finish, normalise

_WORD = re.compile(r"[^\W_][\w'-]*")
_NUMBERED = re.compile(r"^(\d+)[.)]\s+\S")
_BULLET = re.compile(r"^[-*•]\s+\S")


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


def sentences(text: str) -> int:
    return len(re.findall(r"[.!?]+(?=\s|$)", text.strip()))


def _in_range(value: int, rule: dict) -> bool:
    if "equals" in rule:
        return value == rule["equals"]
    return rule.get("min", value) <= value <= rule.get("max", value)


def _numbered(text: str, rule: dict) -> bool:
    numbers = [int(m.group(1)) for line in lines(text) if (m := _NUMBERED.match(line))]
    return numbers == list(range(1, rule["count"] + 1))


def _json_keys(text: str, rule: dict) -> bool:
    try:
        value = json.loads(text.strip())
    except ValueError:
        return False
    return isinstance(value, dict) and sorted(value) == sorted(rule["keys"])


def _ordered(text: str, rule: dict) -> bool:
    said, at = normalise(text), 0
    for phrase in rule["phrases"]:
        found = said.find(normalise(phrase), at)
        if found < 0:
            return False
        at = found + len(normalise(phrase))
    return True


def _strip_end(line: str) -> str:
    return line.rstrip(" .,!?;:\"'").casefold()


CHECKS: dict[str, Callable[[str, dict], bool]] = {
    "word_count": lambda t, r: _in_range(len(words(t)), r),
    "line_count": lambda t, r: _in_range(len(lines(t)), r),
    "sentence_count": lambda t, r: _in_range(sentences(t), r),
    "paragraph_count": lambda t, r: _in_range(len(paragraphs(t)), r),
    "numbered_items": _numbered,
    "bullet_items": lambda t, r: sum(bool(_BULLET.match(x)) for x in lines(t)) == r["count"],
    "max_words_per_line": lambda t, r: all(len(words(x)) <= r["max"] for x in lines(t)),
    "max_word_length": lambda t, r: all(len(w) <= r["max"] for w in words(t)),
    "forbidden_words": lambda t, r: (
        not {w.casefold() for w in words(t)} & {w.casefold() for w in r["words"]}
    ),
    "all_lowercase": lambda t, r: t.strip() != "" and t == t.lower(),
    "first_line_uppercase": lambda t, r: bool(lines(t)) and lines(t)[0] == lines(t)[0].upper(),
    "one_of": lambda t, r: t.strip() in r["options"],
    "exact_text": lambda t, r: lines(t) == lines(r["text"]),
    "json_keys": _json_keys,
    "ordered_phrases": _ordered,
    "ends_with": lambda t, r: t.strip().endswith(r["text"]),
    "paragraph_starts": lambda t, r: (
        len(paragraphs(t)) == len(r["starts"])
        and all(p.startswith(s) for p, s in zip(paragraphs(t), r["starts"], strict=True))
    ),
    "every_line_ends_with": lambda t, r: (
        bool(lines(t)) and all(_strip_end(x).endswith(r["word"].casefold()) for x in lines(t))
    ),
    "every_line_starts_with": lambda t, r: (
        bool(lines(t)) and all(x.startswith(r["text"]) for x in lines(t))
    ),
}


def verify(task: dict, response: ChatResponse) -> Verdict:
    text = response.content
    rules = task["validation"]["rules"]
    if not text.strip():
        return finish(0.0, response, {"reason": "empty", "checks": {}}, pass_at=100.0)
    results = {}
    for rule in rules:
        name = rule.get("name", rule["check"])
        results[name] = bool(CHECKS[rule["check"]](text, rule))
    score = 100.0 * sum(results.values()) / len(results)
    return finish(score, response, {"checks": results}, pass_at=100.0)
