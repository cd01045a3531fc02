"""The harness matrix of one model on one hardware class (issue 19).

Rows are harnesses (raw, the engine's own loop, first: the baseline), columns the matrix
suites, and a cell is the share of task attempts passed with its 95% interval (Wilson's, over
the attempts: n is shown) plus what the harness cost per task: tokens sent and requests made
(and their ratio to raw's on the same tasks), wall time split between the model and the
harness, the peak context, and why the failures failed (an unreadable edit or tool call, a
wrong answer, the sandbox).

Only published runs count (RunQuerySet.published), and only one hardware class at a time:
wall times are a machine's, never pooled. A model served several ways on one class (another
quantization or engine) has one matrix per setup, never a mix.

Everything read from a run's metadata is untrusted: numbers are taken only when they are finite
and in range, failure kinds only from the engine's list, texts cut short.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count
from django.db.models.fields.json import KeyTransform

from leaderboard import payload
from leaderboard.stats import Proportion, wilson
from runs.matrix import BASELINE, MATRIX_SUITES, SUITE_LABELS, harness_kind, harness_order
from runs.models import HardwareClass, Outcome, Run, RunQuerySet, Stack, TaskResult
from worker.rules.harnesses import FAILURES
from worker.rules.stats import median

MAX_RUNS = 500  # newest runs per matrix: a page reads their tasks' overhead blocks
MAX_TOKENS = 100_000_000
MAX_MS = 7 * 24 * 3600 * 1000.0
MAX_REQUESTS = 100_000
LABEL_CHARS = 60
MAX_LABELS = 4  # versions listed per row
OTHER_FAILURES = tuple(kind for kind in FAILURES if kind not in ("format", "wrong", "sandbox"))
UNSTATED = "unstated"


@dataclass(frozen=True)
class Attempt:
    """One task attempt, type-checked: whether it passed and what it cost (None: not recorded)."""

    run_id: int
    harness: str
    suite: str
    task_id: str
    passed: bool
    failure: str  # one of FAILURES, UNSTATED for a failure that named none, "" when it passed
    requests: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    wall_ms: float | None = None
    model_ms: float | None = None
    harness_ms: float | None = None
    peak_context: int | None = None

    @property
    def measured(self) -> bool:
        return self.requests is not None and self.prompt_tokens is not None


def _ms(value: Any) -> float | None:
    found = payload.number(value)
    return found if found is not None and 0 <= found <= MAX_MS else None


def attempt(
    run_id: int, harness: str, suite: str, task_id: str, passed: bool, overhead: Any, failure: Any
) -> Attempt:
    """An Attempt from a task row and its metadata's `overhead` and `failure` (any JSON)."""
    block = overhead if isinstance(overhead, dict) else {}
    stated = failure if isinstance(failure, str) and failure in FAILURES else ""
    return Attempt(
        run_id=run_id,
        harness=harness,
        suite=suite,
        task_id=task_id,
        passed=bool(passed),
        failure="" if passed else (stated or UNSTATED),
        requests=payload.count(block.get("requests"), high=MAX_REQUESTS),
        prompt_tokens=payload.count(block.get("prompt_tokens"), high=MAX_TOKENS),
        completion_tokens=payload.count(block.get("completion_tokens"), high=MAX_TOKENS),
        wall_ms=_ms(block.get("wall_ms")),
        model_ms=_ms(block.get("model_ms")),
        harness_ms=_ms(block.get("harness_ms")),
        peak_context=payload.count(block.get("peak_context"), high=MAX_TOKENS),
    )


# --- figures ------------------------------------------------------------------------------


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


# What an attempt spent of one kind (tokens sent, requests, wall time); None: not recorded.
Spent = Callable[[Attempt], float | None]


def _per_task(attempts: list[Attempt], value: Spent) -> dict[tuple[str, str], float]:
    """{(suite, task id): the mean of `value` over its measured attempts}."""
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for a in attempts:
        figure = value(a)
        if a.measured and figure is not None:
            found[(a.suite, a.task_id)].append(float(figure))
    return {key: statistics.fmean(values) for key, values in found.items()}


def ratio(attempts: list[Attempt], baseline: list[Attempt], value: Spent) -> float | None:
    """What the harness spent ÷ what raw spent, over the tasks both measured (each task's mean
    over its attempts); None without a shared task or with nothing spent by raw."""
    mine, theirs = _per_task(attempts, value), _per_task(baseline, value)
    shared = mine.keys() & theirs.keys()
    base = sum(theirs[key] for key in shared)
    if not shared or base <= 0:
        return None
    return sum(mine[key] for key in shared) / base


@dataclass
class Overhead:
    """What a harness cost per task attempt, over the attempts that recorded it."""

    tasks: int = 0
    prompt_tokens: float | None = None  # mean sent per task
    completion_tokens: float | None = None
    requests: float | None = None  # mean per task
    wall_ms: float | None = None  # median per task, split below
    model_ms: float | None = None
    harness_ms: float | None = None
    peak_context: int | None = None
    tokens_ratio: float | None = None  # tokens sent ÷ raw's on the same tasks
    requests_ratio: float | None = None
    wall_ratio: float | None = None

    @classmethod
    def of(cls, attempts: list[Attempt], baseline: list[Attempt] | None) -> Overhead:
        measured = [a for a in attempts if a.measured]
        peaks = [a.peak_context for a in measured if a.peak_context is not None]
        found = cls(
            tasks=len(measured),
            prompt_tokens=_mean([a.prompt_tokens or 0 for a in measured]),
            completion_tokens=_mean([a.completion_tokens or 0 for a in measured]),
            requests=_mean([a.requests or 0 for a in measured]),
            wall_ms=median(a.wall_ms for a in measured),
            model_ms=median(a.model_ms for a in measured),
            harness_ms=median(a.harness_ms for a in measured),
            peak_context=max(peaks) if peaks else None,
        )
        if baseline is not None:
            found.tokens_ratio = ratio(attempts, baseline, lambda a: a.prompt_tokens)
            found.requests_ratio = ratio(attempts, baseline, lambda a: a.requests)
            found.wall_ratio = ratio(attempts, baseline, lambda a: a.wall_ms)
        return found


@dataclass
class Cell:
    """One harness on one suite."""

    suite: str
    score: Proportion | None
    runs: int
    overhead: Overhead
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def label(self) -> str:
        return SUITE_LABELS.get(self.suite, "All suites" if self.suite == "all" else self.suite)

    @property
    def format_failures(self) -> int:
        return self.failures["format"]

    @property
    def wrong(self) -> int:
        return self.failures["wrong"]

    @property
    def sandbox(self) -> int:
        return self.failures["sandbox"]

    @property
    def other_failures(self) -> int:
        return sum(self.failures[k] for k in (*OTHER_FAILURES, UNSTATED))


def cell(suite: str, attempts: list[Attempt], baseline: list[Attempt] | None) -> Cell:
    return Cell(
        suite=suite,
        score=wilson(sum(a.passed for a in attempts), len(attempts)),
        runs=len({a.run_id for a in attempts}),
        overhead=Overhead.of(attempts, baseline),
        failures=Counter(a.failure for a in attempts if a.failure),
    )


@dataclass
class HarnessRow:
    harness: str
    kind: str  # "baseline", "format", "program" or "other"
    runs: int
    versions: list[str]
    variant: str  # a program's variant (Aider's edit format), "" for none
    cells: list[Cell | None]  # in the matrix's suite order; None: never run
    overall: Cell  # every matrix task this harness attempted, pooled
    suite_names: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.harness} ({self.variant})" if self.variant else self.harness

    @property
    def suites(self) -> set[str]:
        return {c.suite for c in self.cells if c is not None}

    @property
    def slots(self) -> list[tuple[str, Cell | None]]:
        """(suite label, cell) per suite column; a harness that never ran one has None."""
        return [
            (SUITE_LABELS.get(s, s), c) for s, c in zip(self.suite_names, self.cells, strict=True)
        ]


@dataclass
class Verdict:
    """The best harness by pooled pass rate, and whether its lead is clear of the runner-up's
    interval; rows that did not attempt every suite on the page are not compared."""

    best: HarnessRow | None = None
    runner_up: HarnessRow | None = None
    clear: bool = False
    left_out: list[str] = field(default_factory=list)

    @property
    def alone(self) -> bool:
        return self.best is not None and self.runner_up is None

    @property
    def tied(self) -> bool:
        """The best and the runner-up passed the same share (0 of 3 against 0 of 3)."""
        if self.best is None or self.runner_up is None:
            return False
        best, other = self.best.overall.score, self.runner_up.overall.score
        return best is not None and other is not None and best.rate == other.rate


def verdict(rows: list[HarnessRow], suites: list[str]) -> Verdict:
    everything = set(suites)
    scored = [
        (row, row.overall.score)
        for row in rows
        if row.suites == everything and row.overall.score is not None
    ]
    compared = {row.label for row, _score in scored}
    left_out = [row.label for row in rows if row.label not in compared]
    ranked = sorted(
        scored, key=lambda pair: (-pair[1].rate, -pair[1].n, harness_order(pair[0].harness))
    )
    if not ranked:
        return Verdict(left_out=left_out)
    (best, best_score), rest = ranked[0], ranked[1:]
    if not rest:
        return Verdict(best=best, left_out=left_out)
    runner_up, runner_score = rest[0]
    clear = not best_score.overlaps(runner_score)
    return Verdict(best=best, runner_up=runner_up, clear=clear, left_out=left_out)


# --- the page's data ------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """How the model was served on the class: a matrix compares harnesses within one setup."""

    quantization: str
    engine: str
    runs: int

    @property
    def label(self) -> str:
        return " · ".join(p for p in (self.quantization, self.engine) if p)


@dataclass
class Matrix:
    model_id: str
    hardware_class: HardwareClass
    setup: Setup
    setups: list[Setup]
    suites: list[tuple[str, str]]  # (name, label)
    rows: list[HarnessRow]
    baseline: HarnessRow | None
    verdict: Verdict
    runs: int

    @property
    def harnesses(self) -> list[str]:
        return [r.harness for r in self.rows]


def matrix_runs(model_id: str) -> RunQuerySet:
    """The published, complete matrix runs of a model, on every class (a run cut short may
    have stopped on its slowest tasks: its finished ones would flatter it)."""
    return (
        Run.objects.published().matrix().filter(stack__model_id=model_id, outcome=Outcome.COMPLETE)
    )


def classes_for(model_id: str) -> list[HardwareClass]:
    """The hardware classes where the model has published matrix runs, most runs first; each
    with `matrix_runs` (counted from the runs' side: a class holds every model's runs)."""
    counts = dict(
        matrix_runs(model_id)
        .exclude(hardware_class=None)
        .order_by()
        .values("hardware_class")
        .annotate(n=Count("id"))
        .values_list("hardware_class", "n")
    )
    classes = list(HardwareClass.objects.filter(id__in=list(counts)))
    for found in classes:
        found.matrix_runs = counts[found.id]  # type: ignore[attr-defined]
    return sorted(classes, key=lambda c: (-counts[c.id], c.label))


def _setups(runs: RunQuerySet) -> list[Setup]:
    found = (
        runs.values("stack__quantization", "stack__engine")
        .annotate(n=Count("id"))
        .order_by("-n", "stack__quantization", "stack__engine")
    )
    return [Setup(row["stack__quantization"], row["stack__engine"], row["n"]) for row in found]


def _labels(values: Iterable[object]) -> list[str]:
    found = sorted({payload.text(v)[:LABEL_CHARS] for v in values if payload.text(v).strip()})
    return found[:MAX_LABELS]


def _run_rows(runs: RunQuerySet) -> list[dict[str, Any]]:
    """Each run's harness, version and variant: the bundle's `settings.harness_variant`, else
    what its matrix suites recorded (`suites.<name>.metadata.harness.variant`), at the top of
    the payload or in a v3 envelope's `run`. Only these keys are read (a payload can be large).
    """

    def key(first: str, *path: str) -> KeyTransform:
        node = KeyTransform(first, "raw_payload")
        for name in path:
            node = KeyTransform(name, node)
        return node

    sources: dict[str, KeyTransform] = {}
    for prefix in ((), ("run",)):
        sources[f"v{len(sources)}"] = key(*prefix, "settings", "harness_variant")
        for suite in MATRIX_SUITES:
            path = (*prefix, "suites", suite, "metadata", "harness", "variant")
            sources[f"v{len(sources)}"] = key(*path)
    rows = list(
        runs.annotate(**sources).values("id", "stack__harness", "harness_version", *sources)
    )
    for row in rows:
        found = [payload.text(row.pop(name)).strip() for name in sources]
        row["variant"] = next((v for v in found if v), "")[:LABEL_CHARS]
    return rows


def _attempts(run_ids: list[int]) -> list[Attempt]:
    rows = (
        TaskResult.objects.filter(
            suite_result__run_id__in=run_ids, suite_result__suite__in=MATRIX_SUITES
        )
        # Only the two keys: the rest of a task's metadata is its owner's (and can be large).
        .annotate(
            overhead=KeyTransform("overhead", "metadata"),
            failure=KeyTransform("failure", "metadata"),
        )
        .values_list(
            "suite_result__run_id",
            "suite_result__run__stack__harness",
            "suite_result__suite",
            "task_id",
            "passed",
            "overhead",
            "failure",
        )
    )
    return [attempt(*row) for row in rows]


def build(
    model_id: str,
    hardware_class: HardwareClass,
    *,
    quantization: str | None = None,
    engine: str | None = None,
) -> Matrix | None:
    """The matrix of the model on this class, for one setup (the one asked for, else the one
    with the most runs); None when the model has no published matrix run there."""
    on_class = matrix_runs(model_id).filter(hardware_class=hardware_class)
    setups = _setups(on_class)
    if not setups:
        return None
    setup = next(
        (
            s
            for s in setups
            if (quantization is None or s.quantization == quantization)
            and (engine is None or s.engine == engine)
        ),
        setups[0],
    )
    runs = on_class.filter(stack__quantization=setup.quantization, stack__engine=setup.engine)
    newest = list(runs.order_by("-started_at", "-id").values_list("id", flat=True)[:MAX_RUNS])
    run_rows = _run_rows(Run.objects.filter(id__in=newest))
    attempts = _attempts([r["id"] for r in run_rows])
    suites = [s for s in MATRIX_SUITES if any(a.suite == s for a in attempts)]
    # A row per harness and variant: Aider's edit format alone can swing a score end to end.
    variant_of = {r["id"]: r["variant"] for r in run_rows}
    groups: dict[tuple[str, str], list[Attempt]] = defaultdict(list)
    for a in attempts:
        groups[(a.harness, variant_of.get(a.run_id, ""))].append(a)
    raw = groups.get((BASELINE, ""))
    rows = []
    for harness, variant in sorted(groups, key=lambda k: (harness_order(k[0]), k[1])):
        mine = groups[(harness, variant)]
        base = None if harness == BASELINE else raw
        cells: list[Cell | None] = []
        for suite in suites:
            in_suite = [a for a in mine if a.suite == suite]
            base_suite = [a for a in base if a.suite == suite] if base is not None else None
            cells.append(cell(suite, in_suite, base_suite) if in_suite else None)
        mine_runs = {a.run_id for a in mine}
        rows.append(
            HarnessRow(
                harness=harness,
                kind=harness_kind(harness),
                runs=len(mine_runs),
                versions=_labels(r["harness_version"] for r in run_rows if r["id"] in mine_runs),
                variant=variant,
                cells=cells,
                overall=cell("all", mine, base),
                suite_names=suites,
            )
        )
    baseline = next((r for r in rows if r.harness == BASELINE and not r.variant), None)
    return Matrix(
        model_id=model_id,
        hardware_class=hardware_class,
        setup=setup,
        setups=setups,
        suites=[(s, SUITE_LABELS.get(s, s)) for s in suites],
        rows=rows,
        baseline=baseline,
        verdict=verdict(rows, suites),
        runs=len(run_rows),
    )


def for_stack(stack: Stack, preferred_slug: str = "") -> Matrix | None:
    """The matrix a stack page mentions: its model on the class asked for (else the class
    with the most matrix runs), in the stack's own setup where that has matrix runs."""
    classes = classes_for(stack.model_id)
    if not classes:
        return None
    chosen = next((c for c in classes if c.slug == preferred_slug), classes[0])
    return build(stack.model_id, chosen, quantization=stack.quantization, engine=stack.engine)


def models_with_matrix(pairs: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """Which of these (model id, hardware class id) pairs have published matrix runs (one
    query, for the leaderboard's links)."""
    if not pairs:
        return set()
    models = {model for model, _ in pairs}
    classes = {class_id for _, class_id in pairs}
    found = (
        Run.objects.published()
        .matrix()
        .filter(stack__model_id__in=models, hardware_class_id__in=classes)
        .values_list("stack__model_id", "hardware_class_id")
        .distinct()
    )
    return set(found) & pairs
