"""Expected speed where nobody has measured: the roofline ceiling × a calibrated efficiency.

A measured lane's efficiency is its measured tok/s ÷ its roofline ceiling (runs.roofline; for a
mixture of experts whose name states its active parameters, those). The efficiency of an
unmeasured stack on a class is predicted from lanes alike in hardware kind, device count,
whether the weights fit in memory, architecture (dense or MoE), the decode ceiling's band (the
faster a token could be, the more its fixed costs weigh), engine, backend, quantization family
and model, in that order of nesting (LEVELS); each group's log-space median is shrunk toward its
parent's by n ÷ (n + PRIOR), so a group of two lanes barely moves the estimate and a group of
fifty decides it. Two shifts follow, each the median residual of the lanes that share something
with it, shrunk the same way: the model's family (any size, any machine) and the class itself.
The 80% interval is the group's conformal 10th/90th order statistics of log residuals (none
below nine lanes), blended with its parent's by n ÷ (n + SPREAD_PRIOR). `hold_out` produces the
figures in bench/README.md. No Django here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from runs import normalize, roofline
from worker.rules.stats import median

# How many lanes a group needs to count as much as its parent: a prior of 4 pseudo-lanes.
PRIOR = 4.0
# A spread needs more lanes than a centre: a group's interval counts as much as its parent's
# only from ten lanes on.
SPREAD_PRIOR = 10.0
# The interval's quantiles (an 80% interval).
LOW_Q, HIGH_Q = 0.10, 0.90
METRICS = ("decode", "prefill")
# Levels of the hierarchy, broadest first; each key adds one field to its parent's.
LEVELS = ("kind", "devices", "fits", "arch", "speed", "engine", "backend", "quant", "model")
# The decode ceiling (tok/s), in half-decades. A token costs the time to read its weights plus
# fixed costs (kernel launches, sampling, the server's loop); the faster the ceiling, the larger
# the fixed costs' share, so the less of it a stack reaches. The ceiling, not the weight size,
# says which: a 1 GB model is bandwidth-bound on a CPU and overhead-bound on a large GPU.
CEILING_BOUNDS: tuple[tuple[float, str], ...] = (
    (30.0, "<30 tok/s"),
    (100.0, "30-100 tok/s"),
    (300.0, "100-300 tok/s"),
)
CEILING_BOUNDS += ((1000.0, "300-1000 tok/s"),)

_ENGINES = {
    "llamacpp": "llama.cpp",
    "llama-cpp": "llama.cpp",
    "llama.cpp": "llama.cpp",
    "llama-server": "llama.cpp",
    "llama-bench": "llama.cpp",
    "lmstudio": "lm-studio",
    "lm studio": "lm-studio",
}


def engine_key(engine: str) -> str:
    text = (engine or "").strip().lower()
    return _ENGINES.get(text, text or "unstated")


def backend_key(backend: str, kind: str) -> str:
    """The stated backend; Apple silicon and CPU-only machines have only one in practice."""
    text = (backend or "").strip().lower()
    if text:
        return text
    return {"apple": "metal", "cpu": "cpu"}.get(kind, "unstated")


def quant_family(bits: roofline.Bits) -> str:
    """Formats that decode alike: floats, 8-bit, GGUF k-quants, legacy GGUF, i-quants, MLX
    n-bit, server 4-bit (AWQ/GPTQ/INT4), MXFP4, and not stated."""
    label = bits.label.upper()
    if bits.assumed:
        return "unstated"
    if bits.bits >= 16:
        return "float"
    if bits.bits >= 8:
        return "8bit"
    if label.startswith("IQ") or label.startswith("TQ"):
        return "iquant"
    if "BIT" in label:
        return "mlx"
    if label == "MXFP4":
        return "mxfp4"
    if re.match(r"^Q\d_K", label):
        return "kquant"
    if re.match(r"^Q\d", label):
        return "legacy"
    return "server4"


def speed_band(decode_ceiling: float | None) -> str:
    """The half-decade of decode ceilings a lane's falls in (CEILING_BOUNDS)."""
    if not decode_ceiling:
        return "ceiling unknown"
    for bound, name in CEILING_BOUNDS:
        if decode_ceiling < bound:
            return name
    return ">1000 tok/s"


def model_key(model_id: str) -> str:
    """The model a lane measures, whatever its quantization or file name: the held-out unit."""
    name = normalize.normalise_model_id(model_id).rsplit("/", 1)[-1].lower()
    quant = normalize.parse_model(model_id)["quantization"].lower()
    if quant:
        name = name.replace(quant, "")
    name = re.sub(r"\b(?:ud|gguf|instruct|it|chat|mlx)\b", "", name)
    return re.sub(r"[^a-z0-9.]+", "-", name).strip("-.")


def family_key(model: str) -> str:
    """A model key without its size and what follows it: "qwen3.5-9b" → "qwen3.5"."""
    return re.sub(r"-?\d+(?:\.\d+)?[bm]\b.*$", "", model) or model


# "Qwen3.6-35B-A3B", "LFM2-8B-A1B", "Mellum2-12B-A2.5B": the active parameters a name states.
_STATED_ACTIVE = re.compile(r"[-_:.]a(\d+(?:\.\d+)?)b(?=$|[-_.: ])", re.IGNORECASE)


def stated_active_b(model_id: str, weights: roofline.Weights) -> float | None:
    """The active parameters (B) a mixture of experts' name states, where the roofline read
    the model as dense or did not know its active count. The roofline, a bound, trusts no name
    to make a model sparse; an estimate takes the name's word, since reading 35B of weights
    per token where 3B are read misses by ten times."""
    if weights.is_moe and weights.active_known:
        return None
    found = _STATED_ACTIVE.search(normalize.normalise_model_id(model_id))
    if not found:
        return None
    active = float(found.group(1))
    return active if 0 < active < weights.total_b else None


@dataclass(frozen=True)
class Lane:
    """One stack on one hardware class: its features, ceilings and (where measured) speeds."""

    ident: str
    model: str
    class_key: str
    kind: str
    moe: bool
    engine: str
    backend: str
    quant: str
    decode_ceiling: float | None
    prefill_ceiling: float | None
    decode: float | None = None
    prefill: float | None = None
    label: str = ""
    # Several devices: the ceiling sums their bandwidth as if tensor-parallel, which a layer
    # split does not reach.
    devices: int = 1
    active_gb: float = 0.0
    # Whether all the weights fit in the class's memory (None: memory unknown); where they do
    # not, layers run from system RAM and the device's ceiling is far out of reach.
    fits: bool | None = None

    def path(self) -> tuple[tuple[str, ...], ...]:
        """The group key at each level, broadest first."""
        fields = (
            self.kind,
            "1" if self.devices <= 1 else "multi",
            {True: "fits", False: "spills", None: "memory unknown"}[self.fits],
            "moe" if self.moe else "dense",
            speed_band(self.decode_ceiling),
            self.engine,
            self.backend,
            self.quant,
            self.model,
        )
        return tuple(fields[: i + 1] for i in range(len(fields)))

    def ceiling(self, metric: str) -> float | None:
        return self.decode_ceiling if metric == "decode" else self.prefill_ceiling

    def measured(self, metric: str) -> float | None:
        return self.decode if metric == "decode" else self.prefill

    def log_efficiency(self, metric: str) -> float | None:
        ceiling, value = self.ceiling(metric), self.measured(metric)
        if not ceiling or not value or ceiling <= 0 or value <= 0:
            return None
        return math.log(value / ceiling)


def lane_features(
    *,
    ident: str,
    ceilings: roofline.Ceilings,
    model_id: str,
    class_key: str,
    kind: str,
    engine: str,
    backend: str = "",
    decode: float | None = None,
    prefill: float | None = None,
    label: str = "",
    devices: int = 1,
    memory_gb: float | None = None,
) -> Lane:
    """A Lane from a stack's fields and its ceilings on a class (runs.roofline.ceilings)."""
    active = stated_active_b(model_id, ceilings.weights)
    # The roofline's ceilings scale with 1 ÷ active parameters.
    scale = ceilings.weights.active_b / active if active else 1.0
    return Lane(
        ident=ident,
        model=model_key(model_id),
        class_key=class_key,
        kind=kind,
        moe=ceilings.weights.is_moe or active is not None,
        engine=engine_key(engine),
        backend=backend_key(backend, kind),
        quant=quant_family(ceilings.bits),
        decode_ceiling=ceilings.decode_tps * scale,
        prefill_ceiling=ceilings.prefill_tps * scale if ceilings.prefill_tps else None,
        decode=decode,
        prefill=prefill,
        label=label,
        devices=devices,
        active_gb=ceilings.active_gb / scale,
        fits=weights_fit(ceilings, memory_gb),
    )


def weights_fit(ceilings: roofline.Ceilings, memory_gb: float | None) -> bool | None:
    """All the weights (the file's size where known, else at the format's bits) within the
    class's memory, or None if unknown."""
    if not memory_gb:
        return None
    return weights_gb(ceilings) <= memory_gb


def weights_gb(ceilings: roofline.Ceilings) -> float:
    """The whole model's weights in GB: the file's size where the run reported it."""
    if ceilings.weights_bytes:
        return ceilings.weights_bytes / 1e9
    return ceilings.weights.total_b * ceilings.bits.bits / 8


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted-or-not values (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Level:
    """The calibration at one level of the hierarchy: a centre and an interval, in log space."""

    key: tuple[str, ...]
    n: int
    centre: float
    low: float
    high: float


@dataclass(frozen=True)
class Shift:
    """One adjustment to the hierarchy's efficiency: `log` from `n` measured lanes that share
    this `kind` ("family" or "class") of thing, `key`, with the lane estimated."""

    kind: str
    key: str
    n: int
    log: float

    @property
    def factor(self) -> float:
        return math.exp(self.log)


@dataclass(frozen=True)
class Estimate:
    metric: str
    ceiling: float
    efficiency: float
    value: float
    low: float
    high: float
    levels: tuple[Level, ...] = field(default_factory=tuple)
    # The model family's and the class's adjustments, in log space, added to the
    # hierarchy's centre; the interval is the hierarchy's, not narrowed by them.
    shifts: tuple[Shift, ...] = field(default_factory=tuple)

    @property
    def group(self) -> Level:
        """The narrowest level with any lanes of its own: what the estimate mostly rests on."""
        own = [level for level in self.levels if level.n]
        return own[-1] if own else self.levels[0]

    @property
    def width(self) -> float:
        """High ÷ low; unbounded where too few lanes set a low end."""
        return self.high / self.low if self.low > 0 else math.inf

    def covers(self, truth: float) -> bool:
        return self.low <= truth <= self.high


def tails(residuals: Sequence[float]) -> tuple[float, float] | None:
    """The residuals that bound an 80% interval for one more lane (split-conformal order
    statistics: the k-th from each end, k = ⌊0.1 (n + 1)⌋), or None below 9 lanes, where no
    pair of them holds a new lane 80% of the time."""
    k = math.floor(LOW_Q * (len(residuals) + 1))
    if k < 1:
        return None
    ordered = sorted(residuals)
    return ordered[k - 1], ordered[len(ordered) - k]


def _shrunk(values: list[float], parent: Level | None, key: tuple[str, ...]) -> Level:
    """A group's centre and spread, pulled toward its parent's by PRIOR pseudo-lanes."""
    n = len(values)
    if parent is None:
        centre = median(values, default=math.nan)
        low, high = tails([v - centre for v in values]) or (-math.inf, math.inf)
        return Level(key, n, centre, min(low, 0.0), max(high, 0.0))
    if not n:
        return Level(key, 0, parent.centre, parent.low, parent.high)
    weight = n / (n + PRIOR)
    centre = weight * median(values, default=math.nan) + (1 - weight) * parent.centre
    own = tails([v - centre for v in values])
    if own is None:
        return Level(key, n, centre, parent.low, parent.high)
    # A spread needs more lanes than a centre: the parent's counts for SPREAD_PRIOR lanes.
    spread = n / (n + SPREAD_PRIOR)
    low = spread * own[0] + (1 - spread) * parent.low
    high = spread * own[1] + (1 - spread) * parent.high
    return Level(key, n, centre, min(low, 0.0), max(high, 0.0))


class Calibration:
    """Measured lanes indexed by group, for one metric."""

    def __init__(self, lanes: Iterable[Lane], metric: str) -> None:
        self.metric = metric
        self.groups: dict[tuple[str, ...], list[float]] = {}
        self.by_class: dict[str, list[tuple[Lane, float]]] = {}
        self.by_family: dict[str, list[tuple[Lane, float]]] = {}
        self.n = 0
        self._memo: dict[tuple[str, ...], Level] = {}
        # A class's (or family's) shift is the same for every lane estimated on it.
        self._shifts: dict[tuple[str, str], tuple[int, float]] = {}
        for lane in lanes:
            value = lane.log_efficiency(metric)
            if value is None:
                continue
            self.n += 1
            self.groups.setdefault((), []).append(value)
            for key in lane.path():
                self.groups.setdefault(key, []).append(value)
            self.by_class.setdefault(lane.class_key, []).append((lane, value))
            self.by_family.setdefault(family_key(lane.model), []).append((lane, value))

    def compiled(self) -> Calibration:
        """Every group's level and every class's and family's shift worked out now, and the
        lanes behind them dropped: what the site caches and reads for each estimate (a lane's
        path that no measured lane shares inherits its parent's level, as before)."""
        for key in list(self.groups):
            self._level(key)
        for class_key in self.by_class:
            self._group_shift("class", class_key)
        for family in self.by_family:
            self._group_shift("family", family)
        self.groups = {(): self.groups.get((), [])}
        self.by_class, self.by_family = {}, {}
        return self

    def _level(self, key: tuple[str, ...]) -> Level:
        if key not in self._memo:
            parent = self._level(key[:-1]) if key else None
            self._memo[key] = _shrunk(self.groups.get(key, []), parent, key)
        return self._memo[key]

    def levels(self, lane: Lane) -> tuple[Level, ...]:
        return (self._level(()), *(self._level(key) for key in lane.path()))

    def _shift(self, peers: list[tuple[Lane, float]]) -> tuple[int, float]:
        """The median of the peers' residuals from their hierarchy's centres, shrunk by
        n ÷ (n + PRIOR): the count and the log shift."""
        residuals = [value - self.levels(peer)[-1].centre for peer, value in peers]
        if not residuals:
            return 0, 0.0
        n = len(residuals)
        return n, n / (n + PRIOR) * median(residuals, default=math.nan)

    def family_shift(self, lane: Lane) -> tuple[int, float]:
        """How far the measured lanes of the model's family (Qwen3.5 of any size, on any
        machine) sit from their estimates: what an architecture does that its weight bytes do
        not say (a large vocabulary, attention layers that are not all full, convolutions)."""
        return self._group_shift("family", family_key(lane.model))

    def class_shift(self, lane: Lane) -> tuple[int, float]:
        """How far the class's other measured lanes sit from their estimates (the machines'
        drivers, cooling, memory clocks, power limits)."""
        return self._group_shift("class", lane.class_key)

    def _group_shift(self, kind: str, key: str) -> tuple[int, float]:
        """A class's or a family's shift, worked out once (compiled() keeps them all)."""
        if (kind, key) not in self._shifts:
            peers = (self.by_class if kind == "class" else self.by_family).get(key, [])
            self._shifts[kind, key] = self._shift(peers)
        return self._shifts[kind, key]

    def estimate(self, lane: Lane) -> Estimate | None:
        ceiling = lane.ceiling(self.metric)
        if not ceiling or not self.groups.get(()):
            return None
        levels = self.levels(lane)
        last = levels[-1]
        class_n, shift = self.class_shift(lane)
        family_n, family = self.family_shift(lane)
        shifts = (
            Shift("family", family_key(lane.model), family_n, family),
            Shift("class", lane.class_key, class_n, shift),
        )
        centre = last.centre + sum(s.log for s in shifts)
        return Estimate(
            metric=self.metric,
            ceiling=ceiling,
            efficiency=math.exp(centre),
            value=ceiling * math.exp(centre),
            low=ceiling * math.exp(centre + last.low),
            high=ceiling * math.exp(centre + last.high),
            levels=levels,
            shifts=shifts,
        )

    def global_estimate(self, lane: Lane) -> Estimate | None:
        """The plain formula: the ceiling × one efficiency for every lane."""
        ceiling = lane.ceiling(self.metric)
        if not ceiling or not self.groups.get(()):
            return None
        top = _shrunk(self.groups[()], None, ())
        return Estimate(
            metric=self.metric,
            ceiling=ceiling,
            efficiency=math.exp(top.centre),
            value=ceiling * math.exp(top.centre),
            low=ceiling * math.exp(top.centre + top.low),
            high=ceiling * math.exp(top.centre + top.high),
            levels=(top,),
        )


def held_out_together(lane: Lane, other: Lane) -> bool:
    """The lanes a hold-out of `lane` leaves out: every lane of its model on its class."""
    return other.model == lane.model and other.class_key == lane.class_key


@dataclass(frozen=True)
class Trial:
    """One held-out lane's truth beside the calibrated, plain and raw-ceiling estimates."""

    lane: Lane
    metric: str
    truth: float
    calibrated: Estimate
    plain: Estimate

    @staticmethod
    def error(estimate: float, truth: float) -> float:
        return abs(estimate - truth) / truth

    @property
    def calibrated_error(self) -> float:
        return self.error(self.calibrated.value, self.truth)

    @property
    def plain_error(self) -> float:
        return self.error(self.plain.value, self.truth)

    @property
    def ceiling_error(self) -> float:
        return self.error(self.calibrated.ceiling, self.truth)


def hold_out(
    lanes: Sequence[Lane],
    metric: str,
    *,
    leave_out: Callable[[Lane, Lane], bool] = held_out_together,
) -> list[Trial]:
    """Estimate every measured lane from the others, with its model's lanes on its class out."""
    trials = []
    for lane in lanes:
        truth = lane.measured(metric)
        if lane.log_efficiency(metric) is None or truth is None:
            continue
        calibration = Calibration((o for o in lanes if not leave_out(lane, o)), metric)
        calibrated = calibration.estimate(lane)
        plain = calibration.global_estimate(lane)
        if calibrated is None or plain is None:
            continue
        trials.append(Trial(lane, metric, truth, calibrated, plain))
    return trials


@dataclass(frozen=True)
class Summary:
    n: int
    calibrated_mdape: float
    coverage: float
    plain_mdape: float
    plain_coverage: float
    ceiling_mdape: float
    # The intervals' median width as high ÷ low: coverage means little without it.
    width: float
    plain_width: float


def summarise(trials: Sequence[Trial]) -> Summary | None:
    if not trials:
        return None

    def middle(values: Iterable[float]) -> float:
        # An unbounded interval's width is the widest, not missing.
        return median(values, keep_infinite=True, default=math.nan)

    return Summary(
        n=len(trials),
        calibrated_mdape=middle(t.calibrated_error for t in trials),
        coverage=sum(t.calibrated.covers(t.truth) for t in trials) / len(trials),
        plain_mdape=middle(t.plain_error for t in trials),
        plain_coverage=sum(t.plain.covers(t.truth) for t in trials) / len(trials),
        ceiling_mdape=middle(t.ceiling_error for t in trials),
        width=middle(t.calibrated.width for t in trials),
        plain_width=middle(t.plain.width for t in trials),
    )
