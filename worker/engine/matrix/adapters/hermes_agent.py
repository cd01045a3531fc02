"""Hermes Agent (``hermes``), run unattended on one task with native tool calls.

It is started as ``hermes chat -q PROMPT -Q`` (one query, quiet: no banner, no spinner), with the
file and terminal toolsets only, ``--yolo`` (no approval prompts: nobody is there to answer) and
``--max-turns`` = the task's ``max_steps`` (``hermes -z``, the other one-shot mode, has no turn
limit: it always allows 90). When the limit is reached Hermes makes one more request of its own,
without tools, asking the model to summarize: a task costs at most ``max_steps + 1`` requests.

Its config file in HOME points the ``custom`` provider at the cage's endpoint and turns off
what would use the network or grow the prompt on its own: the remote model catalog, the curator,
memory, the LSP servers, the tirith download, lazy installs, session titles; a fresh update-check
cache stops the PyPI check. Hermes refuses a model with under 64K tokens of context, so the
config states 65536: the proxy's token cap, not that number, bounds each reply.

Format failures are what Hermes itself said it could not use: a tool name that does not exist,
arguments that are not JSON, or a reply cut off inside a tool call; read from the tool results it
fed back to the model (the proxy's transcript) and from its own output.
"""

from __future__ import annotations

import json
import re
import time

from ..programs import PROGRAMS
from ..spec import PLAIN_TERMINAL, Endpoint, HarnessTask, Invocation, ProgramResult

CONFIG = ".hermes/config.yaml"  # JSON, which is YAML
UPDATE_CHECK = ".hermes/.update_check"
TOOLSETS = ("file", "terminal")
# Hermes checks the model's window against this floor before the first request.
MIN_CONTEXT = 65536
# Its own bound on a run (the caller's timeout is usually the tighter one): a CPU-only endpoint
# takes minutes to read Hermes's 4,400-token prompt.
STARTUP_S, STEP_S = 120.0, 300.0

# Hermes's own words, fed back to the model as tool results or printed.
_FED_BACK = (
    re.compile(r"Tool '[^']*' does not exist\. Available tools: .*"),
    re.compile(r"Tool call rejected: the tool name was empty\..*"),
    re.compile(r"Error: Invalid JSON arguments\..*"),
)
_PRINTED = (
    re.compile(r"Invalid JSON in tool call arguments for '[^']*': .*"),
    re.compile(r"Unknown tool '[^']*'.*"),
    re.compile(r"Model generated invalid tool call: .*"),
    re.compile(r"Truncated tool call arguments detected.*"),
    re.compile(r"Max retries \(3\) for invalid tool calls exceeded.*"),
)


def config(endpoint: Endpoint, task: HarnessTask) -> dict:
    """Hermes's ``~/.hermes/config.yaml`` for one run."""
    return {
        "model": {
            "provider": "custom",
            "base_url": endpoint.base_url,
            "default": endpoint.model,
            "api_key": endpoint.api_key,
            "context_length": MIN_CONTEXT,
        },
        "toolsets": list(TOOLSETS),
        "agent": {"max_turns": task.max_steps, "api_max_retries": 1},
        "memory": {"memory_enabled": False, "user_profile_enabled": False},
        "model_catalog": {"enabled": False},
        "curator": {"enabled": False},
        "lsp": {"enabled": False},
        # After a successful answer a background thread asks the endpoint for a session title
        # (for Hermes's own database): an extra request racing the exit, nothing for the task.
        "auxiliary": {"title_generation": {"enabled": False}},
        # tirith: a scanner Hermes downloads from GitHub on first use; lazy installs: pip.
        "security": {"tirith_enabled": False, "allow_lazy_installs": False},
    }


def update_check_cache(now: float) -> dict:
    """``hermes chat`` checks PyPI for a newer release at every start unless this cache says it
    did so in the last 6 hours; a fresh entry ("0 behind") is how that check is switched off."""
    return {"ts": now, "behind": 0, "rev": None, "ver": PROGRAMS["hermes-agent"].version}


class HermesAgent:
    spec = PROGRAMS["hermes-agent"]
    label = "hermes-agent"
    settings: dict = {"toolsets": ",".join(TOOLSETS), "mode": "chat -q"}

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        prompt = task.prompt
        if task.files:
            prompt += "\n\nFiles: " + ", ".join(task.files)
        argv = [self.spec.program, "chat", "-q", prompt, "-Q", "--yolo"]
        argv += ["-t", ",".join(TOOLSETS), "--max-turns", str(task.max_steps)]
        argv += ["--provider", "custom", "-m", endpoint.model]
        env = {
            "OPENAI_API_KEY": endpoint.api_key,
            "HERMES_YOLO_MODE": "1",
            **PLAIN_TERMINAL,
        }
        return Invocation(
            argv=argv,
            env=env,
            home_files={
                CONFIG: json.dumps(config(endpoint, task), indent=2),
                UPDATE_CHECK: json.dumps(update_check_cache(time.time())),
            },
            timeout_s=STARTUP_S + STEP_S * task.max_steps,
        )

    def format_failures(self, result: ProgramResult) -> list[str]:
        """The tool calls Hermes could not use, in its own words, in order, without repeats of
        one message that a later request carried again."""
        found: list[str] = []
        seen_ids: set[str] = set()
        for body in result.transcript:
            for message in body.get("messages", []):
                if not isinstance(message, dict) or message.get("role") != "tool":
                    continue
                key = str(message.get("tool_call_id") or "")
                content = message.get("content")
                if not isinstance(content, str) or (key and key in seen_ids):
                    continue
                seen_ids.add(key)
                for pattern in _FED_BACK:
                    if match := pattern.search(content):
                        found.append(match[0][:240])
        for text in (result.stdout, result.stderr):
            for line in text.splitlines():
                for pattern in _PRINTED:
                    if (match := pattern.search(line)) and match[0][:240] not in found:
                        found.append(match[0][:240])
        return found
