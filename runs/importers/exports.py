"""Parsers for the earlier product's static exports and the speed probe's JSONL."""

from __future__ import annotations

from collections import defaultdict

from runs import normalize
from runs.importers.records import (
    FormatError,
    HardwareRecord,
    ImportedSuite,
    ImportedTask,
    Node,
    RunRecord,
    SampleRecord,
    load_json,
)
from worker.rules.stats import summarize


def parse_leaderboard_v2(node: Node) -> list[RunRecord]:
    """leaderboard.json: summary rows of v2-scored runs, one per `runs[]` item."""
    records = []
    for row in node.get("runs").list():
        machine = row.get("machine", required=False).str()
        suites = []
        for name, suite in row.get("suites", required=False).items() if row.has("suites") else []:
            tasks = passes = 0
            if name == "agent" and row.has("agent_task_count"):
                tasks = row.get("agent_task_count").int() or 0
                passes = row.get("agent_pass", required=False).int() or 0
            suites.append(
                ImportedSuite(
                    suite=name,
                    score=suite.get("score").score(),
                    task_count=tasks,
                    pass_count=passes,
                    fail_count=tasks - passes,
                )
            )
        decode = row.get("generation_tok_per_sec", required=False).num(minimum=0)
        ttft = row.get("ttft_ms", required=False).num(minimum=0)
        records.append(
            RunRecord(
                source_format="leaderboard-v2",
                started_at=row.get("timestamp").timestamp(),
                model_id=_required_name(row.get("model")),
                score_scale="v2",
                client_run_id=row.get("id").str(),
                provider=row.get("provider", required=False).str(),
                engine=normalize.engine_from_provider(row.get("provider", required=False).str()),
                quantization=normalize.parse_model(row.get("model").str())["quantization"],
                harness=row.get("harness", required=False).str(default="raw") or "raw",
                hardware=_hardware_from_label(machine),
                overall_score=row.get("overall_score").score(),
                quality_score=row.get("quality_score").score(),
                speed_score=row.get("speed_score").score(),
                reliability_score=row.get("reliability_score").score(),
                # v2 rows publish run-level means; 0 meant "no speed suite in this run".
                speed={"decode_tps_mean": decode or None, "ttft_ms_mean": ttft or None},
                suites=suites,
                raw_payload=row.obj(),
            )
        )
    return records


def _required_name(node: Node) -> str:
    text = node.str()
    if not text.strip():
        raise node.fail("is empty")
    return text


def _hardware_from_label(label: str) -> HardwareRecord | None:
    """The export's `machine` is whichever of GPU, CPU or machine id was known. A CPU's name
    (even one that mentions its integrated Radeon graphics) is a CPU-only machine."""
    if not label:
        return None
    if normalize.gpu_vendor(label) and not normalize.looks_like_cpu(label):
        cpu = label if normalize.gpu_vendor(label) == "apple" else ""
        return HardwareRecord(gpu=label, cpu=cpu)
    return HardwareRecord(cpu=label, gpu="", gpu_count=0)


def parse_leaderboard_v1(node: Node) -> list[RunRecord]:
    """leaderboard-v1.json: speed-only llama-server stacks with their speed spread."""
    records = []
    for entry in node.get("entries").list():
        model = entry.get("model")
        runtime = entry.get("runtime", required=False)
        draft = entry.get("draft_model", required=False)
        hardware = entry.get("hardware", required=False)
        speed = entry.get("speed")
        runs = entry.get("benchmarks", required=False)
        sample_count = None
        if runs.value is not None and runs.has("speed"):
            sample_count = runs.get("speed").get("runs", required=False).int()
        launch = {}
        for key in ("draft_params", "rope_scaling"):
            value = entry.get(key, required=False)
            if value.value is not None:
                launch[key] = value.obj()
        kv_k = entry.get("kv_cache_type_k", required=False).str()
        kv_v = entry.get("kv_cache_type_v", required=False).str()
        draft_name = ""
        if draft.value is not None:
            draft_name = draft.get("name").str()
            if draft.get("quant", required=False).str():
                draft_name = f"{draft_name}:{draft.get('quant').str()}"
        submitter = entry.get("submitter", required=False)
        records.append(
            RunRecord(
                source_format="leaderboard-v1",
                started_at=entry.get("submitted_at").timestamp(),
                model_id=_required_name(model.get("name")),
                quantization=model.get("quant", required=False).str(),
                score_scale="speed",
                client_run_id=entry.get("stack_id").str(),
                engine=normalize.engine_from_provider(
                    runtime.get("name", required=False).str(default="llama-server")
                    if runtime.value is not None
                    else "llama-server"
                ),
                engine_version=_runtime_version(runtime),
                provider="openai_compat",
                context_length=entry.get("context_length", required=False).int(minimum=1),
                kv_cache_type=kv_k if kv_k == kv_v or not kv_v else f"{kv_k}/{kv_v}",
                draft_model=draft_name,
                launch_settings=launch,
                hardware=HardwareRecord(
                    gpu=hardware.get("gpu", required=False).str(),
                    vram_gb=hardware.get("vram_gb", required=False).num(minimum=0),
                    cpu=hardware.get("cpu", required=False).str(),
                    ram_gb=hardware.get("ram_gb", required=False).num(minimum=0),
                    os_name=hardware.get("os", required=False).str(),
                )
                if hardware.value is not None
                else None,
                speed={
                    "decode_tps_peak": speed.get("peak_tps").num(minimum=0),
                    "decode_tps_mean": speed.get("mean_tps").num(minimum=0),
                    "decode_tps_median": speed.get("median_tps").num(minimum=0),
                    "decode_tps_stdev": speed.get("stdev_tps", required=False).num(minimum=0),
                    "prefill_tps_mean": speed.get("prompt_tps_mean", required=False).num(minimum=0),
                },
                speed_sample_count=sample_count,
                submitter_name=submitter.get("name", required=False).str()
                if submitter.value is not None
                else "",
                raw_payload=entry.obj(),
            )
        )
    return records


def _runtime_version(runtime: Node) -> str:
    if runtime.value is None:
        return ""
    version = runtime.get("version", required=False).str()
    commit = runtime.get("commit", required=False).str()
    return " ".join(part for part in (version, commit and f"({commit})") if part)


def parse_speed_jsonl(text: str, *, model_id: str = "") -> list[RunRecord]:
    """bench_results.jsonl: a summary line, then its run lines, grouped by `tag`."""
    summaries, runs_by_tag = _speed_lines(text)
    if not summaries:
        raise FormatError("", "no summary line found")
    records = []
    for summary in summaries:
        tag = summary.get("tag").str()
        runs = runs_by_tag.get(tag, [])
        records.append(_speed_record(summary, tag, runs, _speed_tasks(runs), model_id))
    return records


def _speed_lines(text: str) -> tuple[list[Node], dict[str, list[Node]]]:
    """The file's summary lines, and its run lines by tag."""
    summaries: list[Node] = []
    runs_by_tag: dict[str, list[Node]] = defaultdict(list)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        value = load_json(line, position=f"line {number}")
        node = Node(value, f"line {number}")
        kind = node.get("kind").str()
        if kind == "summary":
            summaries.append(node)
        elif kind == "run":
            runs_by_tag[node.get("tag").str()].append(node)
        else:
            raise node.get("kind").fail(f"unknown line kind {kind!r}")
    return summaries, runs_by_tag


def _speed_tasks(runs: list[Node]) -> dict[str, ImportedTask]:
    """One task per prompt, with a sample per run line."""
    tasks: dict[str, ImportedTask] = {}
    for run in runs:
        prompt_id = run.get("prompt_id").str()
        task = tasks.setdefault(
            prompt_id, ImportedTask(task_id=prompt_id, passed=True, execution_ok=True)
        )
        elapsed = run.get("elapsed_s", required=False).num(minimum=0)
        task.samples.append(
            SampleRecord(
                trial_index=run.get("run").int(minimum=0) or len(task.samples) + 1,
                decode_tps=run.get("gen_tps").num(minimum=0),
                prefill_tps=run.get("prompt_tps", required=False).num(minimum=0),
                total_latency_ms=elapsed * 1000 if elapsed is not None else None,
                tokens_generated=run.get("completion_tokens", required=False).int(),
                tokens_prompt=run.get("prompt_tokens", required=False).int(),
            )
        )
        task.finish_reason = run.get("finish_reason", required=False).str()
    return tasks


def _speed_record(
    summary: Node, tag: str, runs: list[Node], tasks: dict[str, ImportedTask], model_id: str
) -> RunRecord:
    """One tag's run: the probe's summary, with the spread it lacks taken from the samples."""
    samples = [s for task in tasks.values() for s in task.samples]
    decode = summarize(s.decode_tps for s in samples)
    prefill = summarize(s.prefill_tps for s in samples)
    started = summary.get("started_utc").timestamp()
    return RunRecord(
        source_format="speed-jsonl",
        started_at=started,
        model_id=model_id or "unknown-model",
        score_scale="speed",
        client_run_id=f"{tag}@{started.isoformat()}",
        engine="llama.cpp",
        provider="openai_compat",
        speed={
            # The probe's summary is authoritative; the spread it lacks comes from samples.
            "decode_tps_peak": summary.get("gen_tps_peak").num(minimum=0),
            "decode_tps_mean": summary.get("gen_tps_mean").num(minimum=0),
            "decode_tps_median": summary.get("gen_tps_median").num(minimum=0),
            "decode_tps_stdev": summary.get("gen_tps_stdev", required=False).num(minimum=0),
            "decode_tps_p95": summary.get("gen_tps_p95", required=False).num(minimum=0)
            or decode["p95"],
            "decode_tps_p5": decode["p5"],
            "prefill_tps_mean": summary.get("prompt_tps_mean", required=False).num(minimum=0),
            "prefill_tps_median": prefill["median"],
        },
        speed_sample_count=summary.get("n_runs", required=False).int() or len(samples),
        suites=[
            ImportedSuite(
                suite="speed",
                task_count=len(tasks),
                pass_count=len(tasks),
                tasks=list(tasks.values()),
            )
        ]
        if tasks
        else [],
        launch_settings={"tag": tag},
        raw_payload={"summary": summary.obj(), "runs": [r.obj() for r in runs]},
    )
