"""The baseline: our own minimal tool loop on the same workspace tasks the harness programs get.

It offers four tools (list, read, write, finish) as native OpenAI tools, or through one of the
prompt formats (``xml-tool-call`` …), and talks to the model through the same recording proxy as
the programs, so its overhead figures are measured the same way. Every path the model names is
resolved inside the workspace; anything else is refused and recorded as a denial, like the
programs' cage would.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..errors import EngineError
from ..harnesses import with_harness
from ..providers import OpenAIProvider
from ..providers.base import ChatRequest
from ..transport import Transport
from .proxy import RecordingProxy
from .spec import HarnessTask, ProgramResult

READ_LIMIT = 16_000
WRITE_LIMIT = 64_000
SYSTEM = (
    "You work on the files of a small project folder through tools. Look at the files you "
    "need, change or create files with write_file (the whole new content), and call finish "
    "when the task is done. Paths are relative to the project folder."
)


def _tool(name: str, description: str, **params: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
                "required": list(params),
            },
        },
    }


TOOLS = [
    _tool("list_files", "List the project's files."),
    _tool("read_file", "Read one file.", path="relative path"),
    _tool("write_file", "Replace a file's content.", path="relative path", content="new text"),
    _tool("finish", "Say the task is done.", summary="one line on what you did"),
]


class Workspace:
    """File tools confined to one folder: a path outside it is refused, never followed."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.denials: list[str] = []

    def _path(self, name: object) -> Path | None:
        if not isinstance(name, str) or not name.strip() or "\x00" in name:
            return None
        path = (self.root / name.strip()).resolve()
        if path != self.root and self.root in path.parents:
            return path
        self.denials.append(f"write or read outside the workspace blocked: {name[:200]!r}")
        return None

    def call(self, name: str, args: dict) -> str:
        if name == "list_files":
            files = sorted(
                str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file()
            )
            return "\n".join(files) or "(no files)"
        path = self._path(args.get("path"))
        if path is None:
            return "error: the path must be a file inside the project folder"
        if name == "read_file":
            if not path.is_file():
                return f"error: no file {args.get('path')!r}"
            return path.read_text(errors="replace")[:READ_LIMIT]
        content = args.get("content")
        if not isinstance(content, str) or len(content) > WRITE_LIMIT:
            return "error: content must be text (at most 64 KB)"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        return f"wrote {len(content)} characters to {args.get('path')}"


def run_loop(
    harness: str,
    task: HarnessTask,
    workspace: Path,
    upstream_url: str,
    model: str,
    *,
    max_tokens_cap: int,
    timeout_s: float,
    api_key: str | None = None,
) -> tuple[ProgramResult, list[str]]:
    """Run the baseline loop on ``task``; the result and the format failures it met."""
    tools = Workspace(workspace)
    messages: list[dict] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{task.prompt}\n\nFiles: {', '.join(task.files)}"},
    ]
    failures: list[str] = []
    error = ""
    started = time.perf_counter()
    with RecordingProxy(upstream_url, max_tokens_cap=max_tokens_cap, api_key=api_key) as proxy:
        provider = with_harness(
            OpenAIProvider(Transport(proxy.tcp_url, timeout=timeout_s), model), harness
        )
        try:
            for _ in range(task.max_steps):
                if time.perf_counter() - started > timeout_s:
                    error = "timeout"
                    break
                request = ChatRequest(
                    messages=messages, max_tokens=max_tokens_cap, temperature=0.0, tools=TOOLS
                )
                response = provider.chat(request)
                if not response.tool_calls:
                    messages.append({"role": "assistant", "content": response.content})
                    break  # a plain answer ends the loop, as finish would
                messages.append(_assistant_turn(response))
                done = False
                for call in response.tool_calls:
                    if call.arguments is None or call.name not in {
                        t["function"]["name"] for t in TOOLS
                    }:
                        failures.append(
                            f"unusable tool call {call.name!r}: {call.raw_arguments[:120]!r}"
                        )
                        answer = "error: that call could not be read; use one of the tools"
                    elif call.name == "finish":
                        done, answer = True, "ok"
                    else:
                        answer = tools.call(call.name, call.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": answer})
                if done:
                    break
        except EngineError as exc:
            error = exc.message
        finally:
            malformed = getattr(provider, "malformed", 0)
            provider.close()
    records = proxy.records  # after close(), which waits for every relay to record its request
    failures += [f"{malformed} tagged tool call(s) could not be parsed"] if malformed else []
    wall_ms = (time.perf_counter() - started) * 1000
    result = ProgramResult(
        returncode=0 if not error else 1,
        timed_out=error == "timeout",
        wall_ms=wall_ms,
        stdout="",
        stderr=error,
        requests=records,
        denials=tools.denials,
        workspace=workspace,
    )
    return result, failures


def _assistant_turn(response) -> dict:
    return {
        "role": "assistant",
        "content": response.content or "",
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments or {})},
            }
            for call in response.tool_calls
        ],
    }
