"""Answer a quick prompt on the host's own model: a live token count, then TTFT and tok/s.

Prompts do not go through the benchmark queue, where a prompt waited behind every job ahead
of it: each lab worker answers its host's prompts from a thread of its own, outside the Celery
pool that runs the jobs, so a prompt is answered within seconds even while a job runs. It
then shares the server with the job: the prompt records the job (whose page lists it, since
the speed figures around that moment may be slower), and its page names the job and when it
should end.
"""

from __future__ import annotations

import logging
import time

from django.utils import timezone

from lab.models import QuickPrompt
from runs import bounds

log = logging.getLogger(__name__)
PROGRESS_EVERY_SECONDS = 0.3
MAX_TOKENS = 256


def answer_prompt(prompt_id: int) -> str:
    from lab.labhost import current_host_name
    from worker.engine.errors import EngineError
    from worker.engine.metrics import request_metrics
    from worker.engine.providers import make_provider
    from worker.engine.providers.base import ChatRequest
    from worker.engine.transport import Transport

    quick = QuickPrompt.objects.select_related("host").get(pk=prompt_id)
    if quick.host.name != current_host_name() or not quick.host.is_approved:
        return "not for this host"
    # Claimed atomically: the idle thread and the runner may both find the same prompt.
    if not QuickPrompt.objects.filter(pk=prompt_id, status=QuickPrompt.Status.QUEUED).update(
        status=QuickPrompt.Status.STREAMING
    ):
        return "already answered"
    api = (
        "ollama"
        if any(
            s.get("kind") == "ollama" and s.get("url") == quick.server_url
            for s in quick.host.inventory
        )
        else "openai"
    )
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


def answer_waiting(host_name: str, *, limit: int = 20) -> int:
    """Answer this host's queued prompts, oldest first; how many were answered (or failed)."""
    from lab.models import WorkerHost

    answered = 0
    for prompt_id in (
        QuickPrompt.objects.filter(host__name=host_name, status=QuickPrompt.Status.QUEUED)
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    ):
        running = WorkerHost.objects.filter(name=host_name).values_list("current_job", flat=True)
        QuickPrompt.objects.filter(pk=prompt_id).update(during_job_id=running.first())
        try:
            outcome = answer_prompt(prompt_id)
        except Exception as exc:  # the consumer lives on; the prompt says what went wrong
            log.exception("quick prompt %s failed", prompt_id)
            QuickPrompt.objects.filter(pk=prompt_id).update(
                status=QuickPrompt.Status.FAILED,
                error=bounds.storable_text(f"{type(exc).__name__}: {exc}")[:2000],
                finished_at=timezone.now(),
            )
            outcome = "failed"
        answered += outcome == "done" or outcome.startswith("failed")
    return answered
