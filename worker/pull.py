"""Pull a missing model into Ollama, reporting progress (no Django imports).

Ollama's POST /api/pull streams one JSON object per line: a status ("pulling manifest",
"pulling <layer>", "verifying sha256 digest", "writing manifest", "success"), with `digest`,
`total` and `completed` byte counts on layer lines, or an `error`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from worker.rules.contract import ModelPull


class PullError(RuntimeError):
    pass


def installed_models(base_url: str, *, timeout: float = 10) -> list[str]:
    response = httpx.get(f"{base_url.rstrip('/')}/api/tags", timeout=timeout)
    response.raise_for_status()
    return [m.get("name", "") for m in response.json().get("models", [])]


def needs_pull(base_url: str, model: str) -> bool:
    names = installed_models(base_url)
    wanted = model if ":" in model else f"{model}:latest"
    return wanted not in names and model not in names


def pull_model(
    base_url: str,
    model: str,
    on_progress: Callable[[ModelPull], None],
    *,
    min_interval: float = 1.0,
    timeout: float = 3600,
) -> None:
    """Stream the pull; report each new status, and layer progress at most once a `min_interval`."""
    last_status, last_report = None, 0.0
    url = f"{base_url.rstrip('/')}/api/pull"
    with httpx.stream(
        "POST",
        url,
        json={"model": model, "stream": True},
        timeout=httpx.Timeout(timeout, connect=10),
    ) as response:
        if response.status_code != 200:
            raise PullError(f"Ollama refused to pull {model}: HTTP {response.status_code}")
        for line in response.iter_lines():
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PullError(f"unreadable pull progress line: {line[:80]!r}") from exc
            if "error" in event:
                raise PullError(f"pulling {model} failed: {event['error']}")
            status = str(event.get("status", ""))
            now = time.monotonic()
            total, completed = event.get("total"), event.get("completed")
            if status != last_status or now - last_report >= min_interval:
                progress = ModelPull(type="model_pull", model=model, status=status)
                if total:
                    progress["total"] = total
                    progress["completed"] = completed or 0
                    progress["percent"] = round(100 * (completed or 0) / total, 1)
                on_progress(progress)
                last_status, last_report = status, now
            if status == "success":
                return
    raise PullError(f"the pull of {model} ended without success")
