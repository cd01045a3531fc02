"""Checks run on every upload; failures flag the run for a moderator, they never reject it.

Speed claims meet two checks (`plausibility`, which the site and bench/integrity_outliers.py
both call): a physical ceiling from the accelerator data file, which needs no peers, and a robust
z-score against approved runs of the same model, quantization and engine on the same hardware
class. The score consistency checks follow from the payload alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from runs import normalize, roofline
from runs.accelerators import Catalog, catalog
from runs.importers.records import RunRecord
from runs.models import Hardware, Run, ScoreScale, Stack
from submissions import run_facts
from worker.rules.scoring import MEASURED_ONLY
from worker.rules.stats import median

# Quality weights of the 3.0.0 profiles (the earlier product's published design).
V3_QUALITY_WEIGHTS = {
    "smoke": {"toolcall": 0.45, "reasonmath": 0.55},
    "core": {
        "toolcall": 0.20,
        "coding": 0.25,
        "dataextract": 0.15,
        "instructfollow": 0.15,
        "reasonmath": 0.25,
    },
    "full": {
        "toolcall": 0.12,
        "coding": 0.18,
        "dataextract": 0.10,
        "instructfollow": 0.10,
        "reasonmath": 0.15,
        "longcontext": 0.15,
        "agent": 0.20,
    },
}
# Beyond these no single-stream local run has been seen, on any machine.
PHYSICAL_LIMITS = {"decode_tps_median": 3000.0, "prefill_tps_median": 200_000.0}
MIN_TTFT_MS = 1.0
TOY_MODEL_B = 0.1
ROBUST_Z_LIMIT = 3.5
MIN_PEERS = 3
PEER_LIMIT = 500
# Honest runs of one stack on one hardware class differ by about this fraction of the median
# (power limits, clocks, drivers, the rest of the machine), however alike a few peers look.
PEER_SCALE_FLOOR = 0.10
SCORE_TOLERANCE = 0.05
PEER_METRICS = [
    ("decode_tps_median", "decode speed", "tok/s"),
    ("prefill_tps_median", "prefill speed", "tok/s"),
    ("ttft_ms_median", "time to first token", "ms"),
]
# How far above a ceiling a claim may go before it is flagged. The ceiling takes the hardware at
# its vendor peak and the weights at their real size; the best honest runs in the real data
# reach about 90% of it (bench/README.md, "Real community data"), so 1.15 leaves honest runs a
# quarter above their best and still catches a claim of 1.3× the physics.
CEILING_MARGIN = 1.15
# Speculation declared without a draft length: three tokens per weight read, as much as the
# usual draft lengths (MTP's 1-3, a draft model's 3-8 at typical acceptance) deliver.
SPECULATIVE_MARGIN = 3.0
DECLARE = "declare speculation if you used it"
SPLIT_UNKNOWN = "split mode unknown"
SLOWER = "slower than"
NO_CEILING = "no ceiling known"


@dataclass(frozen=True)
class Check:
    """One line of a speed check's arithmetic, and whether it flags the run; `compared` is
    False for a line that says why nothing could be compared (too few peers, no peak figure)."""

    text: str
    flagged: bool
    compared: bool = True


@dataclass(frozen=True)
class Claim:
    """The speeds a run claims (medians)."""

    decode_tps: float | None
    prefill_tps: float | None
    ttft_ms: float | None
    # The prompt behind the TTFT and the depth cells, where the run reports them.
    workload: run_facts.Workload = dataclasses.field(default_factory=run_facts.Workload)

    @classmethod
    def of_record(cls, record: RunRecord) -> Claim:
        """The medians; a source that gives only a mean (llmfit's community files) is held to
        the ceilings by its mean, since no speed of any kind may pass the physics."""
        decode, prefill, ttft = (
            record.speed.get(name) or record.speed.get(name.replace("_median", "_mean"))
            for name, _label, _unit in PEER_METRICS
        )
        return cls(decode, prefill, ttft, workload=run_facts.workload_of(record))

    @classmethod
    def of_run(cls, run: Run) -> Claim:
        prompt = (run.stack.launch_settings or {}).get("prompt_tokens")
        workload = run_facts.Workload(prompt if isinstance(prompt, int) else None)
        return cls(run.decode_tps_median, run.prefill_tps_median, run.ttft_ms_median, workload)

    def values(self) -> tuple[float | None, ...]:
        return (self.decode_tps, self.prefill_tps, self.ttft_ms)


def check_run(record: RunRecord, *, stack: Stack, hardware: Hardware | None) -> list[str]:
    """Readable reasons to flag this run; an empty list means nothing looked wrong."""
    claim = Claim.of_record(record)
    reasons = _physical(record) + _consistency(record)
    if hardware is not None:
        reasons += plausibility(
            claim,
            stack=stack,
            hardware=hardware,
            peers=peer_values(stack, hardware),
            catalog=current_catalog(),
            payload=record.raw_payload,
        )
    return reasons


def plausibility(
    claim: Claim,
    *,
    stack: Stack,
    hardware: Hardware,
    peers: list[tuple[float | None, ...]],
    catalog: Catalog,
    payload: object = None,
) -> list[str]:
    """The speed checks: the physical ceiling (no peers needed), then the peers. `peers` are
    (decode, prefill, TTFT) medians of approved runs of the same model, quantization and
    engine on the same hardware class, newest first, at most PEER_LIMIT; `payload` is the
    run's bundle (its model block and trials say more about it than its stack)."""
    found = physics(claim, stack=stack, hardware=hardware, catalog=catalog, payload=payload)
    return found + against_peers(claim, peers, hardware_label=hardware.label)


def ceilings_for(
    stack: Stack, hardware: Hardware, catalog: Catalog, payload: object = None
) -> roofline.Ceilings | roofline.Unknown:
    return roofline.ceilings(
        catalog,
        gpu_model=hardware.gpu_model,
        gpu_count=hardware.gpu_count,
        vram_gb=hardware.vram_gb,
        cpu_model=hardware.cpu_model,
        model_id=stack.model_id,
        params_b=stack.params_b or _declared(stack, "params_b"),
        params_source="the size its name states" if stack.params_b else "as the row states it",
        quantization=stack.quantization,
        declared_active_b=_declared(stack, "active_params_b"),
        facts=run_facts.facts_of(stack, payload),
    )


def _declared(stack: Stack, name: str) -> float | None:
    """A size the run stated (an imported row's parameter count), where it is a number."""
    value = (stack.launch_settings or {}).get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)


def physics(
    claim: Claim, *, stack: Stack, hardware: Hardware, catalog: Catalog, payload: object = None
) -> list[str]:
    """Flags for claims above the roofline, each with its arithmetic; "no ceiling known" when
    the machine or the model is not known (the run waits for a moderator, it is not refused)."""
    checks = physics_checks(claim, stack=stack, hardware=hardware, catalog=catalog, payload=payload)
    return [check.text for check in checks if check.flagged]


def physics_checks(
    claim: Claim, *, stack: Stack, hardware: Hardware, catalog: Catalog, payload: object = None
) -> list[Check]:
    """The roofline arithmetic for each claimed speed, whether or not it flags the run: what
    the moderation queue shows (a flagged line reads exactly as the flag `physics` raises)."""
    if claim.decode_tps is None and claim.prefill_tps is None and not claim.workload.cells:
        return []
    found = ceilings_for(stack, hardware, catalog, payload)
    if isinstance(found, roofline.Unknown):
        advice = "; a moderator can add it from the queue" if found.hardware_name else ""
        return [Check(f"{NO_CEILING}: {found.reason}{advice}", flagged=True)]
    allowance, why = speculation_allowance(run_facts.speculation_of(stack, payload))
    checks = []
    if claim.decode_tps is not None:
        checks.append(_decode_check(claim.decode_tps, found, allowance, why))
    if found.prefill_tps and claim.prefill_tps is not None:
        checks.append(_prefill_check(claim.prefill_tps, found))
    elif claim.prefill_tps is not None:
        checks.append(
            Check(
                f"prefill {_tps(claim.prefill_tps)} tok/s not checked: no peak throughput is "
                f"known for {found.source.label}",
                flagged=False,
                compared=False,
            )
        )
    prompt = claim.workload.prompt_tokens
    # A first token of 1 ms or less is no measurement (LocalMaxxing writes 1 where a tool such
    # as llama-bench measured none); the sanity bound already flags anything below 1 ms.
    if claim.ttft_ms is not None and claim.ttft_ms > MIN_TTFT_MS and prompt:
        checks += _ttft_check(claim.ttft_ms, prompt, found)
    for cell in claim.workload.cells:
        checks += _depth_checks(cell, found, allowance, why)
    return checks


def speculation_allowance(spec: run_facts.Speculation | None) -> tuple[float, str]:
    """(tokens per weight read, why): 1 without speculation; with it, 1 + draft length ×
    acceptance where both are known, at most draft length + 1, else SPECULATIVE_MARGIN."""
    if spec is None:
        return 1.0, ""
    n, accepted = spec.draft_n, spec.acceptance
    if n and accepted is not None:
        factor = 1 + n * accepted
        how = f"1 + draft length {n} × {accepted:.0%} accepted = {factor:.3g} tokens per read"
    elif n:
        factor = n + 1.0
        how = f"draft length {n} + 1 = {factor:g} tokens per read at most"
    else:
        factor = SPECULATIVE_MARGIN
        how = f"draft length not stated: {factor:g} tokens per read"
    return factor, f"speculative decoding declared ({spec.kind}; {how})"


def _decode_check(
    claimed: float, found: roofline.Ceilings, allowance: float, why: str, depth: int = 0
) -> Check:
    ceiling = found.decode_at_depth(depth)
    limit = CEILING_MARGIN * allowance * ceiling
    over = claimed > limit
    kv = ""
    if depth:
        kv = (
            f" + KV cache at depth {depth:,} ({_gb(depth * (found.kv_bytes_per_token or 0) / 1e9)}"
            " GB)"
            if found.kv_bytes_per_token
            else f" (KV cache at depth {depth:,} not counted: the model's shape is not known)"
        )
    where = f"depth {depth:,}: " if depth else ""
    text = (
        f"{where}decode {_tps(claimed)} tok/s {'>' if over else '≤'} ceiling {_tps(ceiling)} "
        f"tok/s = {roofline.figure(found.source.bandwidth_gbps)} GB/s ÷ {_gb(found.active_gb)} GB "
        f"active weights{kv} ({_machine(found, 'bandwidth_gbps')}; {_weights(found)}; flagged "
        f"above {CEILING_MARGIN:g}× the ceiling"
        + (f" × {allowance:.3g}, {why}" if why else "")
        + ")"
    )
    if over and found.source.count > 1 and found.source.split == roofline.UNKNOWN_SPLIT:
        text = f"{SPLIT_UNKNOWN}: {text}; the ceiling counts one card of {found.source.count}"
    if over and not why:
        text += f": {DECLARE}"
    return Check(text, flagged=over)


def _prefill_check(claimed: float, found: roofline.Ceilings, depth: int = 0) -> Check:
    prefill = found.prefill_tps or 0.0
    over = claimed > CEILING_MARGIN * prefill
    peak, unit = found.peak  # type: ignore[misc]
    accelerator = found.source.accelerator
    count = found.source.count if accelerator.kind == "gpu" else 1
    times = f"{count} × " if count > 1 else ""
    if accelerator.simd:
        times = f"{accelerator.cores} cores × {accelerator.boost_ghz:g} GHz × {accelerator.simd} = "
    where = f"depth {depth:,}: " if depth else ""
    return Check(
        f"{where}prefill {_tps(claimed)} tok/s {'>' if over else '≤'} ceiling {_tps(prefill)} "
        f"tok/s = {times}{roofline.figure(peak)} {unit} ÷ (2 × {found.weights.active_b:g}B active "
        f"params) ({_machine(found, 'fp16_tflops')}; flagged above {CEILING_MARGIN:g}× the "
        "ceiling)",
        flagged=over,
    )


def _ttft_check(ttft_ms: float, prompt: int, found: roofline.Ceilings, depth: int = 0) -> list:
    floor = found.ttft_floor_ms(prompt)
    if floor is None:
        return []
    under = ttft_ms < floor / CEILING_MARGIN
    where = f"depth {depth:,}: " if depth else ""
    return [
        Check(
            f"{where}time to first token {ttft_ms:,.1f} ms {'<' if under else '≥'} floor "
            f"{floor:,.1f} ms = {prompt:,} prompt tokens ÷ prefill ceiling "
            f"{_tps(found.prefill_tps or 0)} tok/s (flagged below the floor ÷ {CEILING_MARGIN:g})",
            flagged=under,
        )
    ]


def _depth_checks(
    cell: run_facts.DepthCell, found: roofline.Ceilings, allowance: float, why: str
) -> list[Check]:
    """A depth-sweep cell against the ceilings at its depth."""
    checks = []
    if cell.decode_tps is not None:
        checks.append(_decode_check(cell.decode_tps, found, allowance, why, depth=cell.depth))
    if cell.prefill_tps is not None and found.prefill_tps:
        checks.append(_prefill_check(cell.prefill_tps, found, depth=cell.depth))
    if cell.ttft_ms is not None and cell.ttft_ms > MIN_TTFT_MS and cell.prompt_tokens:
        checks += _ttft_check(cell.ttft_ms, cell.prompt_tokens, found, depth=cell.depth)
    return checks


def _moe_of_unknown_size(stack: Stack, found: roofline.Ceilings) -> bool:
    """The run is an MoE whose active parameters nobody states (its ceiling is the floor's)."""
    return not found.weights.active_known


def within_ceiling_note(claim: Claim, found: roofline.Ceilings) -> str:
    """What a moderator reads once a ceiling exists for a run that had none."""
    decode = (
        f"decode {_tps(claim.decode_tps)} tok/s is within the ceiling "
        f"{_tps(found.decode_tps)} tok/s = {roofline.figure(found.source.bandwidth_gbps)} GB/s ÷ "
        f"{_gb(found.active_gb)} GB active weights"
        if claim.decode_tps is not None
        else "no decode speed claimed"
    )
    return f"checked after {found.source.accelerator.name} was added: {decode}"


def _machine(found: roofline.Ceilings, figure: str) -> str:
    source = found.source
    text = source.label
    if source.count > 1 and figure == "bandwidth_gbps":
        text += f": {source.bandwidth_text()}"
    origin = source.accelerator.origin
    where = "" if origin == "data file" else f" ({origin})"
    return f"{text}, {source.accelerator.source_of(figure)}{where}"


def _weights(found: roofline.Ceilings) -> str:
    bits = found.bits
    if bits.assumed:
        how = f"quantization not stated, so the smallest format's {bits.bits:g} bits/weight"
    else:
        how = f"{bits.bits:g} bits/weight ({bits.label})"
    return f"{found.weights.note} × {how}"


def _tps(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _gb(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def against_peers(
    claim: Claim, peers: list[tuple[float | None, ...]], *, hardware_label: str
) -> list[str]:
    """Robust z-score (median and MAD) against the peers' medians, metric by metric."""
    checks = peer_checks(claim, peers, hardware_label=hardware_label)
    return [check.text for check in checks if check.flagged]


def peer_checks(
    claim: Claim, peers: list[tuple[float | None, ...]], *, hardware_label: str
) -> list[Check]:
    """Each claimed speed against its peers, whether or not it flags the run (a flagged line
    reads exactly as the flag `against_peers` raises); too few peers say so."""
    checks = []
    for index, (_field, label, unit) in enumerate(PEER_METRICS):
        value = claim.values()[index]
        values = [v for row in peers if (v := row[index]) is not None]
        if value is None:
            continue
        if len(values) < MIN_PEERS:
            checks.append(
                Check(
                    f"{label}: {len(values)} approved peer{'s' if len(values) != 1 else ''} on "
                    f"{hardware_label}, {MIN_PEERS} needed for a comparison",
                    flagged=False,
                    compared=False,
                )
            )
            continue
        centre = median(values, default=0.0)
        mad = median((abs(v - centre) for v in values), default=0.0)
        # A few peers' MAD can be near 0 (three runs from one machine): the scale never drops
        # below the spread honest runs of one stack on one hardware class show.
        scale = max(1.4826 * mad, PEER_SCALE_FLOOR * centre)
        if scale <= 0:
            continue
        z = (value - centre) / scale
        ratio = value / centre if centre else float("inf")
        text = (
            f"{label} {value:,.1f} {unit} is {ratio:.1f}× the median of {len(values)} "
            f"approved peers on {hardware_label} ({centre:,.1f} {unit}; robust z = {z:+.1f})"
        )
        # Faster than the peers is what a fake looks like; slower is a throttled card or
        # weights spilled to system memory, which is honest and only worth a note.
        faster = z > ROBUST_Z_LIMIT if unit != "ms" else z < -ROBUST_Z_LIMIT
        slower = z < -ROBUST_Z_LIMIT if unit != "ms" else z > ROBUST_Z_LIMIT
        if slower:
            beaten = (
                sum(v < value for v in values) if unit == "ms" else sum(v > value for v in values)
            )
            text = f"{SLOWER} {beaten} of {len(values)} peers: throttling or offload? ({text})"
        checks.append(Check(text, flagged=faster))
    return checks


def slower_than_peers(
    claim: Claim, peers: list[tuple[float | None, ...]], *, hardware_label: str
) -> list[str]:
    """The notes (never flags) for speeds far below the peers', for moderators and the run page."""
    checks = peer_checks(claim, peers, hardware_label=hardware_label)
    return [check.text for check in checks if check.text.startswith(SLOWER)]


def hardware_class(hardware: Hardware) -> str:
    """The key of the hardware class the machine belongs to (runs.normalize.hardware_class_of,
    the site's one rule): runs on the same class are peers."""
    return normalize.hardware_class_of(hardware.identity_fields())["key"]


def peer_values(stack: Stack, hardware: Hardware) -> list[tuple[float | None, ...]]:
    """Approved runs of the same model, quantization and engine on the same hardware class."""
    if not (hardware.gpu_model or hardware.cpu_model):
        return []
    return list(
        Run.objects.published()
        .filter(
            stack__model_id__iexact=stack.model_id,
            stack__quantization=stack.quantization,
            stack__engine=stack.engine,
            hardware_class__key=hardware_class(hardware),
        )
        .order_by("-started_at")
        .values_list(*[field for field, _label, _unit in PEER_METRICS])[:PEER_LIMIT]
    )


def current_catalog() -> Catalog:
    """The data file with the moderators' additions in front."""
    from submissions.models import AcceleratorOverride

    rows = AcceleratorOverride.objects.select_related("added_by").order_by("-created_at")
    return catalog().with_entries([row.as_accelerator() for row in rows])


def _physical(record: RunRecord) -> list[str]:
    reasons = []
    # A toy model of a few million parameters decodes thousands of tokens a second on a CPU;
    # its speeds meet the roofline alone (real TinyStories rows: 3,500–5,000 tok/s).
    params = normalize.parse_model(record.model_id)["params_b"]
    bounds = {} if params is not None and params < TOY_MODEL_B else PHYSICAL_LIMITS
    for field, limit in bounds.items():
        value = record.speed.get(field)
        if value is not None and value > limit:
            reasons.append(
                f"{field.replace('_', ' ')} of {value:,.0f} tok/s exceeds the physical "
                f"sanity bound of {limit:,.0f} tok/s"
            )
    ttft = record.speed.get("ttft_ms_median")
    if ttft is not None and 0 < ttft < MIN_TTFT_MS:
        reasons.append(f"time to first token of {ttft:.3f} ms is below {MIN_TTFT_MS} ms")
    return reasons


def _consistency(record: RunRecord) -> list[str]:
    """Recompute what the payload's own suites and tasks imply and compare."""
    reasons: list[str] = []
    q, s, r = record.quality_score, record.speed_score, record.reliability_score
    overall = record.overall_score
    if record.outcome != "complete" or q is None or r is None or overall is None:
        return reasons
    has_speed = any(suite.suite == "speed" for suite in record.suites)
    # A run without the speed suite has no speed score (None), and its formula needs none.
    if s is None and (has_speed or record.score_scale != ScoreScale.V3):
        return reasons
    s = s or 0.0
    if record.score_scale == ScoreScale.V3:
        expected = 0.70 * q + 0.25 * s + 0.05 * r if has_speed else 0.90 * q + 0.10 * r
    else:
        expected = 0.55 * q + 0.20 * s + 0.25 * r
    if abs(expected - overall) > SCORE_TOLERANCE + 0.01:
        reasons.append(
            f"overall score {overall:g} does not follow from quality "
            f"{q:g}, speed {s:g} and reliability {r:g} (expected {expected:.2f})"
        )
    weights = (
        V3_QUALITY_WEIGHTS.get(record.profile)
        if record.score_schema_version.startswith("3.0")
        else None
    )
    scores = {suite.suite: suite.score for suite in record.suites if suite.score is not None}
    if weights and set(weights) <= set(scores):
        expected_q = sum(scores[name] * w for name, w in weights.items()) / sum(weights.values())
        if abs(expected_q - q) > SCORE_TOLERANCE + 0.01:
            reasons.append(
                f"quality score {q:g} does not match its suite scores "
                f"(weighted mean {expected_q:.2f})"
            )
    # The sweeps are measured, never scored: the engine's reliability leaves their cells out.
    scored = [suite for suite in record.suites if suite.suite not in MEASURED_ONLY]
    tasks = [task for suite in scored or record.suites for task in suite.tasks]
    if (
        record.score_scale == ScoreScale.V3
        and tasks
        and all(t.execution_ok is not None for t in tasks)
    ):
        expected_r = 100 * sum(bool(t.execution_ok) for t in tasks) / len(tasks)
        if abs(expected_r - r) > SCORE_TOLERANCE + 0.01:
            reasons.append(
                f"reliability {r:g} does not match its tasks "
                f"({expected_r:.2f}% executed without error)"
            )
    for suite in record.suites:
        if suite.tasks and suite.task_count != len(suite.tasks):
            reasons.append(
                f"suite {suite.suite} claims {suite.task_count} tasks but lists {len(suite.tasks)}"
            )
    return reasons
