"""Answer a quick prompt on the host's own model: a live token count, then TTFT and tok/s."""

from __future__ import annotations

import time

from django.utils import timezone

from runs import bounds
from worker.models import QuickPrompt

PROGRESS_EVERY_SECONDS = 0.3
MAX_TOKENS = 256


def answer_prompt(prompt_id: int) -> str:
    from worker.engine.errors import EngineError
    from worker.engine.metrics import request_metrics
    from worker.engine.providers import make_provider
    from worker.engine.providers.base import ChatRequest
    from worker.engine.transport import Transport
    from worker.labhost import current_host_name

    quick = QuickPrompt.objects.select_related("host").get(pk=prompt_id)
    if quick.host.name != current_host_name() or not quick.host.is_approved:
        return "not for this host"
    api = (
        "ollama"
        if any(
            s.get("kind") == "ollama" and s.get("url") == quick.server_url
            for s in quick.host.inventory
        )
        else "openai"
    )
    QuickPrompt.objects.filter(pk=prompt_id).update(status=QuickPrompt.Status.STREAMING)
    last_update = [0.0]

    def on_chunk(tokens: int, seconds: float) -> None:
        now = time.monotonic()
        if now - last_update[0] >= PROGRESS_EVERY_SECONDS:
            last_update[0] = now
            QuickPrompt.objects.filter(pk=prompt_id).update(
                reply=f"… {tokens} tokens so far ({tokens / seconds:.1f} tok/s)" if seconds else ""
            )

    try:
        with Transport(quick.server_url, timeout=120) as transport:
            provider = make_provider(api, transport, quick.model)
            response = provider.chat_stream(
                ChatRequest(
                    messages=[{"role": "user", "content": quick.prompt}],
                    max_tokens=MAX_TOKENS,
                    temperature=0.7,
                ),
                on_chunk=on_chunk,
            )
        metrics = request_metrics(response)
    except EngineError as exc:
        QuickPrompt.objects.filter(pk=prompt_id).update(
            status=QuickPrompt.Status.FAILED,
            error=bounds.storable_text(exc.message),
            finished_at=timezone.now(),
        )
        return f"failed: {exc.message}"
    QuickPrompt.objects.filter(pk=prompt_id).update(
        status=QuickPrompt.Status.DONE,
        # The model's own words: a NUL in them must not leave the prompt streaming forever.
        reply=bounds.storable_text(response.content),
        finished_at=timezone.now(),
        ttft_ms=metrics.get("ttft_ms"),
        decode_tps=metrics.get("decode_tps"),
    )
    return "done"
