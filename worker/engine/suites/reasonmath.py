"""reasonmath verifier: the ``ANSWER:`` line, parsed and compared with tolerances.

Task ``validation.answer`` is one of:

- ``{"type": "number", "value": x, "tolerance": t}``: the number in the answer line within ±t;
- ``{"type": "pairs", "values": {key: value}, "tolerance": t}``: ``key=value; key=value``, each
  key scored separately (numbers within ±t, text casefolded);
- ``{"type": "text", "accept": [...]}``: the answer line names one accepted phrase.

The answer is the text after the last ``ANSWER:`` marker, else the last non-empty line (noted).
An answer line that offers several different numbers, or several accepted and rejected phrases,
is a hedge and scores 0: listing candidates must not pass.
"""

from __future__ import annotations

import re

from ..providers.base import ChatResponse
from .base import Verdict
from .common import finish, normalise

_NUMBER = re.compile(r"-?\$?\s?\d[\d,]*(?:\.\d+)?|-?\$?\.\d+")


def answer_line(text: str) -> tuple[str, bool]:
    """(the answer text after the last ``ANSWER:`` marker, whether a marker was found).

    Without a marker the last non-empty line is the answer (the result notes it).
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        cleaned = line.replace("**", "")
        at = cleaned.casefold().rfind("answer:")
        if at >= 0:
            return cleaned[at + len("answer:") :].strip(), True
    return (lines[-1] if lines else ""), False


def numbers_in(text: str) -> list[float]:
    values = []
    for token in _NUMBER.findall(text):
        cleaned = token.replace("$", "").replace(",", "").replace(" ", "")
        try:
            values.append(float(cleaned))
        except ValueError:
            continue
    return values


def _number_score(line: str, value: float, tolerance: float) -> tuple[float, dict]:
    found = numbers_in(line)
    distinct = sorted(set(found))
    if not found:
        return 0.0, {"reason": "no number in the answer line"}
    if len(distinct) > 1:
        return 0.0, {"reason": "several candidate numbers", "numbers": distinct}
    ok = abs(found[-1] - value) <= tolerance
    return (100.0 if ok else 0.0), {"parsed": found[-1]}


def _pairs_score(line: str, expected: dict, tolerance: float) -> tuple[float, dict]:
    got: dict[str, str] = {}
    for part in re.split(r"[;,\n]", line):
        if "=" in part:
            key, _, value = part.partition("=")
            got[normalise(key)] = value.strip()
    matched = []
    for key, want in expected.items():
        have = got.get(normalise(key))
        if have is None:
            continue
        if isinstance(want, int | float) and not isinstance(want, bool):
            nums = numbers_in(have)
            if len(set(nums)) == 1 and abs(nums[0] - want) <= tolerance:
                matched.append(key)
        elif normalise(have).strip(".") == normalise(want):
            matched.append(key)
    return 100.0 * len(matched) / len(expected), {"matched_keys": matched, "parsed": got}


def _text_score(line: str, accept: list[str], reject: list[str]) -> tuple[float, dict]:
    said = normalise(line)
    hits = [a for a in accept if normalise(a) in said]
    wrong = [r for r in reject if normalise(r) in said]
    if hits and not wrong:
        return 100.0, {"matched": hits[0]}
    return 0.0, {"reason": "hedged" if hits else "no accepted answer", "rejected_seen": wrong}


def verify(task: dict, response: ChatResponse) -> Verdict:
    answer = task["validation"]["answer"]
    line, prefixed = answer_line(response.content)
    details: dict = {"answer_line": line[:200], "answer_prefix": prefixed}
    if not line:
        return finish(0.0, response, {**details, "reason": "empty"})
    kind = answer["type"]
    if kind == "number":
        score, more = _number_score(line, answer["value"], answer.get("tolerance", 0.01))
    elif kind == "pairs":
        score, more = _pairs_score(line, answer["values"], answer.get("tolerance", 0.01))
    else:
        score, more = _text_score(line, answer["accept"], answer.get("reject", []))
    return finish(score, response, {**details, **more})
