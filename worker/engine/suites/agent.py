"""agent: a multi-turn tool loop run by the engine with deterministic in-process tools.

Score = 25 each for: ``correct_final`` (every needle of ``expect_all``, and one of
``expect_any``, in the final answer; a numeric needle matches any number within its tolerance),
``efficient`` (finished within ``max_turns`` using at most ``max_tool_calls`` calls),
``no_hallucinated_tools`` (judged against the task's allowed tools) and ``all_required_called``
(each ``must_call`` requirement met separately by name *and* arguments). ``passed`` needs all but
efficiency.
"""

from __future__ import annotations

import ast
import json
import operator
import re
import time
from collections.abc import Callable

from ...rules.contract import TaskRecord
from ..errors import EngineError
from ..providers.base import ChatRequest, ChatResponse, ToolCall
from ..reasoning import TRUNCATED_IN_REASONING_HINT, truncated_in_reasoning
from .base import OUTPUT_LIMIT, RunContext, Suite, Verdict, task_record
from .common import normalise
from .toolcall import call_credit

WEATHER = {"tokyo": 22, "oslo": 3, "lima": 19, "nairobi": 24, "madrid": 17}
STOCKS = {"ACME": 41.20, "BOLT": 37.85, "CRUX": 112.50}
RATES = {("USD", "EUR"): 0.92, ("EUR", "USD"): 1.09, ("GBP", "EUR"): 1.17}
ORDERS = {"A-553": {"status": "shipped", "carrier": "Parcelink", "eta": "2026-04-09"}}
_OPS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _arith(node: ast.AST) -> float:
    # Arithmetic only, walked by hand: model input never reaches eval().
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        if isinstance(node.op, ast.Pow) and abs(_arith(node.right)) > 8:
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](_arith(node.left), _arith(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_arith(node.operand))
    raise ValueError("only numbers and + - * / % ** are allowed")


def _calculator(args: dict) -> object:
    expression = str(args.get("expression", "")).replace(",", "")
    return round(_arith(ast.parse(expression, mode="eval")), 6)


def _weather(args: dict) -> object:
    city = normalise(args.get("city", ""))
    if city not in WEATHER:
        return {"error": f"unknown city {args.get('city')!r}"}
    return {"city": city.title(), "temperature_c": WEATHER[city]}


def _stock(args: dict) -> object:
    symbol = str(args.get("symbol", "")).upper().strip()
    return {"symbol": symbol, "price": STOCKS[symbol]} if symbol in STOCKS else {"error": "unknown"}


def _convert(args: dict) -> object:
    pair = (str(args.get("from_currency", "")).upper(), str(args.get("to_currency", "")).upper())
    if pair not in RATES:
        return {"error": f"no rate for {pair[0]}->{pair[1]}"}
    return {"amount": round(float(args.get("amount", 0)) * RATES[pair], 2), "currency": pair[1]}


def _words(args: dict) -> object:
    return {"words": len(str(args.get("text", "")).split())}


def _order(args: dict) -> object:
    return ORDERS.get(str(args.get("order_id", "")).upper().strip(), {"error": "no such order"})


TOOLS = {
    "calculator": _calculator,
    "get_weather": _weather,
    "get_stock_price": _stock,
    "convert_currency": _convert,
    "word_count": _words,
    "lookup_order": _order,
}


def run_tool(call: ToolCall, allowed: set[str]) -> str:
    """The tool's JSON result; unknown or disallowed tools and bad arguments return an error."""
    if call.name not in allowed or call.name not in TOOLS:
        return json.dumps({"error": f"no tool named {call.name!r}"})
    if not isinstance(call.arguments, dict):
        return json.dumps({"error": "arguments were not a JSON object"})
    try:
        return json.dumps(TOOLS[call.name](call.arguments))
    except (ValueError, TypeError, ZeroDivisionError, SyntaxError, OverflowError) as exc:
        return json.dumps({"error": str(exc)[:200]})


_NUM = re.compile(r"-?\d+(?:\.\d+)?")


def _needle_found(needle: object, answer: str, tolerance: float) -> bool:
    if isinstance(needle, int | float):
        numbers = [float(n) for n in _NUM.findall(answer.replace(",", "").replace("$", ""))]
        return any(abs(n - needle) <= tolerance for n in numbers)
    return normalise(needle) in normalise(answer)


def score_transcript(task: dict, calls: list[ToolCall], final: str, completed: bool) -> Verdict:
    """Score a finished loop: the calls made, the final answer, whether it ended by itself."""
    rules = task["validation"]
    allowed = {t["function"]["name"] for t in task["config"].get("tools", [])}
    declared = {
        t["function"]["name"]: set(t["function"]["parameters"].get("properties", {}))
        for t in task["config"].get("tools", [])
    }
    tolerance = rules.get("tolerance", 0.01)
    hallucinated = sorted({c.name for c in calls if c.name not in allowed})
    expect_all = rules.get("expect_all", [])
    expect_any = rules.get("expect_any", [])
    correct = bool(final.strip()) and all(_needle_found(n, final, tolerance) for n in expect_all)
    if expect_any:
        correct = correct and any(_needle_found(n, final, tolerance) for n in expect_any)
    required = [
        any(call_credit(r, c, declared.get(r["name"])) > 0 for c in calls)
        for r in rules.get("must_call", [])
    ]
    components = {
        "correct_final": correct,
        "efficient": completed and len(calls) <= rules.get("max_tool_calls", 4),
        "no_hallucinated_tools": not hallucinated,
        "all_required_called": all(required),
    }
    score = 25.0 * sum(components.values())
    passed = components["correct_final"] and not hallucinated and all(required)
    details = {
        "components": components,
        "required_met": required,
        "hallucinated_tools": hallucinated,
        "tool_calls": len(calls),
        "completed": completed,
    }
    return Verdict(score=score, passed=passed, details=details)


class AgentSuite(Suite):
    """Runs each task as a tool loop of up to ``validation.max_turns`` model calls."""

    def run_task(self, task: dict, ctx: RunContext) -> TaskRecord:
        config = task.get("config", {})
        allowed = {t["function"]["name"] for t in config.get("tools", [])}
        max_turns = task["validation"].get("max_turns", 5)
        messages = [dict(m) for m in task["messages"]]
        calls: list[ToolCall] = []
        transcript: list[dict] = []
        latency = prompt_tokens = completion_tokens = 0.0
        final, completed, stop_reason, error = "", False, "max_turns_exceeded", ""
        last = ChatResponse()
        for turn in range(max_turns):
            ctx.check_stop()
            request = ChatRequest(
                messages=messages,
                max_tokens=config.get("max_tokens"),
                temperature=config.get("temperature", 0.0),
                tools=config.get("tools"),
            )
            started = time.perf_counter()
            try:
                last = ctx.provider.chat(request)
            except EngineError as exc:
                latency += (time.perf_counter() - started) * 1000
                stop_reason, error = "provider_error", exc.message
                break
            latency += last.wall_ms or 0.0
            prompt_tokens += last.prompt_tokens or 0
            completion_tokens += last.completion_tokens or 0
            transcript.append({"turn": turn, "content": last.content[:400]})
            if not last.tool_calls:
                final, completed, stop_reason = last.content, True, "model_finished"
                break
            messages.append(
                {
                    "role": "assistant",
                    "content": last.content or "",
                    "tool_calls": [
                        {
                            "id": f"call_{turn}_{i}",
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.raw_arguments or "{}"},
                        }
                        for i, c in enumerate(last.tool_calls)
                    ],
                }
            )
            for i, call in enumerate(last.tool_calls):
                calls.append(call)
                result = run_tool(call, allowed)
                transcript[-1].setdefault("tools", []).append(
                    {"name": call.name, "arguments": call.arguments, "result": result[:400]}
                )
                messages.append(
                    {"role": "tool", "tool_call_id": f"call_{turn}_{i}", "content": result}
                )
        verdict = score_transcript(task, calls, final, completed)
        details = {
            **verdict.details,
            "stop_reason": stop_reason,
            "transcript": transcript,
            # A final answer cut off by max_tokens is recorded and cannot pass.
            "truncated": last.finish_reason == "length",
            "evaluation_status": "truncated"
            if last.finish_reason == "length"
            else ("pass" if verdict.passed else "fail"),
        }
        if truncated_in_reasoning(last):
            details["truncated_in_reasoning"] = True
            details["evaluation_status"] = "truncated_in_reasoning"
            details["hint"] = TRUNCATED_IN_REASONING_HINT
        return task_record(
            task,
            self.name,
            passed=verdict.passed and last.finish_reason != "length",
            score=round(verdict.score, 2),
            latency_ms=round(latency, 3),
            tokens_generated=int(completion_tokens),
            tokens_prompt=int(prompt_tokens),
            output=final[:OUTPUT_LIMIT],
            error=error,
            execution_ok=stop_reason != "provider_error",
            finish_reason=last.finish_reason,
            metadata={"verdict": details, "truncated_in_reasoning": truncated_in_reasoning(last)},
        )
