"""mini-swe-agent (``mini``): a minimal bash-only agent, run unattended on one task.

It runs its shipped text-based configuration (``mini_textbased.yaml``: one fenced
``mswea_bash_command`` block per reply, parsed with a regex), so any chat model can drive it, no
tool-calling template needed. Our overrides make it unattended (yolo mode, exit at once when the
model submits, no confirmation), bound it (step limit = the task's ``max_steps``, the cost limit
off), point its litellm model at the cage's endpoint (``openai/<model>`` with ``api_base``) and
stop its own network use (litellm's bundled cost map, no first-run setup). Its trajectory is
written into HOME, where ``format_failures`` reads the "format error" turns it fed back.
"""

from __future__ import annotations

import json

from ..cage import HOME
from ..programs import PROGRAMS
from ..spec import LITELLM_OFFLINE, PLAIN_TERMINAL, Endpoint, HarnessTask, Invocation, ProgramResult

CONFIG = ".config/benchloop/mini-overrides.yaml"  # JSON, which is YAML
TRAJECTORY = "mini.traj.json"
STEP_TIMEOUT_S = 30  # one bash action


class MiniSweAgent:
    spec = PROGRAMS["mini-swe-agent"]

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        overrides = {
            "agent": {
                "step_limit": task.max_steps,
                "cost_limit": 0,
                "mode": "yolo",
                "confirm_exit": False,
                "output_path": f"{HOME}/{TRAJECTORY}",
            },
            "model": {
                "model_class": "litellm_textbased",
                "model_name": f"openai/{endpoint.model}",
                "cost_tracking": "ignore_errors",
                "model_kwargs": {
                    "api_base": endpoint.base_url,
                    "api_key": endpoint.api_key,
                    "drop_params": True,
                    "temperature": 0.0,
                },
            },
            "environment": {"environment_class": "local", "timeout": STEP_TIMEOUT_S},
        }
        prompt = task.prompt
        if task.files:
            prompt += "\n\nFiles: " + ", ".join(task.files)
        argv = [self.spec.program, "--yolo", "--exit-immediately", "--cost-limit", "0"]
        argv += ["-c", "mini_textbased.yaml", "-c", f"{HOME}/{CONFIG}"]
        argv += ["-o", f"{HOME}/{TRAJECTORY}", "-t", prompt]
        env = {
            "MSWEA_CONFIGURED": "true",  # no first-run setup wizard
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "2",
            "MSWEA_GLOBAL_CONFIG_DIR": f"{HOME}/.config/mini-swe-agent",
            **LITELLM_OFFLINE,
            "OPENAI_API_KEY": endpoint.api_key,
            **PLAIN_TERMINAL,
        }
        return Invocation(
            argv=argv,
            env=env,
            home_files={CONFIG: json.dumps(overrides, indent=2)},
            timeout_s=max(300.0, 120.0 * task.max_steps),  # the caller's bound is the real one
        )

    def format_failures(self, result: ProgramResult) -> list[str]:
        """The format errors mini-swe-agent fed back, from its trajectory (in its own words)."""
        raw = result.home_files.get(TRAJECTORY)
        if not raw:
            return []
        try:
            trajectory = json.loads(raw)
        except ValueError:
            return []
        found = []
        for message in trajectory.get("messages", []):
            extra = message.get("extra") or {}
            if isinstance(extra, dict) and extra.get("interrupt_type") == "FormatError":
                reply = str(extra.get("model_response") or "")[:160]
                found.append(f"{_first_line(str(message.get('content', '')))}: {reply!r}")
        return found


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and line not in ("Format error:", "<error>"):
            return line[:200]
    return "format error"
