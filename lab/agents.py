"""What the lab agents may do through the site: host keys, and the host-side workflows the
agent API (lab/agent_api.py) calls. An agent never sees the database; this is its only way in."""

from __future__ import annotations

from typing import Literal, cast

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from lab.models import BenchmarkJob, HostKey, QuickPrompt, WorkerHost
from runs import bounds, limits
from submissions import keys
from worker.rules.protocol import HOST_KEY_PREFIX, JobSpec, PromptSpec

KEY_PURPOSE = "host-key"
PROMPT_MAX_TOKENS = 256


class KeyRefused(Exception):
    """The key is unknown or revoked: the agent must stop (the message says which)."""


def create_host_key(
    *, host_name: str, user: User | None, scopes: list[str] | None = None
) -> tuple[HostKey, str]:
    """A new key for host `host_name`; the plaintext is returned once and never stored."""
    scopes = list(scopes or HostKey.SCOPES)
    unknown = sorted(set(scopes) - set(HostKey.SCOPES))
    if unknown:
        raise ValueError(f"unknown host key scopes: {', '.join(unknown)}")
    problem = bounds.text_problem(host_name) or (
        "is too long" if len(host_name) > limits.max_length(WorkerHost, "name") else ""
    )
    if not host_name or problem:
        raise ValueError(f"lab host name {host_name[:100]!r} {problem or 'is empty'}")
    plaintext, prefix, hashed = keys.new_api_key(HOST_KEY_PREFIX, KEY_PURPOSE)
    key = HostKey.objects.create(
        host_name=host_name, prefix=prefix, hashed_key=hashed, scopes=scopes, created_by=user
    )
    return key, plaintext


def revoke_host_key(*, key: HostKey) -> HostKey:
    """The host stops at its next call (its agent exits on the 401)."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def authenticate(plaintext: str) -> HostKey:
    prefix = keys.split_key(plaintext, HOST_KEY_PREFIX)
    key = HostKey.objects.filter(prefix=prefix).first() if prefix else None
    # Hash even when nothing matched, so timing does not tell a bad prefix from a bad key.
    if key is None or not keys.matches(plaintext, key.hashed_key, KEY_PURPOSE):
        keys.matches(plaintext, "0" * 64, KEY_PURPOSE)
        raise KeyRefused("Invalid host key.")
    if not key.is_active:
        raise KeyRefused("This host key has been revoked.")
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        HostKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def host_of(key: HostKey) -> WorkerHost | None:
    return WorkerHost.objects.filter(name=key.host_name).first()


def job_spec(job: BenchmarkJob) -> JobSpec:
    return {
        "id": job.pk,
        "attempt": job.attempts,
        "max_attempts": job.max_attempts,
        "pool": job.pool,
        # One of BenchmarkJob.Target, whose values are the protocol's targets.
        "target": cast(Literal["endpoint", "managed"], job.target),
        "model": job.model,
        "endpoint_url": job.endpoint_url,
        "provider": job.provider,
        "api_key_ref": job.api_key_ref,
        "binary": job.binary,
        "model_path": job.model_path,
        "launch_flags": list(job.launch_flags),
        "context_length": job.context_length,
        "threads": job.threads,
        "profile": job.profile,
        "suites": list(job.suites),
        "tasks": list(job.tasks),
        "trials": job.trials,
        "harness": job.harness,
        "harness_variant": job.harness_variant,
        "max_tokens": job.max_tokens,
        "thinking_budget": job.thinking_budget,
    }


def owns(host: WorkerHost, job_id: int) -> bool:
    """Whether the job's current claim is this host's: only then may it report on the job."""
    return BenchmarkJob.objects.filter(pk=job_id, host=host).exists()


def claim_prompt(host: WorkerHost) -> PromptSpec | None:
    """The host's oldest waiting prompt, claimed for it (no other consumer gets it)."""
    with transaction.atomic():
        quick = (
            QuickPrompt.objects.select_for_update(skip_locked=True)
            .filter(host=host, status=QuickPrompt.Status.QUEUED)
            .order_by("created_at")
            .first()
        )
        if quick is None:
            return None
        quick.status = QuickPrompt.Status.STREAMING
        # It shares the server with the job running now, whose figures it may slow.
        quick.during_job_id = host.current_job_id
        quick.save(update_fields=["status", "during_job"])
    ollama = any(
        s.get("kind") == "ollama" and s.get("url") == quick.server_url for s in host.inventory
    )
    return {
        "id": quick.pk,
        "server_url": quick.server_url,
        "model": quick.model,
        "prompt": quick.prompt,
        "api": "ollama" if ollama else "openai",
        "max_tokens": PROMPT_MAX_TOKENS,
    }


def _streaming(host: WorkerHost, prompt_id: int):
    return QuickPrompt.objects.filter(pk=prompt_id, host=host, status=QuickPrompt.Status.STREAMING)


def prompt_progress(*, host: WorkerHost, prompt_id: int, tokens: int, seconds: float) -> bool:
    rate = f" ({tokens / seconds:.1f} tok/s)" if seconds > 0 else ""
    return bool(_streaming(host, prompt_id).update(reply=f"… {tokens} tokens so far{rate}"))


def finish_prompt(
    *,
    host: WorkerHost,
    prompt_id: int,
    reply: str,
    ttft_ms: float | None,
    decode_tps: float | None,
) -> bool:
    # The model's own words: a NUL in them must not leave the prompt streaming forever.
    return bool(
        _streaming(host, prompt_id).update(
            status=QuickPrompt.Status.DONE,
            reply=bounds.storable_text(reply)[:20000],
            finished_at=timezone.now(),
            ttft_ms=ttft_ms,
            decode_tps=decode_tps,
        )
    )


def fail_prompt(*, host: WorkerHost, prompt_id: int, error: str) -> bool:
    return bool(
        _streaming(host, prompt_id).update(
            status=QuickPrompt.Status.FAILED,
            error=bounds.storable_text(error)[:2000],
            finished_at=timezone.now(),
        )
    )
