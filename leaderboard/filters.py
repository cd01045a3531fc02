"""The leaderboard's query-string state: parsed, validated, and written back as a canonical URL."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import timedelta

from django.db.models import Q
from django.http import QueryDict
from django.utils import timezone

from runs import normalize
from runs.models import RunQuerySet, ScoreScale

SCALES = {
    ScoreScale.V3: "Ranked v3",
    ScoreScale.V2: "Legacy v2",
    ScoreScale.SPEED_ONLY: "Speed only",
}
MODES = {"best": "Best run", "median": "Median run"}
VRAM_CHOICES = [(label, f"≤ {label} GB") for _, label in normalize.VRAM_BUCKETS[:1]] + [
    (label, f"{label} GB") for _, label in normalize.VRAM_BUCKETS[1:]
]
VRAM_CHOICES.append((normalize.VRAM_BUCKET_TOP, f"{normalize.VRAM_BUCKET_TOP} GB"))
RAM_CHOICES = [(label, f"≤ {label} GB") for _, label in normalize.RAM_BUCKETS]
RAM_CHOICES.append((normalize.RAM_BUCKET_TOP, f"{normalize.RAM_BUCKET_TOP} GB"))
PARAM_CHOICES = [(label, label.replace("<=", "≤ ")) for _, label in normalize.PARAM_BUCKETS]
PARAM_CHOICES.append((normalize.PARAM_BUCKET_TOP, normalize.PARAM_BUCKET_TOP))
VENDOR_CHOICES = [("nvidia", "NVIDIA"), ("amd", "AMD"), ("apple", "Apple"), ("intel", "Intel")]
PROFILE_CHOICES = [("smoke", "smoke"), ("core", "core"), ("full", "full"), ("custom", "custom")]
LOCATION_CHOICES = [("local", "Local only"), ("remote", "Remote only")]
DAYS_CHOICES = [(7, "Last 7 days"), (30, "Last 30 days"), (90, "Last 90 days"), (365, "Last year")]

# key -> (ORM path on Run, label, higher is better). Text columns sort ascending first.
SORTS = {
    "overall": ("overall_score", "Overall", True),
    "quality": ("quality_score", "Quality", True),
    "speed": ("speed_score", "Speed", True),
    "reliability": ("reliability_score", "Reliability", True),
    "value": ("value_score", "Value", True),
    "decode": ("decode_tps_median", "Decode tok/s", True),
    "spread": ("decode_tps_stdev", "Decode spread", False),
    "prefill": ("prefill_tps_median", "Prefill tok/s", True),
    "ttft": ("ttft_ms_median", "TTFT ms", False),
    "runs": ("stack_runs", "Runs", True),
    "submitters": ("stack__submitter_count", "Submitters", True),
    "model": ("stack__model_id", "Model", False),
    "quant": ("stack__quantization", "Quant", False),
    "engine": ("stack__engine", "Engine", False),
    "hardware": ("hardware__gpu_model", "Hardware", False),
    "date": ("started_at", "Date", True),
}
MAX_TEXT = 100
PAGE_SIZE = 50


def _choice(value: str, allowed) -> str:
    return value if value in {str(key) for key, _ in allowed} else ""


@dataclass(frozen=True)
class BoardFilters:
    """Everything that selects and orders leaderboard rows; the query string is the state."""

    scale: str = ScoreScale.V3
    mode: str = "best"
    q: str = ""
    hardware: int = 0
    vendor: str = ""
    gpu: str = ""
    vram: str = ""
    ram: str = ""
    cpu: bool = False
    apple: bool = False
    engine: str = ""
    quant: str = ""
    family: str = ""
    params: str = ""
    harness: str = ""
    profile: str = ""
    comparable: str = ""  # "" = comparable runs only; "all" includes the rest
    location: str = ""
    verified: bool = False
    days: str = ""
    sort: str = ""
    dir: str = ""
    page: int = 1

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
        return cls(
            scale=scale if scale in SCALES else ScoreScale.V3,
            mode=text("mode") if text("mode") in MODES else "best",
            q=text("q"),
            hardware=int(hardware) if hardware.isdigit() and len(hardware) < 12 else 0,
            vendor=_choice(text("vendor"), VENDOR_CHOICES),
            gpu=text("gpu"),
            vram=_choice(text("vram"), VRAM_CHOICES),
            ram=_choice(text("ram"), RAM_CHOICES),
            cpu=flag("cpu"),
            apple=flag("apple"),
            engine=text("engine"),
            quant=text("quant"),
            family=text("family"),
            params=_choice(text("params"), PARAM_CHOICES),
            harness=text("harness"),
            profile=_choice(text("profile"), PROFILE_CHOICES),
            comparable="all" if text("comparable") == "all" else "",
            location=_choice(text("location"), LOCATION_CHOICES),
            verified=flag("verified"),
            days=_choice(text("days"), DAYS_CHOICES),
            sort=sort if sort in SORTS else "",
            dir=text("dir") if text("dir") in ("asc", "desc") else "",
            page=page,
        )

    # --- what the view needs to know -------------------------------------------------------

    @property
    def default_sort(self) -> str:
        return "decode" if self.scale == ScoreScale.SPEED_ONLY else "overall"

    @property
    def sort_key(self) -> str:
        return self.sort or self.default_sort

    @property
    def descending(self) -> bool:
        if self.dir:
            return self.dir == "desc"
        return SORTS[self.sort_key][2]

    @property
    def comparable_only(self) -> bool:
        # Only v3 has a comparability rule; legacy and speed-only rows never claim it.
        return self.scale == ScoreScale.V3 and self.comparable != "all"

    @property
    def run_level(self) -> bool:
        """Filters that pick among a stack's runs, so the denormalised best run cannot answer."""
        return bool(
            self.q
            or self.hardware
            or self.vendor
            or self.gpu
            or self.vram
            or self.ram
            or self.cpu
            or self.apple
            or self.profile
            or self.location
            or self.verified
            or self.days
            or self.mode != "best"
            or self.scale != ScoreScale.V3
            or not self.comparable_only
        )

    def active(self) -> list[tuple[str, str]]:
        """(parameter, human label) for every filter that narrows the view, for the chips."""
        labels = {
            "q": f"“{self.q}”",
            "hardware": "one machine class",
            "vendor": dict(VENDOR_CHOICES).get(self.vendor, ""),
            "gpu": self.gpu,
            "vram": f"VRAM {dict(VRAM_CHOICES).get(self.vram, '')}",
            "ram": f"RAM {dict(RAM_CHOICES).get(self.ram, '')}",
            "cpu": "CPU only",
            "apple": "Apple Silicon",
            "engine": self.engine,
            "quant": self.quant,
            "family": f"family {self.family}",
            "params": dict(PARAM_CHOICES).get(self.params, ""),
            "harness": f"harness {self.harness}",
            "profile": f"profile {self.profile}",
            "comparable": "including non-comparable",
            "location": dict(LOCATION_CHOICES).get(self.location, ""),
            "verified": "verified only",
            "days": {str(k): v for k, v in DAYS_CHOICES}.get(self.days, ""),
        }
        return [(name, label) for name, label in labels.items() if getattr(self, name)]

    # --- query strings --------------------------------------------------------------------

    def to_query(self, **changes) -> QueryDict:
        """The canonical query string: defaults are left out, so equal views share one URL."""
        state = replace(self, **changes) if changes else self
        query = QueryDict(mutable=True)
        for field in fields(state):
            value = getattr(state, field.name)
            if value == field.default or value in ("", False, None):
                continue
            query[field.name] = "1" if value is True else str(value)
        return query

    def without(self, name: str) -> QueryDict:
        field = next(f for f in fields(self) if f.name == name)
        return self.to_query(**{name: field.default, "page": 1})

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
        return q

    def apply_to_runs(self, runs: RunQuerySet, *, now=None) -> RunQuerySet:
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
        keep = {"hardware", "vendor", "gpu", "vram", "ram", "cpu", "apple", "profile"}
        keep |= {"location", "verified", "days"}
        query = self.to_query()
        for key in list(query):
            if key not in keep:
                del query[key]
        return query
