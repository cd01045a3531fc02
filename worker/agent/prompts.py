"""Answer the host's quick prompts on its own model: a live token count, then TTFT and tok/s.

Prompts do not go through the benchmark queue, where a prompt would wait behind every job
ahead of it: the agent asks the site for its host's next prompt from a thread of its own,
outside the Celery pool that runs the jobs, so a prompt is answered within seconds even while a
job runs (the site records which job it shared the server with).
"""

from __future__ import annotations

import logging
import time

from worker.agent.client import Refused, SiteClient
from worker.rules.logcontext import log_context
from worker.rules.protocol import PromptSpec, prompt_path

log = logging.getLogger(__name__)
PROGRESS_EVERY_SECONDS = 0.3


def answer_next(client: SiteClient) -> bool:
    """Answer the host's oldest waiting prompt; False when none was waiting."""
    spec: PromptSpec | None = client.post("prompts/next", {}, patience=10)
    if spec is None:
        return False
    with log_context(prompt_id=spec["id"]):
        try:
            body = answer(spec, lambda tokens, seconds: _progress(client, spec, tokens, seconds))
            client.post(prompt_path(spec["id"], "answer"), body)
        except Refused as exc:  # the prompt is no longer ours to answer
            log.warning("quick prompt %s: %s", spec["id"], exc)
        except Exception as exc:  # the thread lives on; the prompt says what went wrong
            log.exception("quick prompt %s failed", spec["id"])
            client.post(prompt_path(spec["id"], "failed"), {"error": _reason(exc)})
    return True


def answer(spec: PromptSpec, on_progress) -> dict:
    """The reply and its figures, streamed from the server the prompt names."""
    from worker.engine.errors import EngineError
    from worker.engine.metrics import request_metrics
    from worker.engine.providers import make_provider
    from worker.engine.providers.base import ChatRequest
    from worker.engine.transport import Transport

    last_update = [0.0]

    def on_chunk(tokens: int, seconds: float) -> None:
        now = time.monotonic()
        if now - last_update[0] >= PROGRESS_EVERY_SECONDS:
            last_update[0] = now
            on_progress(tokens, seconds)

    try:
        with Transport(spec["server_url"], timeout=120) as transport:
            provider = make_provider(spec["api"], transport, spec["model"])
            response = provider.chat_stream(
                ChatRequest(
                    messages=[{"role": "user", "content": spec["prompt"]}],
                    max_tokens=spec["max_tokens"],
                    temperature=0.7,
                ),
                on_chunk=on_chunk,
            )
    except EngineError as exc:
        raise PromptFailed(exc.message) from exc
    metrics = request_metrics(response)
    return {
        "reply": response.content,
        "ttft_ms": metrics.get("ttft_ms"),
        "decode_tps": metrics.get("decode_tps"),
    }


class PromptFailed(Exception):
    """The server could not answer (its own message)."""


def _progress(client: SiteClient, spec: PromptSpec, tokens: int, seconds: float) -> None:
    try:
        client.post(
            prompt_path(spec["id"], "progress"), {"tokens": tokens, "seconds": seconds}, patience=2
        )
    except Exception:  # a missed tick is harmless; the answer follows
        log.debug("quick prompt %s: progress not sent", spec["id"], exc_info=True)


def _reason(exc: Exception) -> str:
    if isinstance(exc, PromptFailed):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:2000]
