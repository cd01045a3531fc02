"""Speed at context depth and under concurrency, read from the bundles' `sweeps` block.

The block's shape is fixed in the engine (profiles `full` and `speed-deep`): depth cells with
prefill, decode and TTFT summaries, and concurrency cells with aggregate and per-stream tok/s
and the TTFT tail. Every value is type-checked here (leaderboard.payload), because an older or
hostile upload may hold anything under these names. The run page shows one run's cells; the
stack page takes the median of the runs' own figures per cell, one group per hardware class
(and sweep setup), never pooled across classes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db.models import Q
from django.db.models.fields.json import KeyTransform

from leaderboard import charts, payload
from runs import lane_rows as lane_rules
from runs.figures import Interval
from runs.models import Run

MAX_CELLS = 16  # cells read per block: the engine writes four or five
MAX_GROUPS = 12  # hardware classes (and setups) drawn and tabled, most runs first
MAX_VALUES = 5  # runs' own figures listed where too few runs make a median
MAX_REASONS = 3  # distinct reasons shown per cell
MAX_DEPTH = 10_000_000
MAX_STREAMS = 4096
MAX_TOKENS = 10_000_000
STATUSES = ("measured", "skipped", "failed")
TAIL_LABELS = ("max", "p99")


def depth_label(depth: int) -> str:
    """0, 4K, 16K, 32K: a depth in thousands of tokens (K = 1024), as llama-bench names them."""
    if depth and depth % 1024 == 0:
        return f"{depth // 1024}K"
    return f"{depth:,}"


@dataclass(frozen=True)
class Figure:
    """One run's figure from an engine Summary: the median of its trials with a 95% interval,
    or the mean where there were too few trials for a median."""

    n: int | None  # None: the tool published a mean without its trial count
    median: float | None
    mean: float | None
    low: float | None
    high: float | None
    coverage: float | None

    @property
    def value(self) -> float | None:
        return self.median if self.median is not None else self.mean


def figure(value: Any) -> Figure | None:
    if not isinstance(value, dict):
        return None
    n = payload.count(value.get("n"), high=10**7)
    median, mean = payload.number(value.get("median")), payload.number(value.get("mean"))
    if median is None and mean is None:
        return None
    if not n:
        # Another tool's table (llama-bench's CSV or Markdown) gives a mean and no trials.
        if value.get("n") is not None or mean is None:
            return None
        return Figure(None, None, mean, None, None, None)
    low, high = payload.number(value.get("ci95_low")), payload.number(value.get("ci95_high"))
    if low is None or high is None or low > high or median is None:
        low = high = None
    coverage = payload.number(value.get("ci95_coverage"))
    return Figure(n, median, mean, low, high, coverage if coverage and coverage < 0.95 else None)


@dataclass(frozen=True)
class DepthCell:
    depth: int
    status: str
    reason: str = ""
    depth_tokens: int | None = None
    token_source: str = ""
    prefill: Figure | None = None
    decode: Figure | None = None
    ttft: Figure | None = None

    @property
    def label(self) -> str:
        return depth_label(self.depth)


@dataclass(frozen=True)
class StreamsCell:
    streams: int
    status: str
    reason: str = ""
    requests: int | None = None
    aggregate: float | None = None
    aggregate_decode: float | None = None
    per_stream: Figure | None = None
    ttft_p50: float | None = None
    ttft_tail: float | None = None
    tail_label: str = ""
    wall_s: float | None = None


@dataclass(frozen=True)
class Setup:
    """What a sweep measured at each cell: p new prompt tokens and n output tokens."""

    prompt_tokens: int | None
    output_tokens: int | None

    @property
    def text(self) -> str:
        if self.prompt_tokens is None and self.output_tokens is None:
            return ""
        return (
            f"{_tokens(self.prompt_tokens)} prompt and {_tokens(self.output_tokens)} output tokens"
        )


def _tokens(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


@dataclass
class DepthSweep:
    setup: Setup
    trials: int | None
    server_context: int | None
    # Where the context came from ("server", "ollama num_ctx (model context N)"): untrusted text.
    context_source: str
    method: str
    cells: list[DepthCell]


@dataclass
class ConcurrencySweep:
    setup: Setup
    server_slots: int | None
    slots_source: str
    cells: list[StreamsCell]


@dataclass
class RunSweeps:
    depth: DepthSweep | None = None
    concurrency: ConcurrencySweep | None = None

    @property
    def recorded(self) -> bool:
        return self.depth is not None or self.concurrency is not None


def _cells(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        return []
    return [c for c in raw[:MAX_CELLS] if isinstance(c, dict) and c.get("status") in STATUSES]


def _setup(raw: dict[str, Any]) -> Setup:
    return Setup(
        payload.count(raw.get("prompt_tokens"), high=MAX_TOKENS),
        payload.count(raw.get("output_tokens"), high=MAX_TOKENS),
    )


def _depth(raw: dict[str, Any]) -> DepthSweep:
    cells: dict[int, DepthCell] = {}
    for cell in _cells(raw.get("cells")):
        depth = payload.count(cell.get("depth"), high=MAX_DEPTH)
        if depth is None or depth in cells:
            continue  # a cell without a depth cannot be placed; a repeated one is ignored
        measured = cell["status"] == "measured"
        source = cell.get("token_count_source")
        cells[depth] = DepthCell(
            depth=depth,
            status=cell["status"],
            reason="" if measured else payload.reason(cell.get("reason")),
            depth_tokens=payload.count(cell.get("depth_tokens"), high=MAX_DEPTH),
            token_source=source if source in ("server", "estimated") else "",
            prefill=figure(cell.get("prefill_tps")) if measured else None,
            decode=figure(cell.get("decode_tps")) if measured else None,
            ttft=figure(cell.get("ttft_ms")) if measured else None,
        )
    return DepthSweep(
        setup=_setup(raw),
        trials=payload.count(raw.get("trials"), high=10**6),
        server_context=payload.count(raw.get("server_context"), high=MAX_TOKENS * 10),
        context_source=payload.text(raw.get("context_source"))[:80],
        method=payload.text(raw.get("method")),
        cells=[cells[d] for d in sorted(cells)],
    )


def _concurrency(raw: dict[str, Any]) -> ConcurrencySweep:
    cells: dict[int, StreamsCell] = {}
    for cell in _cells(raw.get("cells")):
        streams = payload.count(cell.get("streams"), high=MAX_STREAMS)
        if not streams or streams in cells:
            continue
        measured = cell["status"] == "measured"
        label = cell.get("ttft_tail_label")
        cells[streams] = StreamsCell(
            streams=streams,
            status=cell["status"],
            reason="" if measured else payload.reason(cell.get("reason")),
            requests=payload.count(cell.get("requests"), high=10**7) if measured else None,
            aggregate=payload.number(cell.get("aggregate_tps")) if measured else None,
            # llama-benchy's total rate counts decode only: shown as that, never as the above.
            aggregate_decode=(
                payload.number(cell.get("aggregate_decode_tps")) if measured else None
            ),
            per_stream=figure(cell.get("per_stream_tps")) if measured else None,
            ttft_p50=payload.number(cell.get("ttft_p50_ms")) if measured else None,
            ttft_tail=payload.number(cell.get("ttft_tail_ms")) if measured else None,
            tail_label=label if measured and label in TAIL_LABELS else "",
            wall_s=payload.number(cell.get("wall_s")) if measured else None,
        )
    return ConcurrencySweep(
        setup=_setup(raw),
        server_slots=payload.count(raw.get("server_slots"), high=MAX_STREAMS * 16),
        slots_source=payload.text(raw.get("slots_source")),
        cells=[cells[s] for s in sorted(cells)],
    )


def run_sweeps(raw: Any) -> RunSweeps:
    """One stored payload's sweeps, type-checked; blocks that are missing or not objects are
    None."""
    sweeps = payload.block(raw, "sweeps")
    depth, concurrency = sweeps.get("depth"), sweeps.get("concurrency")
    return RunSweeps(
        depth=_depth(depth) if isinstance(depth, dict) else None,
        concurrency=_concurrency(concurrency) if isinstance(concurrency, dict) else None,
    )


def payload_sweeps(run_ids: Iterable[int]) -> dict[int, RunSweeps]:
    """{run id: its sweeps} for the runs that have any, in one query that reads only the
    `sweeps` keys (a stored payload can be megabytes): the envelope's run.sweeps or the
    bundle's own."""
    rows = (
        Run.objects.filter(id__in=list(run_ids))
        .annotate(
            top=KeyTransform("sweeps", "raw_payload"),
            inner=KeyTransform("sweeps", KeyTransform("run", "raw_payload")),
        )
        .filter(Q(top__isnull=False) | Q(inner__isnull=False))
    )
    found: dict[int, RunSweeps] = {}
    for run_id, top, inner in rows.values_list("id", "top", "inner"):
        stored = {"run": {"sweeps": inner}} if inner is not None else {"sweeps": top}
        sweeps = run_sweeps(stored)
        if sweeps.recorded:
            found[run_id] = sweeps
    return found


# --- the stack page: the runs' figures per hardware class --------------------------------------


@dataclass
class NotMeasured:
    status: str
    reason: str
    runs: int


@dataclass
class Row:
    """One cell (a depth or a stream count) over a group's runs: medians of the runs' own
    figures with their 95% interval (n = runs), and why the other runs measured nothing."""

    key: int
    label: str
    runs: int
    figures: dict[str, Interval]
    values: list[float]  # the runs' own headline figures, listed where n is too small
    not_measured: list[NotMeasured]
    tail_label: str = ""


@dataclass
class Group:
    """One hardware class (and sweep setup): its runs with the sweep, and a row per cell."""

    label: str
    slug: str
    setup: Setup
    runs: int
    rows: list[Row]
    slots: str = ""  # the server slot counts the runs reported (concurrency)

    @property
    def notes(self) -> list[tuple[str, NotMeasured]]:
        """(cell label, why) for every cell some run skipped or failed."""
        return [(row.label, item) for row in self.rows for item in row.not_measured]


@dataclass
class StackSweeps:
    depth: list[Group] = field(default_factory=list)
    concurrency: list[Group] = field(default_factory=list)
    decode_chart: charts.TrendLines | None = None
    prefill_chart: charts.TrendLines | None = None
    aggregate_chart: charts.TrendLines | None = None
    per_stream_chart: charts.TrendLines | None = None
    more_groups: int = 0  # groups past MAX_GROUPS, left out

    @property
    def measured(self) -> bool:
        return bool(self.depth or self.concurrency)


def _reasons(cells: Sequence[DepthCell | StreamsCell]) -> list[NotMeasured]:
    found = Counter((c.status, c.reason) for c in cells if c.status != "measured")
    ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
    return [NotMeasured(status, reason, n) for (status, reason), n in ranked[:MAX_REASONS]]


def _value(item: Figure | None) -> float | None:
    return item.value if item is not None else None


def _depth_row(depth: int, cells: list[DepthCell]) -> Row:
    measured = [c for c in cells if c.status == "measured"]
    decode = [v for v in (_value(c.decode) for c in measured) if v is not None]
    return Row(
        key=depth,
        label=depth_label(depth),
        runs=len(measured),
        figures={
            name: Interval.of(_value(getattr(c, name)) for c in measured)
            for name in ("decode", "prefill", "ttft")
        },
        values=sorted(decode)[:MAX_VALUES],
        not_measured=_reasons(cells),
    )


def _streams_row(streams: int, cells: list[StreamsCell]) -> Row:
    measured = [c for c in cells if c.status == "measured"]
    labels = {c.tail_label for c in measured if c.ttft_tail is not None}
    return Row(
        key=streams,
        label=str(streams),
        runs=len(measured),
        figures={
            "aggregate": Interval.of(c.aggregate for c in measured),
            "per_stream": Interval.of(_value(c.per_stream) for c in measured),
            "ttft_p50": Interval.of(c.ttft_p50 for c in measured),
            "ttft_tail": Interval.of(c.ttft_tail for c in measured),
        },
        values=sorted(c.aggregate for c in measured if c.aggregate is not None)[:MAX_VALUES],
        not_measured=_reasons(cells),
        tail_label=" or ".join(sorted(labels - {""})) or "tail",
    )


Sweep = TypeVar("Sweep", DepthSweep, ConcurrencySweep)


def _groups(
    rows: list[dict[str, Any]],
    found: dict[int, RunSweeps],
    part: Callable[[RunSweeps], Sweep | None],
) -> list[tuple[str, str, Setup, list[Sweep]]]:
    """(class label, slug, setup, its sweeps) per class and setup, most runs first; `part`
    picks the sweep of a run's sweeps."""
    grouped: dict[tuple[int, Setup], list[Sweep]] = defaultdict(list)
    labels: dict[tuple[int, Setup], tuple[str, str]] = {}
    for row in rows:
        of_run = found.get(row["id"])
        sweep = part(of_run) if of_run is not None else None
        if sweep is None:
            continue
        key = (row["hardware_class_id"], sweep.setup)
        grouped[key].append(sweep)
        labels[key] = (row["hardware_class__label"], row["hardware_class__slug"])
    ranked = sorted(grouped.items(), key=lambda item: (-len(item[1]), labels[item[0]][0]))
    classes = Counter(key[0] for key in grouped)
    out: list[tuple[str, str, Setup, list[Sweep]]] = []
    for key, sweeps in ranked:
        label, slug = labels[key]
        if classes[key[0]] > 1 and key[1].text:
            label = f"{label} · {key[1].text}"
        out.append((label, slug, key[1], sweeps))
    return out


def _depth_group(label: str, slug: str, setup: Setup, sweeps: list[DepthSweep]) -> Group:
    cells: dict[int, list[DepthCell]] = defaultdict(list)
    for sweep in sweeps:
        for cell in sweep.cells:
            cells[cell.depth].append(cell)
    rows = [_depth_row(depth, cells[depth]) for depth in sorted(cells)]
    return Group(label, slug, setup, len(sweeps), rows)


def _streams_group(label: str, slug: str, setup: Setup, sweeps: list[ConcurrencySweep]) -> Group:
    cells: dict[int, list[StreamsCell]] = defaultdict(list)
    for sweep in sweeps:
        for cell in sweep.cells:
            cells[cell.streams].append(cell)
    rows = [_streams_row(n, cells[n]) for n in sorted(cells)]
    slots = sorted({s.server_slots for s in sweeps if s.server_slots is not None})
    return Group(label, slug, setup, len(sweeps), rows, ", ".join(str(n) for n in slots))


def _chart(groups: list[Group], name: str, unit: str) -> charts.TrendLines | None:
    """One line per group over every cell any group has; a cell with under three runs in a
    group leaves a gap in its line (a point is drawn with its interval, which needs three;
    the tables show the cell's median with its run count)."""
    keys = sorted({row.key for group in groups for row in group.rows})
    if not keys:
        return None
    labels = {row.key: row.label for group in groups for row in group.rows}
    series: list[tuple[str, list[tuple[str, Interval | None]]]] = []
    for group in groups:
        by_key = {
            row.key: row.figures[name] for row in group.rows if row.figures[name].has_interval
        }
        series.append((group.label, [(labels[k], by_key.get(k)) for k in keys]))
    return charts.interval_lines(series, unit=unit)


def stack_sweeps(rows: list[dict[str, Any]]) -> StackSweeps:
    """The sweeps of the given run rows (summaries.run_rows) that count in a lane: one group
    per hardware class and sweep setup, never pooled across classes."""
    counted = [r for r in rows if lane_rules.counts(r) and r["hardware_class_id"] is not None]
    found = payload_sweeps(r["id"] for r in counted)
    if not found:
        return StackSweeps()
    depth_groups = _groups(counted, found, lambda s: s.depth)
    streams_groups = _groups(counted, found, lambda s: s.concurrency)
    depth = [_depth_group(*g) for g in depth_groups[:MAX_GROUPS]]
    concurrency = [_streams_group(*g) for g in streams_groups[:MAX_GROUPS]]
    return StackSweeps(
        depth=depth,
        concurrency=concurrency,
        decode_chart=_chart(depth, "decode", "decode tok/s"),
        prefill_chart=_chart(depth, "prefill", "prefill tok/s"),
        aggregate_chart=_chart(concurrency, "aggregate", "aggregate tok/s"),
        per_stream_chart=_chart(concurrency, "per_stream", "per-stream tok/s"),
        more_groups=max(0, len(depth_groups) - MAX_GROUPS, len(streams_groups) - MAX_GROUPS),
    )
