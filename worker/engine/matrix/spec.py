"""Types shared by the matrix's proxy, runner, adapters and suite."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from ...rules.stats import median

# What every harness program gets in its environment: no colours, no pager, no terminal tricks
# (nobody reads its output live), and litellm's bundled model-cost map instead of a fetch.
PLAIN_TERMINAL = {"TERM": "dumb", "NO_COLOR": "1", "PAGER": "cat"}
LITELLM_OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@dataclass(frozen=True)
class CageLimits:
    """What one harness run may use, all of it together (docs/harnesses.md, "The cage's bounds").

    ``memory_mb`` bounds each process's address space and, where a cgroup is ours to make, the
    run's memory as a whole; ``processes`` counts threads too; ``tmp_mb`` and ``shm_mb`` size the
    run's private /tmp and /dev/shm (memory, counted against ``memory_mb`` under a cgroup)."""

    processes: int = 256
    memory_mb: int = 4096
    file_mb: int = 256
    cpu_s: int = 900
    open_files: int = 1024
    tmp_mb: int = 256
    shm_mb: int = 64


@dataclass(frozen=True)
class HarnessSpec:
    """A real harness program, pinned: what is installed and how it is started."""

    name: str  # as in --harness: "aider", "hermes-agent", "mini-swe-agent"
    package: str  # on PyPI
    version: str  # pinned
    program: str  # the console script in the install's bin/
    extra: str  # the CLI's optional extra that installs it
    description: str
    limits: CageLimits = field(default_factory=CageLimits)  # per harness, per run


@dataclass(frozen=True)
class Endpoint:
    """The model as the harness sees it, inside its cage."""

    base_url: str  # ends in /v1
    model: str
    api_key: str = "sk-benchloop-local"


@dataclass(frozen=True)
class HarnessTask:
    """What an adapter needs to know of a matrix task."""

    task_id: str
    prompt: str
    files: tuple[str, ...]  # workspace-relative paths the task is about
    max_steps: int = 8


@dataclass
class Invocation:
    """One start of a harness program, in the workspace (its working directory)."""

    argv: list[str]  # argv[0]: a program in the install's bin/
    env: dict[str, str] = field(default_factory=dict)
    home_files: dict[str, str] = field(default_factory=dict)  # HOME-relative path -> content
    timeout_s: float = 300.0


@dataclass
class RequestRecord:
    """One model request that passed through the proxy, with the server's own counts."""

    started_s: float  # seconds since the run started
    ended_s: float
    status: int
    stream: bool
    prompt_tokens: int | None = None  # as the server reports them (cached included)
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    source: str = "none"  # "timings" (llama.cpp), "usage", or "none"
    error: str = ""

    @property
    def context_tokens(self) -> int:
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


@dataclass
class ProgramResult:
    """What one harness run did, as the parent saw it."""

    returncode: int | None  # the program's exit status, -N for a death by signal N
    timed_out: bool
    wall_ms: float
    stdout: str
    stderr: str
    requests: list[RequestRecord]
    denials: list[str]  # what the cage stopped, in words
    workspace: Path
    transcript: list[dict] = field(default_factory=list)  # request bodies' messages, bounded
    home_files: dict[str, str] = field(default_factory=dict)  # text files left in HOME, bounded
    isolation: str = ""  # the cage, in words
    # The cage's limits the run hit, from the parent's own evidence (the exit signal, the
    # cgroup's counters, the size of the files left behind): never the program's words.
    limit_hits: list[str] = field(default_factory=list)
    scrubbed: list[str] = field(default_factory=list)  # setuid bits and devices taken away


@dataclass
class Overhead:
    """What a harness cost on one task, from the proxy's records (never the harness's own)."""

    requests: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    wall_ms: float
    model_ms: float  # time with at least one request in flight
    harness_ms: float  # the rest of the wall time
    peak_context: int  # the largest prompt + completion of one request
    format_failures: int = 0

    @classmethod
    def measure(
        cls, requests: list[RequestRecord], wall_ms: float, format_failures: int = 0
    ) -> Overhead:
        spans = sorted((r.started_s, r.ended_s) for r in requests)
        busy, end = 0.0, float("-inf")
        for start, stop in spans:  # the union of the in-flight intervals
            if stop > end:
                busy += stop - max(start, end)
                end = stop
        model_ms = round(busy * 1000, 1)
        return cls(
            requests=len(requests),
            prompt_tokens=sum(r.prompt_tokens or 0 for r in requests),
            cached_tokens=sum(r.cached_tokens or 0 for r in requests),
            completion_tokens=sum(r.completion_tokens or 0 for r in requests),
            wall_ms=round(wall_ms, 1),
            model_ms=model_ms,
            harness_ms=round(max(wall_ms - model_ms, 0.0), 1),
            peak_context=max((r.context_tokens for r in requests), default=0),
            format_failures=format_failures,
        )

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(overheads: list[dict]) -> dict:
    """A suite's overhead: totals and per-task medians of the task records' overhead blocks."""
    if not overheads:
        return {}
    keys = ("requests", "prompt_tokens", "completion_tokens", "wall_ms", "model_ms", "harness_ms")
    out: dict = {"n": len(overheads)}
    for key in keys:
        values = [float(o.get(key) or 0) for o in overheads]
        out[f"{key}_total"] = round(sum(values), 1)
        out[f"{key}_median"] = median(values, digits=1, default=0.0)
    out["peak_context"] = max(int(o.get("peak_context") or 0) for o in overheads)
    out["format_failures"] = sum(int(o.get("format_failures") or 0) for o in overheads)
    return out


class Adapter(Protocol):
    """How one real harness program is told to work on a task."""

    spec: HarnessSpec

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        """The command line, environment and config files for one task."""
        ...

    def format_failures(self, result: ProgramResult) -> list[str]:
        """Edits or tool calls the harness said it could not read, in its own words."""
        ...
