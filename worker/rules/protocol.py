"""What the lab agent and the site say to each other: one typed definition for both sides.

The site (lab/agent_api.py) builds these answers and reads these requests; the agent
(worker/agent/) sends and reads them. Paths are relative to the site's `/api/v1/lab/agent/`.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from .contract import ProgressEvent

# The Celery task the site sends (by name) to a pool's queue with the job id as its argument.
RUN_JOB_TASK = "worker.run_benchmark_job"
API_ROOT = "/api/v1/lab/agent/"
HOST_KEY_PREFIX = "blh_"
# Most events one request may carry; the agent sends what is waiting in chunks of this.
MAX_EVENTS_PER_POST = 100
# What the site keeps of one job's events, all attempts together (a full-profile run with
# retries emits well under half of it), and the most one event may be, as UTF-8 JSON. The
# site refuses what is past either (worker/rules/validate.py checks each event).
MAX_EVENTS_PER_JOB = 5000
MAX_EVENT_BYTES = 8192
# Several per second while a reply streams: they move the live numbers but are not kept.
LIVE_ONLY_EVENTS = frozenset({"task_progress"})


class HostStatus(TypedDict):
    """The answer to `register` and to each host heartbeat."""

    name: str
    approved: bool
    pools: list[str]
    heartbeat_seconds: float
    stale_seconds: float


class JobSpec(TypedDict):
    """What a claim hands the agent: the job as queued, and the attempt it now owns."""

    id: int
    attempt: int
    max_attempts: int
    pool: str
    target: Literal["endpoint", "managed"]
    model: str
    endpoint_url: str
    provider: str
    api_key_ref: str
    binary: str
    model_path: str
    launch_flags: list[str]
    context_length: int | None
    threads: int | None
    profile: str
    suites: list[str]
    tasks: list[str]
    trials: int
    harness: str
    max_tokens: int | None
    # A harness program's variant (Aider's edit format); absent from older sites.
    harness_variant: NotRequired[str]
    # `benchloop run --thinking-budget`; None: the engine's automatic budget. Absent from
    # older sites, which read as None.
    thinking_budget: NotRequired[int | None]


class JobState(TypedDict):
    """The answer to a job heartbeat or event post: is the attempt still the agent's, and did
    someone ask it to stop."""

    ours: bool
    cancel: bool


class SequencedEvent(TypedDict):
    """One engine or host event (worker.rules.contract) with its number in the attempt's stream."""

    seq: int
    event: ProgressEvent


class PromptSpec(TypedDict):
    """A quick prompt the site handed this host (claimed: no other consumer gets it)."""

    id: int
    server_url: str
    model: str
    prompt: str
    api: Literal["openai", "ollama"]
    max_tokens: int


def job_path(job_id: int, action: str) -> str:
    return f"jobs/{job_id}/{action}"


def prompt_path(prompt_id: int, action: str) -> str:
    return f"prompts/{prompt_id}/{action}"
