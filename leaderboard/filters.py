"""The leaderboard's query-string state: parsed, validated, and written back as a canonical URL.

The board ranks lanes (a stack on one hardware class). Which hardware comes first: `hw` names one
class by its slug (or `all`, the pooled quality-only view), `vram` a GPU memory size, `fits` the
most memory a stack may need; `vendor`, `gpu`, `cpu`, `apple` and `hardware` (a machine's id) are
the older hardware filters and still narrow the classes. With none of them the board shows the
class with the most runs (leaderboard.scopes.hardware_scope).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from dataclasses import field as state_field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.http import QueryDict
from django.utils import timezone

from leaderboard import suite_columns
from runs import methods, normalize
from runs.matrix import canonical, harness_kind
from runs.models import RunQuerySet, ScoreScale

SCALES = {
    ScoreScale.V3: "Ranked v3",
    ScoreScale.V2: "Legacy v2",
    ScoreScale.SPEED_ONLY: "Speed only",
}
ALL_HARDWARE = "all"
VRAM_CHOICES = [(label, f"≤ {label} GB") for _, label in normalize.VRAM_BUCKETS[:1]] + [
    (label, f"{label} GB") for _, label in normalize.VRAM_BUCKETS[1:]
]
VRAM_CHOICES.append((normalize.VRAM_BUCKET_TOP, f"{normalize.VRAM_BUCKET_TOP} GB"))
FITS_CHOICES = [(str(gb), f"{gb} GB") for gb in (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)]
PARAM_CHOICES = list(normalize.PARAM_LABELS.items())
# The compute backend a stack's engine ran on, as its launch settings record it (part of the
# stack's identity, so a lane never mixes two).
BACKEND_CHOICES = [
    ("cuda", "CUDA"),
    ("rocm", "ROCm"),
    ("metal", "Metal"),
    ("vulkan", "Vulkan"),
    ("sycl", "SYCL"),
    ("cpu", "CPU"),
]
VENDOR_CHOICES = [("nvidia", "NVIDIA"), ("amd", "AMD"), ("apple", "Apple"), ("intel", "Intel")]
PROFILE_CHOICES = [("smoke", "smoke"), ("core", "core"), ("full", "full"), ("custom", "custom")]
LOCATION_CHOICES = [("local", "Local only"), ("remote", "Remote only")]
DAYS_CHOICES = [(7, "Last 7 days"), (30, "Last 30 days"), (90, "Last 90 days"), (365, "Last year")]

# key -> (label, higher is better, kind). The kind says where a sort makes sense: "score"
# (overall, which includes speed) and "speed" only within hardware classes, never on the
# pooled all-hardware view; "quality" and "score" not on the speed-only list.
SORTS = {
    "overall": ("Overall", True, "score"),
    "quality": ("Quality", True, "quality"),
    "decode": ("Decode tok/s", True, "speed"),
    "prefill": ("Prefill tok/s", True, "speed"),
    "ttft": ("TTFT ms", False, "speed"),
    "runs": ("Runs", True, "count"),
    "submitters": ("Submitters", True, "count"),
    "model": ("Model", False, "text"),
    "quant": ("Quant", False, "text"),
    "engine": ("Engine", False, "text"),
    "hardware": ("Hardware", False, "hardware"),
    "date": ("Date", True, "date"),
}


def sort_spec(key: str) -> tuple[str, bool, str]:
    """(label, higher is better, kind) of a sort key: SORTS', or a suite column's
    ("suite:coding", leaderboard.suite_columns)."""
    return SORTS[key] if key in SORTS else suite_columns.sort_spec(key)


def valid_sort(key: str) -> bool:
    return key in SORTS or bool(suite_columns.sort_suite(key))


def ranks_by_figure(key: str) -> bool:
    """Whether a sort key ranks rows by a figure: then the rows of three runs or more come
    first and those of one or two after them (runs.figures.settled)."""
    return sort_spec(key)[2] in ("score", "quality", "speed", "suite")


MAX_TEXT = 100
PAGE_SIZE = 50
_SLUG = re.compile(r"[a-z0-9][a-z0-9.-]{0,119}")
_VERSION = re.compile(r"[A-Za-z0-9._+-]{1,20}")
# The query value for runs that name no benchmark version (stored as ""; bv="" means newest).
UNVERSIONED = "unversioned"


_HARNESS_CHIP = {"format": "prompt format", "program": "agent program"}


def _choice(value: str, allowed: Iterable[tuple[object, str]]) -> str:
    return value if value in {str(key) for key, _ in allowed} else ""


@dataclass(frozen=True)
class BoardFilters:
    """Everything that selects and orders leaderboard rows; the query string is the state."""

    scale: str = ScoreScale.V3
    bv: str = ""  # benchmark version; "" = the newest one on the scale, UNVERSIONED = none
    q: str = ""
    hw: str = ""  # a hardware class slug, or "all"
    vram: str = ""
    fits: str = ""
    hardware: int = 0
    vendor: str = ""
    gpu: str = ""
    cpu: bool = False
    apple: bool = False
    engine: str = ""
    backend: str = ""
    quant: str = ""
    family: str = ""
    params: str = ""
    harness: str = ""
    # How the speeds were measured (runs.methods): "" = the method with the most rows in view;
    # a board never ranks two methods together.
    method: str = ""
    imported: str = ""  # "hide": leave out runs imported from community sources
    profile: str = ""
    comparable: str = ""  # "" = comparable runs only; "all" includes the rest
    location: str = ""
    verified: bool = False
    days: str = ""
    # Per-suite columns shown (leaderboard.suite_columns): "toolcall,coding"; "" for none.
    cols: str = ""
    sort: str = ""
    dir: str = ""
    page: int = 1
    # Worked out for the view, never read from or written to a URL (queries.settle): whether
    # the visitor named the scale, and the method the view ranks when they named none.
    scale_named: bool = state_field(default=False, metadata={"query": False})
    ranked_method: str = state_field(default="", metadata={"query": False})

    @property
    def version_named(self) -> str | None:
        """The stored benchmark version this view asks for; None: the newest on offer."""
        if not self.bv:
            return None
        return "" if self.bv == UNVERSIONED else self.bv

    @classmethod
    def from_query(cls, query: QueryDict) -> BoardFilters:
        """Read a query string; unknown or malformed values fall back to the default."""

        def text(name: str) -> str:
            return query.get(name, "").strip()[:MAX_TEXT]

        def flag(name: str) -> bool:
            return query.get(name, "") in ("1", "on", "true")

        scale = text("scale")
        sort = text("sort")
        try:
            page = max(1, min(int(query.get("page", "1")), 100_000))
        except ValueError:
            page = 1
        hardware = text("hardware")
        vram, fits, cpu, apple = text("vram"), text("fits"), flag("cpu"), flag("apple")
        hw = text("hw").lower()
        # The form's one "your hardware" menu also offers sizes and kinds; they travel as
        # hw=vram:24, hw=fits:24 or hw=kind:cpu and are written back as their own parameter.
        prefix, _, rest = hw.partition(":")
        if rest:
            hw = ""
            if prefix == "vram":
                vram = rest
            elif prefix == "fits":
                fits = rest
            elif prefix == "kind":
                cpu, apple = rest == "cpu", rest == "apple"
        elif hw != ALL_HARDWARE and not _SLUG.fullmatch(hw):
            hw = ""
        bv = text("bv")
        filters = cls(
            scale=scale if scale in SCALES else ScoreScale.V3,
            scale_named=scale in SCALES,
            bv=bv if _VERSION.fullmatch(bv) else "",
            q=text("q"),
            hw=hw,
            vram=_choice(vram, VRAM_CHOICES),
            fits=_choice(fits, FITS_CHOICES),
            hardware=int(hardware) if hardware.isdigit() and len(hardware) < 12 else 0,
            vendor=_choice(text("vendor"), VENDOR_CHOICES),
            gpu=text("gpu"),
            cpu=cpu,
            apple=apple,
            engine=text("engine"),
            backend=_choice(text("backend"), BACKEND_CHOICES),
            quant=text("quant"),
            family=text("family"),
            params=_choice(text("params"), PARAM_CHOICES),
            # An old link's format name (?harness=hermes) finds the renamed stacks.
            harness=canonical(text("harness")),
            method=text("method") if text("method") in methods.METHODS else "",
            imported="hide" if text("imported") == "hide" else "",
            profile=_choice(text("profile"), PROFILE_CHOICES),
            comparable="all" if text("comparable") == "all" else "",
            location=_choice(text("location"), LOCATION_CHOICES),
            verified=flag("verified"),
            days=_choice(text("days"), DAYS_CHOICES),
            cols=suite_columns.parse_cols(v[:MAX_TEXT] for v in query.getlist("cols")[:20]),
            sort=sort if valid_sort(sort) else "",
            dir=text("dir") if text("dir") in ("asc", "desc") else "",
            page=page,
        )
        if filters.hw:
            # One named class (or all hardware) says everything about the hardware.
            filters = replace(filters, **{name: _default(name) for name in CLASS_NARROWING})
        return filters

    # --- what the view needs to know -------------------------------------------------------

    @property
    def pooled(self) -> bool:
        """The all-hardware view: quality pooled across machines, no speed at all."""
        return self.hw == ALL_HARDWARE

    @property
    def picks_hardware(self) -> bool:
        """Whether the visitor said anything about their hardware (else: the default class)."""
        return bool(self.hw) or any(getattr(self, name) for name in CLASS_NARROWING)

    def sort_allowed(self, key: str) -> bool:
        kind = sort_spec(key)[2]
        if self.pooled and kind in ("score", "speed", "hardware"):
            return False
        return not (self.scale == ScoreScale.SPEED_ONLY and kind in ("score", "quality", "suite"))

    @property
    def default_sort(self) -> str:
        if self.scale == ScoreScale.SPEED_ONLY:
            return "decode"
        return "quality" if self.pooled else "overall"

    @property
    def sort_key(self) -> str:
        return self.sort if self.sort and self.sort_allowed(self.sort) else self.default_sort

    @property
    def ranks_by_figure(self) -> bool:
        return ranks_by_figure(self.sort_key)

    @property
    def descending(self) -> bool:
        if self.dir:
            return self.dir == "desc"
        return sort_spec(self.sort_key)[1]

    @property
    def sort_suite(self) -> str:
        """The suite the rows are sorted by, or ""."""
        return suite_columns.sort_suite(self.sort_key)

    @property
    def suites(self) -> list[str]:
        """The per-suite columns the view shows: those asked for, and the one sorted by. None
        on the speed-only scale, whose runs have no quality suite."""
        if self.scale == ScoreScale.SPEED_ONLY:
            return []
        names = set(filter(None, self.cols.split(","))) | {self.sort_suite} - {""}
        return [name for name in suite_columns.SUITE_COLUMNS if name in names]

    @property
    def suite_cols(self) -> list[tuple[str, str, str]]:
        """(name, label, header title) of each shown per-suite column."""
        return [(name, *suite_columns.SUITE_COLUMNS[name]) for name in self.suites]

    @property
    def comparable_only(self) -> bool:
        # Only v3 has a comparability rule; legacy and speed-only rows never claim it.
        return self.scale == ScoreScale.V3 and self.comparable != "all"

    @property
    def run_level(self) -> bool:
        """Filters that pick among a lane's runs, so the stored lane figures cannot answer and
        the rows are computed from the matching runs instead."""
        return bool(
            self.profile
            or self.location
            or self.verified
            or self.days
            or (self.scale == ScoreScale.V3 and not self.comparable_only)
        )

    def active(self) -> list[tuple[str, str]]:
        """(parameter, human label) for every filter that narrows the view, for the chips.

        The hardware choice itself is the view's heading, not a chip."""
        labels = {
            "q": f"“{self.q}”",
            "vram": f"VRAM {dict(VRAM_CHOICES).get(self.vram, '')}",
            "fits": f"fits in {dict(FITS_CHOICES).get(self.fits, '')}",
            "hardware": "one machine's class",
            "vendor": dict(VENDOR_CHOICES).get(self.vendor, ""),
            "gpu": self.gpu,
            "cpu": "CPU only",
            "apple": "Apple Silicon",
            "engine": self.engine,
            "backend": f"backend {dict(BACKEND_CHOICES).get(self.backend, '')}",
            "quant": self.quant,
            "family": f"family {self.family}",
            "params": dict(PARAM_CHOICES).get(self.params, ""),
            "harness": f"{_HARNESS_CHIP.get(harness_kind(self.harness), 'harness')} {self.harness}",
            "method": f"measured by {methods.method_label(self.method)}",
            "imported": "imported runs hidden",
            "profile": f"profile {self.profile}",
            "comparable": "including non-comparable",
            "location": dict(LOCATION_CHOICES).get(self.location, ""),
            "verified": "verified only",
            "days": {str(k): v for k, v in DAYS_CHOICES}.get(self.days, ""),
            "bv": f"benchmark {self.bv}",
        }
        return [(name, label) for name, label in labels.items() if getattr(self, name)]

    # --- query strings --------------------------------------------------------------------

    def to_query(self, **changes: Any) -> QueryDict:  # fields of any type, for replace()
        """The canonical query string: defaults are left out, so equal views share one URL."""
        state = replace(self, **changes) if changes else self
        query = QueryDict(mutable=True)
        for field in fields(state):
            value = getattr(state, field.name)
            if field.metadata.get("query") is False:
                continue
            if value == field.default or value in ("", False, None):
                continue
            query[field.name] = "1" if value is True else str(value)
        return query

    def without(self, name: str) -> QueryDict:
        return self.to_query(**{name: _default(name), "page": 1})

    def with_hardware(self, hw: str) -> BoardFilters:
        """The same view on another hardware choice (one class slug, or "all")."""
        cleared = {name: _default(name) for name in CLASS_NARROWING}
        return replace(self, hw=hw, page=1, **cleared)

    # --- querysets ------------------------------------------------------------------------

    def stack_q(self, prefix: str = "stack__") -> Q:
        """Conditions on the stack itself (engine, quantization, model family and size)."""
        q = Q()
        for name, column in (
            ("engine", "engine"),
            ("quant", "quantization"),
            ("family", "model_family"),
            ("params", "param_bucket"),
            ("harness", "harness"),
        ):
            value = getattr(self, name)
            if value:
                q &= Q(**{prefix + column: value})
        if self.backend:
            q &= Q(**{prefix + "launch_settings__backend": self.backend})
        if self.method or self.ranked_method:
            q &= Q(**{prefix + "method": self.method or self.ranked_method})
        if self.imported == "hide":
            q &= ~Q(**{prefix + "method__in": methods.IMPORTED_METHODS})
        return q

    def apply_to_runs(self, runs: RunQuerySet, *, now: datetime | None = None) -> RunQuerySet:
        """Run-level filters other than hardware and free text (queries.py resolves those)."""
        if self.profile:
            runs = runs.filter(profile=self.profile)
        if self.location:
            runs = runs.filter(scoring_mode=self.location)
        if self.verified:
            runs = runs.filter(is_verified=True)
        if self.days:
            since = (now or timezone.now()) - timedelta(days=int(self.days))
            runs = runs.filter(started_at__gte=since)
        return runs

    @property
    def restricts_runs(self) -> bool:
        """Whether any filter about where or how runs were measured is set."""
        return bool(self.run_filter_query())

    def run_filter_query(self) -> QueryDict:
        """The part of the state that says where and how runs were measured (kept by compare)."""
        keep = {"hw", "vram", "fits", "hardware", "vendor", "gpu", "cpu", "apple", "profile"}
        keep |= {"method", "imported"}
        keep |= {"location", "verified", "days", "bv"}
        query = self.to_query()
        for key in list(query):
            if key not in keep:
                del query[key]
        return query


# Parameters that narrow the hardware classes when no single class is named.
CLASS_NARROWING = ("vram", "fits", "hardware", "vendor", "gpu", "cpu", "apple")


def _default(name: str) -> Any:  # the named field's type: str, int or bool
    return next(f.default for f in fields(BoardFilters) if f.name == name)
