"""The engine↔site contract, typed once: the progress events a run emits and the bundle it writes.

The engine's emitters (worker.engine.orchestrator, the speed suite, worker.pull), the CLI's live
display, the lab agent and the site import these types; mypy checks the emitters against them
(mypy.ini). worker/tests/test_contract.py checks the bundle types against the engine's schema
(worker/engine/schemas/bundle-1.schema.json) and the site's upload schema
(runs/schemas/upload-1.schema.json), so a field cannot change in one place only.

Blocks whose figures depend on what could be measured (task metadata, the host and GPU parts of
`contention`, the run's settings) stay open dicts; the schemas describe them.
"""

# ruff: noqa: I002
# No `from __future__ import annotations` here: with string annotations Python 3.11 cannot see
# NotRequired, and each TypedDict's __required_keys__ / __optional_keys__ would be wrong for
# whoever reads them at run time.

from collections.abc import Callable
from typing import Any, Literal, NotRequired, Required, TypedDict

RunStatus = Literal["complete", "incomplete", "failed", "cancelled"]
ContentionStatus = Literal["clear", "contended", "unknown"]

# --- the bundle (run.json, bundle-1.x) ----------------------------------------------------


class Summary(TypedDict):
    """A sample's summary (worker.rules.stats.summarize): None where too few values."""

    n: int
    median: float | None
    mean: float | None
    stdev: float | None
    p5: float | None
    p95: float | None
    p99: float | None
    ci95_low: float | None
    ci95_high: float | None
    ci95_coverage: float | None
    peak: float | None


class SpeedSummary(TypedDict):
    decode_tps: Summary
    prefill_tps: Summary
    ttft_ms: Summary
    server_decode_tps: Summary
    server_prefill_tps: Summary
    itl_median_ms: Summary
    decode_ratio_vs_server: float | None
    prefill_ratio_vs_server: float | None
    ttft_minus_server_prompt_ms: float | None
    # Since issue 17's TTFT split; older bundles lack them.
    ttft_client_ms: NotRequired[float | None]
    ttft_server_setup_ms: NotRequired[float | None]


class SpeedMetrics(TypedDict):
    """The v3 CLI's speed fields: medians (0.0 without a sample) and two high percentiles."""

    ttft_ms: float
    prompt_eval_tok_per_sec: float
    generation_tok_per_sec: float
    total_latency_ms: float
    generation_tok_per_sec_p50: float
    generation_tok_per_sec_p95: float
    ttft_ms_p50: float
    ttft_ms_p95: float
    sample_count: int


class TaskRecord(TypedDict):
    task_id: str
    suite: str
    passed: bool
    # None for a measured-only suite's tasks (speed_sweep): measured, never scored.
    score: float | None
    latency_ms: float
    tokens_generated: int
    tokens_prompt: int
    error: str
    # The model's answer: kept in run.json, never uploaded (worker.engine.bundle.upload_view).
    output: str
    execution_ok: bool
    # The server's finish reason, or "loop" where the engine stopped a repeating answer
    # (worker.engine.loops; metadata["loop"] then holds the span's size and repeats).
    finish_reason: str | None
    metadata: dict[str, Any]


class SuiteRecord(TypedDict):
    suite: str
    version: str
    score: float | None  # None for a measured-only suite
    task_count: int
    pass_count: int
    fail_count: int
    median_latency_ms: float
    tasks: list[TaskRecord]
    metadata: dict[str, Any]


class Comparability(TypedDict):
    comparable: bool
    reasons: list[str]
    tasks_expected: int
    tasks_scored: int
    not_scored: dict[str, int]


class Contention(TypedDict):
    status: ContentionStatus
    reasons: list[str]
    interval_s: float | None
    # What could be sampled: CPU shares and load, or other GPU processes, or why not.
    host: dict[str, Any]
    gpu: dict[str, Any]


class Resources(TypedDict):
    """GPU board power and memory, and the server's host RAM, sampled during the run
    (worker.engine.power); every figure None, with its note, where it could not be sampled."""

    energy_method: str | None
    energy_note: str
    gpu_devices_expected: int
    gpu_devices_seen: int
    idle_watts: float | None
    peak_vram_mib: dict[str, float]
    peak_server_rss_mib: float | None
    server_rss_note: str
    interval_s: float | None
    # Medians over the speed trials: joules per output and per prompt token, and how many.
    energy: dict[str, Any]


class ColdStart(TypedDict):
    """Model load time (a managed server's start, or Ollama's load_duration) and the run's
    first request, apart from the warm figures."""

    load_s: float | None
    load_source: Literal["managed", "ollama"] | None
    first_request_ms: float | None
    # True: right after the load; False: the model was already loaded; None: not known.
    first_request_after_load: bool | None
    note: str


class DepthCell(TypedDict):
    """One depth of the sweep: ``measured`` (with its figures), ``skipped`` or ``failed``
    (with a ``reason``: untrusted text on the site)."""

    depth: int
    status: Literal["measured", "skipped", "failed"]
    reason: NotRequired[str]
    n: NotRequired[int]
    # The server's count of tokens already in context (llama.cpp cache_n), and the prompt
    # tokens of the request that put them there.
    depth_tokens: NotRequired[int | None]
    context_tokens: NotRequired[int]
    # Whether the cache held the context in every trial (None: depth 0, or not reported).
    cache_held: NotRequired[bool | None]
    note: NotRequired[str]
    # New prompt tokens the server evaluated in the measured request (median).
    prompt_tokens: NotRequired[int]
    token_count_source: NotRequired[Literal["server", "estimated"]]
    prefill_tps: NotRequired[Summary]
    decode_tps: NotRequired[Summary]
    ttft_ms: NotRequired[Summary]


class DepthSweep(TypedDict):
    method: str
    prompt_tokens: int
    output_tokens: int
    trials: int
    # The context the cells ran with, and where it came from ("server": llama.cpp's per-slot
    # n_ctx; "ollama num_ctx (model context N)": the num_ctx sent for them). Since issue 17.
    server_context: int | None
    context_source: NotRequired[str | None]
    cells: list[DepthCell]


class ConcurrencyCell(TypedDict):
    """One concurrency level: ``measured``, ``skipped`` or ``failed`` (with a ``reason``)."""

    streams: int
    status: Literal["measured", "skipped", "failed"]
    reason: NotRequired[str]
    requests: NotRequired[int]
    failed_requests: NotRequired[int]
    rounds: NotRequired[int]
    # Completion tokens ÷ (last output token − first send), summed over the measured rounds.
    aggregate_tps: NotRequired[float | None]
    # Tokens after each request's first ÷ (last output token − first first token): decode only.
    aggregate_decode_tps: NotRequired[float | None]
    aggregate_rounds_tps: NotRequired[Summary]
    per_stream_tps: NotRequired[Summary]
    ttft_ms: NotRequired[Summary]
    ttft_p50_ms: NotRequired[float]
    ttft_tail_ms: NotRequired[float]
    ttft_tail_label: NotRequired[Literal["p99", "max"]]
    wall_s: NotRequired[float]


class ConcurrencySweep(TypedDict):
    prompt_tokens: int
    output_tokens: int
    server_slots: int | None
    slots_source: str | None
    cells: list[ConcurrencyCell]


class Sweeps(TypedDict, total=False):
    """Speed at context depth and under concurrent streams (the speed_sweep suite)."""

    depth: DepthSweep
    concurrency: ConcurrencySweep


class BundleError(TypedDict):
    kind: str
    message: str
    hint: NotRequired[str]


class Weights(TypedDict, total=False):
    """The weights' digests, when a GGUF was hashed here or Ollama named its blob."""

    sha256: str
    sha256_source: Literal["gguf-file", "ollama-blob"]
    file: str
    file_size_bytes: int
    ollama_digest: str


class ModelInfo(Weights):
    model_id: Required[str]
    family: Required[str]
    parameter_count: Required[str]
    quantization: Required[str]


class Machine(TypedDict):
    machine_id: str
    cpu: str
    gpu: str
    gpu_memory_gb: float
    system_memory_gb: float
    os: str
    backend: str
    is_remote: bool
    # Never uploaded (upload_view drops them): where the endpoint is.
    remote_host: str
    endpoint: str
    hardware_label: str


class GpuInfo(TypedDict):
    index: int
    name: str
    vram_gb: float | None
    # "unified" on Apple Silicon, whose GPU shares the system memory (vram_gb is the RAM).
    memory: NotRequired[str]


class Hardware(TypedDict):
    attributed: bool
    os: str
    os_version: str
    architecture: str
    cpu_model: str
    cpu_physical_cores: int | None
    cpu_logical_cores: int | None
    # Apple Silicon's two kinds of core, when sysctl names them.
    cpu_performance_cores: NotRequired[int]
    cpu_efficiency_cores: NotRequired[int]
    ram_gb: float | None
    gpus: list[GpuInfo]
    gpu_driver_version: str
    cuda_version: str
    apple_silicon: bool
    gpu_source: Literal["nvml", "sysctl", "override", "none", "legacy"]
    notes: list[str]
    overrides: dict[str, Any]
    label: str


class EngineInfo(TypedDict):
    name: str
    version: str
    kind: str
    client: str


class Launch(TypedDict, total=False):
    """How the server was started, as far as the server or its command line tells."""

    context_length: int
    kv_cache_type: str
    speculative: str | bool | dict[str, Any]
    parallel_slots: int
    model_file: str
    draft_model: str
    command: str
    command_source: Literal["user", "process"]
    settings: dict[str, str | float | bool]


class Bundle(TypedDict):
    """What the engine writes to run.json (1.1). Fields the schema leaves optional for 1.0 or
    legacy files (comparability, contention, scoring_mode, …) are always written by the engine;
    source_format and extras come only from the legacy reader."""

    bundle_schema_version: str
    source_format: NotRequired[Literal["bundle-1", "benchloop-cli-0.2.3", "benchloop-cli-0.3.0"]]
    version: str
    benchmark_id: str
    benchmark_version: str
    # worker.rules.scoring.SPEED_METHOD_VERSION (bundles from before it was recorded lack it).
    speed_method_version: NotRequired[str]
    benchmark_profile: str
    requested_profile: str
    manifest_hash: str
    score_schema_version: str
    coverage_score: float
    comparable: bool
    comparability: Comparability
    contention: Contention
    run_id: str
    client_run_id: str
    status: RunStatus
    timestamp: str
    finished_at: str | None
    error: BundleError | None
    model: ModelInfo
    machine: Machine
    hardware: Hardware
    engine: EngineInfo
    launch: Launch
    provider: str
    harness: str
    harness_version: str
    is_remote: bool
    scoring_mode: Literal["local", "remote"]
    scoring_reason: str
    total_runtime_sec: float
    overall_score: float | None
    quality_score: float | None
    speed_score: float | None
    reliability_score: float
    value_score: float | None
    speed_metrics: SpeedMetrics
    speed_summary: SpeedSummary
    settings: dict[str, Any]
    suites: dict[str, SuiteRecord]
    # Written by every engine since issue 17; older bundles lack them.
    resources: NotRequired[Resources]
    cold_start: NotRequired[ColdStart]
    # Written when the run included the speed_sweep suite (profiles full and speed-deep).
    sweeps: NotRequired[Sweeps]
    extras: NotRequired[dict[str, Any]]


# --- progress events (a run's on_event callback, a lab job's event stream) -----------------


class HashingWeights(TypedDict):
    """Before a weights file not yet in the hash cache is read (a large one takes a while)."""

    type: Literal["hashing_weights"]
    file: str
    size_bytes: int


class TrialRule(TypedDict):
    """How many trials a speed cell runs (worker.engine.adaptive): between ``floor`` and
    ``ceiling``, stopping once each measured figure's interval half-width, relative to its
    median, is within ``targets`` (by figure kind); floor = ceiling for the fixed rule."""

    mode: Literal["adaptive", "fixed"]
    floor: int
    ceiling: int
    targets: dict[str, float]
    interval: str


class RunStarted(TypedDict):
    type: Literal["run_started"]
    run_id: str
    client_run_id: str
    total_tasks: int
    suites: list[str]
    suite_task_counts: dict[str, int]
    benchmark_profile: str
    requested_profile: str
    manifest_hash: str
    # The sweeps' trials, and the speed suite's when its rule is fixed.
    speed_trials: int
    # The speed suite's rule (since speed method 2): with an adaptive rule a cell runs up to
    # its ceiling, and a progress display counts that many as the most it may take.
    speed_trial_rule: NotRequired[TrialRule]
    model: str
    engine: EngineInfo
    scoring_mode: Literal["local", "remote"]


class SuiteStarted(TypedDict):
    type: Literal["suite_started"]
    suite: str
    task_count: int


class TaskStarted(TypedDict):
    type: Literal["task_started"]
    suite: str
    task_id: str


class TaskProgress(TypedDict):
    """Live only (throttled, never stored by the site): a speed trial's decode rate so far."""

    type: Literal["task_progress"]
    suite: str
    task_id: str
    trial: int
    # The most trials this cell may run (its rule's ceiling), and the fewest (since speed
    # method 2; absent: ``trials`` is a fixed count).
    trials: int
    trials_floor: NotRequired[int]
    chunks: int
    live_tps: float | None


class TrialCompleted(TypedDict):
    type: Literal["trial_completed"]
    suite: str
    task_id: str
    trial: int
    ok: bool
    # A trial that answered (ok) reports its figures.
    decode_tps: NotRequired[float | None]
    ttft_ms: NotRequired[float | None]
    prefill_tps: NotRequired[float | None]


class TaskCompleted(TypedDict):
    type: Literal["task_completed"]
    suite: str
    task_id: str
    score: float | None
    passed: bool
    latency_ms: float
    error: str
    completed_tasks: int
    total_tasks: int
    decode_tps: float | None


class SuiteCompleted(TypedDict):
    type: Literal["suite_completed"]
    suite: str
    score: float | None
    pass_count: int
    task_count: int


class RunCompleted(TypedDict):
    type: Literal["run_completed"]
    run_id: str
    path: str
    status: RunStatus
    overall_score: float | None
    quality_score: float | None
    speed_score: float | None
    reliability_score: float
    total_runtime_sec: float
    benchmark_profile: str
    coverage_score: float
    comparable: bool


class Cancelled(TypedDict):
    """A lab job's cancel button stopped the run; the bundle keeps the finished tasks."""

    type: Literal["cancelled"]
    reason: str
    status: RunStatus
    path: str


class RunFailed(TypedDict):
    type: Literal["run_failed"]
    error: str
    # The engine's own failures name the bundle; a lab host's (no server, no model) cannot.
    exception_class: NotRequired[str]
    status: NotRequired[RunStatus]
    path: NotRequired[str]


class Log(TypedDict):
    """A lab host's own line (the managed server started, a model is being pulled)."""

    type: Literal["log"]
    message: str


class ModelPull(TypedDict):
    type: Literal["model_pull"]
    model: str
    status: str
    total: NotRequired[int]
    completed: NotRequired[int]
    percent: NotRequired[float]


RunEvent = (
    HashingWeights
    | RunStarted
    | SuiteStarted
    | TaskStarted
    | TaskProgress
    | TrialCompleted
    | TaskCompleted
    | SuiteCompleted
    | RunCompleted
    | Cancelled
    | RunFailed
)
"""What the engine emits during prepare_run and execute."""

ProgressEvent = RunEvent | Log | ModelPull
"""Everything a lab job's event stream carries: the run's events and the host's own."""

RunCallback = Callable[[RunEvent], None]
"""prepare_run's and execute's ``on_event``."""

EventCallback = Callable[[ProgressEvent], None]
"""A lab job's event sink: the run's events and the host's own."""
