"""loop_schema verifier: JSON that satisfies a JSON Schema and holds required values.

Score = 50 if the JSON validates against the task's schema, plus 50 × matched expected values /
expected values (paths like ``items.0.sku``; strings casefolded, numbers ±0.01). No JSON at all
scores 0. Pass ≥ 85, which needs a valid document.
"""

from __future__ import annotations

import jsonschema

from ..providers.base import ChatResponse
from .base import Verdict
from .common import extract_json, finish
from .dataextract import compare


def lookup(value: object, path: str) -> object:
    """The value at a dotted path (list indexes as numbers), or None when absent."""
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def verify(task: dict, response: ChatResponse) -> Verdict:
    rules = task["validation"]
    value, method = extract_json(response.content)
    if method == "none":
        return finish(0.0, response, {"json_method": method, "reason": "invalid_json"})
    validator = jsonschema.Draft202012Validator(rules["schema"])
    errors = [e.message[:200] for e in validator.iter_errors(value)][:5]
    expected = rules.get("expected", {})
    matched = [p for p, want in expected.items() if compare(want, lookup(value, p), {})[0] == 1]
    values_part = 50.0 * len(matched) / len(expected) if expected else 50.0
    score = (0.0 if errors else 50.0) + values_part
    details = {
        "json_method": method,
        "schema_valid": not errors,
        "schema_errors": errors,
        "matched_values": matched,
        "expected_values": len(expected),
    }
    return finish(score, response, details)
