"""Parsers for run records: v2 and v3 run.json, the v3 publish envelope, failed runs, bundles."""

from __future__ import annotations

import re
from typing import Literal

from runs import bounds, normalize
from runs.importers.records import (
    FormatError,
    HardwareRecord,
    ImportedSuite,
    ImportedTask,
    Node,
    RunRecord,
    SampleRecord,
)
from worker.rules.comparability import reasons_for_bundle
from worker.rules.scoring import MEASURED_ONLY, is_speed_only
from worker.rules.stats import MIN_MEDIAN_N, summarize

MAX_OUTPUT = 20_000
MAX_SETTINGS = 60
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CTX_FLAG = re.compile(r"(?:^|\s)(?:-c|--ctx-size)\s+(\d+)")
_KV_FLAG = re.compile(r"(?:^|\s)(?:-ctk|--cache-type-k)\s+(\S+)")
_DRAFT_FLAG = re.compile(r"(?:^|\s)(?:-md|--model-draft)\s+(\S+)")


def parse_run(node: Node, source_format: str) -> RunRecord:
    """One bundle-1 object (every older run format is upgraded to it first) into a record."""
    data = node.obj()
    score_schema = node.get("score_schema_version", required=False).str()
    scale = "v2" if score_schema.split(".")[0] in ("", "2") else "v3"
    if _selected_speed_only(node):
        scale = "speed"

    model = node.get("model")
    model_id = model.get("model_id").str()
    if not model_id.strip():
        raise model.get("model_id").fail("model id is empty")
    parsed_model = normalize.parse_model(model_id)
    provider = node.get("provider", required=False).str()
    machine = node.get("machine", required=False)
    is_remote_scoring = bool(node.get("is_remote", required=False).bool())
    command_used = node.get("command_used", required=False).str(max_length=4000, kind=bounds.TEXT)

    record = RunRecord(
        source_format=source_format,
        score_schema_version="" if scale == "v2" else score_schema,
        started_at=node.get("timestamp").timestamp(),
        model_id=model_id,
        score_scale=scale,
        client_run_id=node.get("client_run_id", required=False).str(),
        quantization=model.get("quantization", required=False).str()
        or parsed_model["quantization"],
        model_sha256=_weights_digest(model),
        engine=normalize.engine_from_provider(provider),
        provider=provider,
        harness=node.get("harness", required=False).str(default="raw") or "raw",
        harness_version=node.get("harness_version", required=False).str(),
        scoring_mode="remote" if is_remote_scoring else "local",
        benchmark_id=node.get("benchmark_id", required=False).str(default="benchloop"),
        benchmark_version=node.get("benchmark_version", required=False).str(),
        speed_version=node.get("speed_method_version", required=False).str()[:20],
        profile=node.get("benchmark_profile", required=False).str(),
        requested_profile=node.get("requested_profile", required=False).str(),
        manifest_hash=node.get("manifest_hash", required=False).str(),
        coverage_score=node.get("coverage_score", required=False).score(),
        comparable=bool(node.get("comparable", required=False).bool()),
        noncomparable_reasons=_reasons(node),
        total_runtime_sec=node.get("total_runtime_sec", required=False).num(minimum=0),
        command_used=command_used,
        raw_payload=data,
    )
    record.comparable = record.comparable and not record.noncomparable_reasons
    if machine.value is not None:
        record.hardware = _hardware(machine, node.get("hardware", required=False))
    _apply_launch(record, node, command_used)
    _apply_contention(record, node)
    if data.get("status") == "failed":
        record.outcome = "failed"
        error = node.get("error", required=False)
        # Our bundle writes {kind, message, hint}; the 0.3.0 failed record a plain string.
        if isinstance(error.value, dict):
            error = error.get("message", required=False)
        record.error = error.str(max_length=100_000, kind=bounds.RAW)[:2000]
        record.comparable = False
        return record
    if data.get("status") in ("incomplete", "cancelled"):
        record.outcome = "incomplete"
        record.comparable = False
    for name in ("overall", "quality", "speed", "reliability", "value"):
        setattr(record, f"{name}_score", node.get(f"{name}_score").score())
    record.suites = [_suite(name, suite) for name, suite in node.get("suites").items()]
    if scale != "v2" and not any(suite.suite == "speed" for suite in record.suites):
        # Without the speed suite nothing scored speed: v3 engines before issue 32 wrote 0.0.
        record.speed_score = None
    _apply_speed(record, node)
    return record


def _hardware(machine: Node, detail: Node) -> HardwareRecord | None:
    """The machine a run was measured on. `detail` is the bundle's `hardware` block (the
    CLI's full detection), where it has one."""
    if machine.get("is_remote", required=False).bool():
        return None  # a remote endpoint's hardware is not the submitter's to claim
    cpu = machine.get("cpu", required=False).str()
    gpu = machine.get("gpu", required=False).str()
    label = machine.get("hardware_label", required=False).str()
    # The label is a user's override or the CLI's summary: "RTX 4090 24GB", or, on a machine
    # without a GPU, "AMD EPYC 512GB RAM", which is no GPU at all.
    if not gpu and label:
        if normalize.looks_like_cpu(label):
            cpu = cpu or label
        elif normalize.gpu_vendor(label):
            gpu = label
    channels = machine.get("memory_channels", required=False)
    if channels.value is None and isinstance(detail.value, dict):
        channels = detail.get("memory_channels", required=False)
    return HardwareRecord(
        cpu=cpu,
        gpu=gpu,
        gpu_count=machine.get("gpu_count", required=False).int() or 1,
        vram_gb=machine.get("gpu_memory_gb", required=False).num(minimum=0, maximum=100_000),
        ram_gb=machine.get("system_memory_gb", required=False).num(minimum=0, maximum=100_000),
        os_name=machine.get("os", required=False).str(),
        memory_channels=channels.int(minimum=1),
    )


def _apply_launch(record: RunRecord, node: Node, command_used: str) -> None:
    """Launch settings from our bundle's `launch`/`engine`, else from a llama-server command."""
    engine = node.get("engine", required=False)
    if engine.value is not None:
        record.engine = normalize.engine_from_provider(engine.get("name").str())
        record.engine_version = engine.get("version", required=False).str()
    launch = node.get("launch", required=False)
    if launch.value is not None:
        record.context_length = launch.get("context_length", required=False).int(minimum=1)
        record.kv_cache_type = launch.get("kv_cache_type", required=False).str()
        record.draft_model = launch.get("draft_model", required=False).str()
        record.launch_settings = normalize.normalise_launch_settings(
            _settings(launch.get("settings", required=False))
        )
        if not record.model_sha256:
            record.model_sha256 = normalize.normalise_digest(
                launch.get("model_sha256", required=False).str()
            )
        if not record.command_used:
            record.command_used = launch.get("command", required=False).str(
                max_length=4000, kind=bounds.TEXT
            )
        return
    if "llama-server" in command_used:
        record.engine = "llama.cpp"
    if match := _CTX_FLAG.search(command_used):
        record.context_length = int(match.group(1))
        record.sources["context_length"] = "command_used"
    if match := _KV_FLAG.search(command_used):
        record.kv_cache_type = match.group(1)
        record.sources["kv_cache_type"] = "command_used"
    if match := _DRAFT_FLAG.search(command_used):
        record.draft_model = match.group(1)
        record.sources["draft_model"] = "command_used"


def _selected_speed_only(node: Node) -> bool:
    """Whether the run asked for the speed suite alone (a failed run has no suites to show it)."""
    settings = node.get("settings", required=False).value
    selected = settings.get("selected_suites") if isinstance(settings, dict) else None
    if isinstance(selected, list) and selected and all(isinstance(s, str) for s in selected):
        return is_speed_only(selected)
    return False


def _weights_digest(model: Node) -> str:
    """The GGUF's sha256 where it is known, else Ollama's manifest digest: 64 hexadecimal
    digits, Ollama's "sha256:" prefix allowed."""
    for key in ("sha256", "ollama_digest", "digest"):
        field_node = model.get(key, required=False)
        value = field_node.str()
        digest = normalize.normalise_digest(value)
        if value and not _HEX64.fullmatch(digest):
            raise field_node.fail("expected 64 hexadecimal digits")
        if digest:
            return digest
    return ""


def _reasons(node: Node) -> list[str]:
    """Why the run is not comparable, by the engine's own rule (worker.rules.comparability)."""
    block = node.get("comparability", required=False)
    if block.value is not None:
        for item in block.get("reasons").list():
            item.str(max_length=300)
    return reasons_for_bundle(node.obj())


def _settings(settings: Node) -> dict[str, str | float | bool | None]:
    """Launch settings that name the stack: a flat object of strings, numbers and booleans."""
    if settings.value is None:
        return {}
    out: dict[str, str | float | bool | None] = {}
    items = settings.items()
    if len(items) > MAX_SETTINGS:
        raise settings.fail(f"more than {MAX_SETTINGS} launch settings")
    for key, value in items:
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", key):
            raise value.fail("a launch setting's name is a short lower-case identifier")
        if isinstance(value.value, bool):
            out[key] = value.value
        elif isinstance(value.value, str):
            out[key] = value.str(max_length=200)
        else:
            out[key] = value.num()
    return out


def _apply_contention(record: RunRecord, node: Node) -> None:
    block = node.get("contention", required=False)
    if block.value is None:
        return
    status = block.get("status").str()
    if status not in ("clear", "contended", "unknown"):
        raise block.get("status").fail("expected clear, contended or unknown")
    record.contention = block.obj()
    record.contention_status = status


def _suite(name: str, suite: Node) -> ImportedSuite:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise suite.fail(f"suite name {name[:40]!r} is not a plain identifier")
    # A measured-only suite (the sweeps) has no score, whatever an older CLI wrote there.
    scored = name not in MEASURED_ONLY
    tasks = (
        [_task(task, scored) for task in suite.get("tasks", required=False).list()]
        if suite.has("tasks")
        else []
    )
    task_count = suite.get("task_count", required=False).int() or len(tasks)
    pass_count = suite.get("pass_count", required=False).int() or 0
    if pass_count > task_count:
        raise suite.get("pass_count").fail(f"{pass_count} passes out of {task_count} tasks")
    return ImportedSuite(
        suite=name,
        score=suite.get("score").score() if scored else None,
        task_count=task_count,
        pass_count=pass_count,
        fail_count=suite.get("fail_count", required=False).int() or task_count - pass_count,
        median_latency_ms=suite.get("median_latency_ms", required=False).num(minimum=0),
        tasks=tasks,
    )


def _task(task: Node, scored: bool = True) -> ImportedTask:
    metadata = task.get("metadata", required=False)
    record = ImportedTask(
        task_id=task.get("task_id").str(),
        passed=bool(task.get("passed", required=False).bool()),
        score=task.get("score", required=False).score() if scored else None,
        latency_ms=task.get("latency_ms", required=False).num(minimum=0),
        tokens_generated=task.get("tokens_generated", required=False).int(),
        tokens_prompt=task.get("tokens_prompt", required=False).int(),
        execution_ok=task.get("execution_ok", required=False).bool(default=None),
        finish_reason=task.get("finish_reason", required=False).str(),
        error=task.get("error", required=False).str(max_length=100_000, kind=bounds.RAW)[:2000],
        output=task.get("output", required=False).str(max_length=1_000_000, kind=bounds.RAW)[
            :MAX_OUTPUT
        ],
        metadata=metadata.obj() if metadata.value is not None else {},
    )
    if metadata.value is not None and metadata.has("trials"):
        record.samples = [_sample(i, t) for i, t in enumerate(metadata.get("trials").list(), 1)]
    return record


def _sample(position: int, trial: Node) -> SampleRecord:
    metrics = trial.get("speed_metrics", required=False)
    source = metrics if metrics.value is not None else trial

    def metric(*names: str) -> float | None:
        for name in names:
            value = source.get(name, required=False).num(minimum=0)
            if value is not None:
                return value
        return None

    return SampleRecord(
        trial_index=trial.get("trial_index", required=False).int() or position,
        is_warmup=bool(trial.get("warmup", required=False).bool()),
        ttft_ms=metric("ttft_ms"),
        prefill_tps=metric("prompt_eval_tok_per_sec", "prefill_tps"),
        decode_tps=metric("generation_tok_per_sec", "decode_tps"),
        total_latency_ms=metric("total_latency_ms"),
        tokens_generated=trial.get("tokens_generated", required=False).int(),
        tokens_prompt=trial.get("tokens_prompt", required=False).int(),
    )


_SUMMARY_FIELDS = {"decode_tps": "decode_tps", "prefill_tps": "prefill_tps", "ttft_ms": "ttft_ms"}
# The figures of a summary (worker.rules.contract.Summary) a run keeps per speed metric.
_KEPT_STATS: tuple[Literal["median", "mean", "stdev", "p5", "p95", "peak"], ...] = (
    "median",
    "mean",
    "stdev",
    "p5",
    "p95",
    "peak",
)


def _apply_speed(record: RunRecord, node: Node) -> None:
    """Run-level speed: our bundle's summary, else recomputed from trials, else the file's own."""
    summary = node.get("speed_summary", required=False)
    if summary.value is not None:
        for metric in _SUMMARY_FIELDS:
            block = summary.get(metric, required=False)
            if block.value is None:
                continue
            for stat in _KEPT_STATS:
                record.speed[f"{metric}_{stat}"] = block.get(stat, required=False).num(minimum=0)
            n = block.get("n", required=False).int()
            if n is not None and n < MIN_MEDIAN_N:
                # Bundles before 1.1 wrote a "median" of one or two samples.
                record.speed[f"{metric}_median"] = None
            if metric == "decode_tps":
                record.speed_sample_count = n
        return
    samples = [
        s
        for suite in record.suites
        if suite.suite == "speed"
        for task in suite.tasks
        for s in task.samples
        if not s.is_warmup
    ]
    if samples:
        for metric in _SUMMARY_FIELDS:
            values = [getattr(s, metric) for s in samples]
            values = [v for v in values if v]  # the old CLIs wrote 0 for "not measured"
            # Below MIN_MEDIAN_N values there is no median to rank on (summarize says None).
            stats = summarize(values, higher_is_better=metric != "ttft_ms")
            for stat in _KEPT_STATS:
                record.speed[f"{metric}_{stat}"] = stats[stat]
        record.speed_sample_count = len(samples)
        return
    metrics = node.get("speed_metrics", required=False)
    if metrics.value is None or not metrics.obj():
        return
    # v2 published run-level means, v3 medians of the per-task selected trials.
    stat = "median" if record.score_scale == "v3" else "mean"
    for field_name, key in (
        (f"decode_tps_{stat}", "generation_tok_per_sec"),
        (f"prefill_tps_{stat}", "prompt_eval_tok_per_sec"),
        (f"ttft_ms_{stat}", "ttft_ms"),
        ("decode_tps_p95", "generation_tok_per_sec_p95"),
        ("ttft_ms_p95", "ttft_ms_p95"),
    ):
        value = metrics.get(key, required=False).num(minimum=0)
        record.speed[field_name] = value or None
    record.speed_sample_count = metrics.get("sample_count", required=False).int()


def check_not_empty(record: RunRecord, node: Node) -> None:
    if record.outcome == "complete" and not record.suites:
        raise node.get("suites").fail("a completed run has no suites")


__all__ = ["FormatError", "check_not_empty", "parse_run"]
