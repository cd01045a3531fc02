"""Expected speeds for stacks nobody has measured on a hardware class (issue 29).

The measured lanes (each stack on each class it has published runs on) calibrate
runs.estimates once per data version (leaderboard.cache), so a board pays for the calibration
only after a publish. A class's board then shows, apart from its ranked rows, the stacks
measured elsewhere but not there whose weights fit its memory, each with decode and prefill
and their 80% intervals; `bench/estimate_accuracy.py` holds out every measured lane to publish
how far such estimates miss (ACCURACY).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.db.models import Count, Exists, Max, OuterRef, QuerySet
from django.db.models.fields.json import KeyTransform

from leaderboard import cache as board_cache
from leaderboard import scopes
from leaderboard.filters import BoardFilters
from leaderboard.scopes import Scope
from runs import estimates, roofline
from runs.accelerators import Catalog
from runs.models import Hardware, HardwareClass, HardwareKind, Run, ScoreScale, Stack
from runs.models import Lane as StoredLane
from submissions import integrity

# How many unmeasured stacks a board lists: the ones with the most published runs elsewhere.
SHOWN = 12
# Candidates examined for them (most published runs first); many fail a check (no ceiling,
# too large for the class, speculative decoding), so more are read than shown.
CANDIDATES = 120
_TIES_READ = 40
# The held-out figures of bench/estimate_accuracy.py on the real imported data (bench/README.md,
# "Estimate accuracy"), as the methodology page publishes them: (lanes, median absolute error,
# share of lanes the 80% interval held).
ACCURACY = {"decode": (1023, 0.142, 0.837), "prefill": (415, 0.306, 0.795)}


def speculative(stack: Stack) -> bool:
    """Speculative decoding (a draft model, MTP) may beat the bandwidth roofline."""
    declared = (stack.launch_settings or {}).get("speculative")
    return bool(stack.draft_model) or declared not in (None, "", False, "no", "off", "none")


def ceilings_of(
    stack: Stack, hardware: Hardware, catalog: Catalog, payload: object = None
) -> roofline.Ceilings | str:
    """The stack's ceilings on a machine, or why it cannot be estimated there."""
    if speculative(stack):
        return "speculative decoding or MTP: the roofline does not bound it"
    found = integrity.ceilings_for(stack, hardware, catalog, payload)
    if isinstance(found, roofline.Unknown):
        if found.hardware_name:
            return f"{found.hardware_kind.upper()} not in the accelerator data"
        if found.reason.startswith("the parameter count"):
            return "the model's parameter count is unknown (no size in its name)"
        return f"no ceiling: {found.reason}"
    unknown_moe = integrity._moe_of_unknown_size(stack, found)
    if unknown_moe and estimates.stated_active_b(stack.model_id, found.weights) is None:
        return "MoE with unknown active parameters"
    return found


def lane_of(
    stack: Stack,
    hw_class: HardwareClass,
    ceilings: roofline.Ceilings,
    *,
    decode: float | None = None,
    prefill: float | None = None,
) -> estimates.Lane:
    return estimates.lane_features(
        ident=f"{stack.pk}@{hw_class.pk}",
        ceilings=ceilings,
        model_id=stack.model_id,
        class_key=hw_class.key,
        kind=hw_class.kind,
        engine=stack.engine,
        backend=str((stack.launch_settings or {}).get("backend") or ""),
        decode=decode,
        prefill=prefill,
        devices=hw_class.count or 1,
        memory_gb=hw_class.memory_gb,
        label=f"{stack.model_id[:40]} {stack.quantization} {stack.engine} on {hw_class.label}",
    )


def bundle_model(block: object) -> dict[str, Any]:
    """The part of a run's bundle a ceiling reads (its model block, submissions.run_facts),
    fetched alone with KeyTransform("model", …) instead of whole bundles with every trial."""
    return {"model": block} if isinstance(block, dict) else {}


def measured_lanes() -> tuple[list[estimates.Lane], Counter[str]]:
    """Every published lane with a known ceiling (its speeds the stored medians of its runs,
    runs.services keeps them), and why the others were left out.

    Read from the stored lanes (one per stack and class: the lane of a scale and version with
    the most runs), each ceiling from its class's machine (representative_machines) and its
    stack's model block, as an estimate reads them: a cold board reads no table of runs
    (issue 30), only each stack's best run."""
    catalog = integrity.current_catalog()
    stored = (
        StoredLane.objects.filter(
            hardware_class__isnull=False, run_count__gt=0, best_run__isnull=False
        )
        .select_related("stack", "hardware_class")
        .order_by("stack_id", "hardware_class_id", "-run_count", "id")
    )
    chosen: dict[tuple[int, int | None], StoredLane] = {}
    for lane in stored:
        chosen.setdefault((lane.stack_id, lane.hardware_class_id), lane)
    stacks = {lane.stack for lane in chosen.values()}
    # Each stack's model block (bundle_model), from its best run, without the rest of its bundle.
    blocks = dict(
        Run.objects.filter(id__in=[s.best_run_id for s in stacks if s.best_run_id])
        .annotate(model_block=KeyTransform("model", "raw_payload"))
        .values_list("id", "model_block")
    )
    machines = representative_machines({lane.hardware_class_id for lane in chosen.values()})
    lanes: list[estimates.Lane] = []
    skipped: Counter[str] = Counter()
    for (_stack, class_id), lane in chosen.items():
        hw_class, machine = lane.hardware_class, machines.get(class_id or 0)
        decode, prefill = lane.decode_median, lane.prefill_median
        if hw_class is None:
            continue
        if hw_class.kind in (HardwareKind.REMOTE, HardwareKind.UNKNOWN):
            skipped["remote or unknown hardware: no roofline"] += 1
        elif not decode and not prefill:
            skipped["no speed measured"] += 1
        elif machine is None:
            skipped["no machine recorded"] += 1
        else:
            block = bundle_model(blocks.get(lane.stack.best_run_id or 0))
            ceilings = ceilings_of(lane.stack, machine, catalog, block)
            if isinstance(ceilings, str):
                skipped[ceilings] += 1
                continue
            lanes.append(lane_of(lane.stack, hw_class, ceilings, decode=decode, prefill=prefill))
    return lanes, skipped


def _calibrate() -> dict[str, estimates.Calibration]:
    lanes, _skipped = measured_lanes()
    return {metric: estimates.Calibration(lanes, metric).compiled() for metric in estimates.METRICS}


def calibration_inputs() -> str:
    """What the calibration is computed from, in one line: the stored lanes (queries'
    fingerprint of them, read with the runs per class) and the moderators' hardware additions
    (they change ceilings). Lanes, not runs: a table the size of the board."""
    from submissions.models import AcceleratorOverride

    added = AcceleratorOverride.objects.aggregate(n=Count("id"), last=Max("id"))
    return f"lanes {scopes.boards_fingerprint()} hardware {added}"


CALIBRATION = "estimate-calibration-compiled"
CALIBRATE_TASK = "leaderboard.calibrate_estimates"


# Lanes a page calibrates itself when no calibration is at hand (0.2 ms a lane: about 0.4 s).
INLINE_LANES = 2000


def calibrations(inputs: str = "") -> dict[str, estimates.Calibration]:
    """The calibration on every measured lane, computed again only when what it reads changes.
    That takes seconds on a large site (12 s at 1,000,000 runs), so a page never waits for it
    once one exists: after a publish the pages go on with the calibration before it while
    leaderboard.tasks.calibrate_estimates computes the new one. Where none exists (a new
    site, a cache that lost it) a page computes it only on up to INLINE_LANES lanes; beyond,
    it raises Calibrating and the worker is asked for it, so a flushed cache on a large site
    costs its pages their estimates for a minute, not every visitor's request 12 s."""
    return calibration_in_use(inputs or calibration_inputs())[0]


def calibration_in_use(inputs: str) -> tuple[dict[str, estimates.Calibration], str]:
    """calibrations(inputs) and the key it is kept under: the one of these inputs, or the
    earlier one pages go on with until the worker's is in."""
    return board_cache.cached_by_content_keyed(
        CALIBRATION,
        inputs,
        _calibrate,
        refresh=_calibrate_soon,
        compute_here=lambda: scopes.boards_state().lanes <= INLINE_LANES,
    )


Calibrating = board_cache.NotReady


def calibrate_now() -> int:
    """Compute the calibration of the lanes as they are now, where none is stored; the
    measured lanes it holds (leaderboard.tasks.calibrate_estimates)."""
    board_cache.computed_again(CALIBRATION)  # a change from now on asks for another
    found = board_cache.cached_by_content(CALIBRATION, calibration_inputs(), _calibrate)
    return found["decode"].n


def _calibrate_soon() -> None:
    # By name: leaderboard.tasks imports this module.
    current_app.send_task(CALIBRATE_TASK)


@dataclass(frozen=True)
class Estimated:
    """A stack's expected speeds on a class it has no runs on, and the arithmetic behind them."""

    stack: Stack
    hw_class: HardwareClass
    ceilings: roofline.Ceilings
    lane: estimates.Lane
    decode: estimates.Estimate | None
    prefill: estimates.Estimate | None
    # How many other classes the stack has published runs on.
    measured_on: int

    @property
    def bytes_per_token_gb(self) -> float:
        return self.lane.active_gb

    @property
    def active_b(self) -> float:
        """The active parameters (B) the estimate reads per token."""
        stated = estimates.stated_active_b(self.stack.model_id, self.ceilings.weights)
        return stated or self.ceilings.weights.active_b

    @property
    def name_states_moe(self) -> bool:
        return estimates.stated_active_b(self.stack.model_id, self.ceilings.weights) is not None

    @property
    def cli(self) -> str:
        return measure_command(self.stack)


def measure_command(stack: Stack) -> str:
    """The command that measures a stack (the user's own server, this model)."""
    model = shlex.quote(stack.model_id)
    return f"benchloop run --url http://127.0.0.1:8080 --model {model} --profile core"


def representative_machines(class_ids: Iterable[int | None]) -> dict[int, Hardware]:
    """Each class's machine (its first): the class's machines share the figures a ceiling
    reads. One query for any number of classes."""
    machines: dict[int, Hardware] = {}
    found = Hardware.objects.filter(hardware_class_id__in=set(class_ids)).order_by("id")
    for machine in found:
        if machine.hardware_class_id is not None:
            machines.setdefault(machine.hardware_class_id, machine)
    return machines


def representative_machine(hw_class: HardwareClass) -> Hardware | None:
    return representative_machines([hw_class.pk]).get(hw_class.pk)


def estimate(
    stack: Stack,
    hw_class: HardwareClass,
    *,
    machine: Hardware | None = None,
    catalog: Catalog | None = None,
    measured_on: int = 0,
    calibrated: dict[str, estimates.Calibration] | None = None,
    payload: object = None,
) -> Estimated | None:
    """The stack's estimate on the class, or None where none can be made (no machine or
    ceiling, speculative decoding, weights larger than the class's memory)."""
    if hw_class.kind in (HardwareKind.REMOTE, HardwareKind.UNKNOWN):
        return None
    machine = machine or representative_machine(hw_class)
    if machine is None:
        return None
    if payload is None and stack.best_run is not None:
        payload = stack.best_run.raw_payload
    ceilings = ceilings_of(stack, machine, catalog or integrity.current_catalog(), payload)
    if isinstance(ceilings, str):
        return None
    lane = lane_of(stack, hw_class, ceilings)
    if lane.fits is False:
        return None
    found = calibrated or calibrations()
    decode = found["decode"].estimate(lane)
    if decode is None:
        return None
    if not measured_on:
        measured_on = len(
            set(stack.runs.published().exclude(hardware_class=None).values_list("hardware_class"))
        )
    return Estimated(
        stack=stack,
        hw_class=hw_class,
        ceilings=ceilings,
        lane=lane,
        decode=decode,
        prefill=found["prefill"].estimate(lane),
        measured_on=measured_on,
    )


def measured_here(stack: Stack, hw_class: HardwareClass) -> bool:
    return Run.objects.published().filter(stack=stack, hardware_class=hw_class).exists()


def _same_stack_shown(stack: Stack) -> tuple[str, str, str]:
    """Stacks imported from several sources differ only in how they were measured: one row."""
    return (
        estimates.model_key(stack.model_id),
        (stack.quantization or "").upper(),
        estimates.engine_key(stack.engine),
    )


def for_class(
    hw_class: HardwareClass,
    *,
    engine: str = "",
    quant: str = "",
    q: str = "",
    params: str = "",
    family: str = "",
    scale: str = ScoreScale.V3,
) -> list[Estimated]:
    """Up to SHOWN stacks measured on other classes but not this one, whose weights fit it,
    with the most published runs first; `engine`, `quant`, `q` and the score scale of their
    runs narrow them as the board's filters narrow its rows, and so do the model-size tier
    (`params`, runs.normalize.PARAM_TIERS) and the model family."""
    machine = representative_machine(hw_class)
    if machine is None or hw_class.kind in (HardwareKind.REMOTE, HardwareKind.UNKNOWN):
        return []
    narrowed = (engine, quant, q, params, family, scale)
    inputs = calibration_inputs()
    # First: where no calibration is at hand (Calibrating), the candidates would be read for
    # nothing (8 ms of a flushed board at 1,000,000 runs).
    calibrated, used = calibration_in_use(inputs)

    def compute() -> list[Estimated]:
        return _for_class(hw_class, machine, calibrated, *narrowed)

    # Kept by what they are computed from (the lanes and hardware additions, the calibration
    # they used, which until the worker's is in is the one before, and the class's machine)
    # for a class's own board, whatever its scale; not for narrowed views, whose visitors'
    # free text would fill the cache for a day.
    if any((engine, quant, q, params, family)):
        return compute()
    found = f"{inputs}|{used}|{hw_class.pk}|{machine.pk}|{scale}"
    return board_cache.cached_by_content("class-estimates", found, compute)


def _for_class(
    hw_class: HardwareClass,
    machine: Hardware,
    calibrated: dict[str, estimates.Calibration],
    engine: str,
    quant: str,
    q: str,
    params: str,
    family: str,
    scale: str,
) -> list[Estimated]:
    stacks = Stack.objects.filter(best_run__isnull=False)
    if engine:
        stacks = stacks.filter(engine__iexact=engine)
    if quant:
        stacks = stacks.filter(quantization__iexact=quant)
    if q:
        stacks = stacks.filter(model_id__icontains=q)
    if params:
        stacks = stacks.filter(param_bucket=params)
    if family:
        stacks = stacks.filter(model_family=family)
    ids = _candidate_ids(stacks, hw_class, scale)
    catalog = integrity.current_catalog()
    shown: list[Estimated] = []
    seen = set()
    classes = dict(ids)
    for stack, block in _candidates(list(classes)):
        key = _same_stack_shown(stack)
        if key in seen:
            continue
        found = estimate(
            stack,
            hw_class,
            machine=machine,
            catalog=catalog,
            measured_on=classes[stack.pk],
            calibrated=calibrated,
            payload=bundle_model(block),
        )
        if found is None:
            continue
        seen.add(key)
        shown.append(found)
        if len(shown) == SHOWN:
            break
    return shown


def _candidate_ids(
    stacks: QuerySet[Stack], hw_class: HardwareClass, scale: str
) -> list[tuple[int, int]]:
    """(stack id, classes it is measured on) of up to CANDIDATES of `stacks` not measured on
    this class (no stored lane there with published runs, of any scale) but measured on
    another on this scale: the most published runs first, then the most classes.

    Read from the stacks' run counts (an index) and each candidate's own lanes: counting the
    classes of every stack first joined every lane of the scale (70 ms of a cold board at
    1,000,000 runs). The stacks tied with the last one are all read, so the order is exact.
    """
    here = StoredLane.objects.filter(hardware_class=hw_class, run_count__gt=0).values("stack_id")
    others = StoredLane.objects.filter(run_count__gt=0, score_scale=scale)
    others = others.exclude(hardware_class__isnull=True).exclude(hardware_class=hw_class)
    found = stacks.exclude(pk__in=here).filter(Exists(others.filter(stack_id=OuterRef("pk"))))
    # A few beyond CANDIDATES, so the stacks tied with the last are read in the same query
    # unless even the last of those is tied with it.
    ordered = list(
        found.order_by("-published_run_count", "pk").values_list("pk", "published_run_count")[
            : CANDIDATES + _TIES_READ
        ]
    )
    runs = dict(ordered[:CANDIDATES])
    if len(runs) == CANDIDATES:
        last = min(runs.values())
        runs.update((pk, n) for pk, n in ordered[CANDIDATES:] if n == last)
        if ordered[-1][1] == last:
            runs.update(
                found.filter(published_run_count=last).values_list("pk", "published_run_count")
            )
    classes = dict(
        others.filter(stack_id__in=list(runs))
        .values_list("stack_id")
        .annotate(n=Count("hardware_class_id", distinct=True))
    )
    order = sorted(runs, key=lambda pk: (-runs[pk], -classes.get(pk, 0), pk))[:CANDIDATES]
    return [(pk, classes.get(pk, 0)) for pk in order]


def _candidates(ids: list[int]) -> list[tuple[Stack, object]]:
    """These stacks in this order, each with its best run's model block (without the rest of
    its bundle, and without the run: building 120 runs was two thirds of this read)."""
    found = (
        Stack.objects.filter(pk__in=ids)
        .annotate(model_block=KeyTransform("model", "best_run__raw_payload"))
        .in_bulk()
    )
    return [(found[pk], found[pk].model_block) for pk in ids if pk in found]


def for_stack_page(stack: Stack, hw: str, measured: list[HardwareClass]) -> dict[str, Any] | None:
    """What the stack page shows for ?hw=<a class the stack has no published run on>: the
    estimate (None where none can be made), the command and whether the lab can measure it;
    None where the class is measured (`measured`) or unknown."""
    if not hw or stack.best_run_id is None or any(c.slug == hw for c in measured):
        return None
    hw_class = HardwareClass.objects.filter(slug=hw).first()
    if hw_class is None or measured_here(stack, hw_class):
        return None
    found: dict[str, Any] = {
        "hw_class": hw_class,
        "cli": measure_command(stack),
        "lab": lab_measures(hw_class),
    }
    try:
        found["est"] = estimate(stack, hw_class)
    except Calibrating:
        found["calibrating"] = True
    return found


def lab_measures(hw_class: HardwareClass) -> bool:
    """Whether BenchLoop's lab has a host of this class: it has published verified runs there
    (the public site reads no lab tables; a lab run is what "verified" means)."""
    return Run.objects.published().filter(hardware_class=hw_class, is_verified=True).exists()


def board_section(filters: BoardFilters, scope: Scope) -> dict[str, Any] | None:
    """The "Estimated, not measured" section of a single class's board (first page only), or
    None on views of several classes, all hardware, or remote endpoints."""
    hw_class = scope.single
    if hw_class is None or scope.pooled or filters.page > 1:
        return None
    try:
        rows = for_class(
            hw_class,
            engine=filters.engine,
            quant=filters.quant,
            q=filters.q,
            params=filters.params,
            family=filters.family,
            scale=filters.scale,
        )
    except Calibrating:
        return {"hw_class": hw_class, "calibrating": True}
    if not rows:
        return None
    lanes, error, coverage = ACCURACY["decode"]
    return {
        "hw_class": hw_class,
        "rows": rows,
        "lab": lab_measures(hw_class),
        "shown": SHOWN,
        "accuracy": {"lanes": lanes, "error": error * 100, "coverage": coverage * 100},
    }
