"""The accelerator data file (runs/data/accelerators.json): load, validate and match names.

No Django here: the site's plausibility check, the benchmark and any tool share one reading of
the file. A moderator's additions live in the database (submissions.AcceleratorOverride) and are
passed in as extra entries, which win over the file's.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).resolve().parent / "data" / "accelerators.json"
KINDS = ("gpu", "apple", "cpu")
FIGURES = ("bandwidth_gbps", "memory_gb", "fp16_tflops", "int8_tops")
# Plausible ranges: a figure outside them is a typo (GB/s for TB/s, MB for GB).
LIMITS = {
    "bandwidth_gbps": (1.0, 50_000.0),
    "memory_gb": (0.5, 4096.0),
    "fp16_tflops": (0.01, 50_000.0),
    "int8_tops": (0.01, 100_000.0),
}
# A reported size within this fraction of an entry's memory picks that variant (nvidia-smi
# reports 79.6 GB for an 80 GB card).
MEMORY_TOLERANCE = 0.15
# A CPU's peak per core and clock cycle for the widest instruction set its generation has, as
# (FP16 FLOP, INT8 OP): two vector units issuing one fused multiply-add each per cycle (a
# multiply-add counts 2), AMX's tile unit 1,024 INT8 / 512 BF16 multiply-adds per cycle. Taken
# at the generous end (Zen 4 runs AVX-512 on 256-bit units; hybrid parts' E-cores are counted
# as P-cores), so a CPU's prefill ceiling is never low.
SIMD_OPS_PER_CYCLE = {
    "avx2": (32.0, 128.0),
    "avx_vnni": (32.0, 128.0),
    "avx512": (64.0, 256.0),
    "amx": (1024.0, 2048.0),
    "neon_dotprod": (64.0, 128.0),
}

_MARKS = re.compile(r"\((?:r|tm|c)\)|™|®", re.IGNORECASE)
_SIZE = re.compile(r"\b\d+(?:\.\d+)?\s*gb\b")
_NOISE_PHRASES = re.compile(
    r"\b(?:w/|with)\s+radeon.*$|\b\d+-cores?\b|\b\d+(?:st|nd|rd|th)\s+gen\b"
    r"|@\s*[\d.]+\s*ghz|\bhbm\d?e?\b|\bgddr\d?x?\b"
)
_NOISE_WORDS = frozenset(
    {"nvidia", "geforce", "amd", "ati", "radeon", "intel", "apple", "corporation", "graphics"}
    | {"gpu", "tesla", "processor", "cpu", "generation"}
)
_SPLIT = re.compile(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])")


def name_key(name: str) -> str:
    """A name reduced to the words that tell products apart: case, vendor and marketing words,
    memory sizes and punctuation dropped, letters split from digits ('RTX4090' = 'RTX 4090').
    Every remaining word counts, so 'RTX 4090 Laptop' never equals 'RTX 4090'."""
    text = _MARKS.sub(" ", (name or "").lower())
    text = _NOISE_PHRASES.sub(" ", _SIZE.sub(" ", text))
    text = re.sub(r"[^a-z0-9+]+", " ", text)
    text = _SPLIT.sub(" ", text)
    return " ".join(word for word in text.split() if word not in _NOISE_WORDS)


def memory_hint(name: str) -> float | None:
    """A memory size written in the name itself ('A100-SXM4-80GB')."""
    match = _SIZE.search((name or "").lower())
    return float(match.group(0).lower().removesuffix("gb").strip()) if match else None


@dataclass(frozen=True)
class Accelerator:
    name: str
    kind: str
    bandwidth_gbps: float
    source: str
    vendor: str = ""
    memory_gb: float | None = None
    fp16_tflops: float | None = None
    int8_tops: float | None = None
    aliases: tuple[str, ...] = ()
    family: str = ""
    # Where a figure's source differs from `source` (a derived compute peak, a family maximum).
    figure_sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    origin: str = "data file"
    # A CPU's cores, top clock and widest instruction set (SIMD_OPS_PER_CYCLE's keys).
    cores: int | None = None
    boost_ghz: float | None = None
    simd: str = ""

    @property
    def keys(self) -> set[str]:
        return {name_key(self.name), *(name_key(alias) for alias in self.aliases)}

    def source_of(self, figure: str) -> str:
        return self.figure_sources.get(figure, self.source)

    def peak_tops(self, *, integer_weights: bool) -> tuple[float, str] | None:
        """The compute peak a prefill can use: INT8 tensor ops count for integer-quantized
        weights (llama.cpp's quantized matrix products use them), FP16 otherwise."""
        options = [(self.fp16_tflops, "FP16 TFLOPS")]
        if integer_weights:
            options.append((self.int8_tops, "INT8 TOPS"))
        known = [(value, unit) for value, unit in options if value]
        return max(known) if known else None


class DataFileError(ValueError):
    """The data file breaks a rule; the message names the entry."""


def parse_entry(raw: dict[str, Any], *, origin: str = "data file") -> Accelerator:
    """One validated entry; raises DataFileError with the entry's name on any problem."""
    name = str(raw.get("name") or "").strip()
    where = f"accelerator {name or '(unnamed)'}"
    if not name_key(name):
        raise DataFileError(f"{where}: the name has no distinguishing words")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise DataFileError(f"{where}: kind must be one of {', '.join(KINDS)}")
    values = {figure: raw.get(figure) for figure in FIGURES}
    if raw.get("channels") is not None or raw.get("mts") is not None:
        channels, mts = raw.get("channels"), raw.get("mts")
        if not (isinstance(channels, int) and isinstance(mts, int)) or channels < 1 or mts < 100:
            raise DataFileError(f"{where}: channels and mts must both be positive integers")
        if values["bandwidth_gbps"] is not None:
            raise DataFileError(f"{where}: give channels and mts or bandwidth_gbps, not both")
        values["bandwidth_gbps"] = round(channels * mts * 8 / 1000, 1)
    for figure, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DataFileError(f"{where}: {figure} must be a number")
        low, high = LIMITS[figure]
        if not low <= value <= high:
            raise DataFileError(f"{where}: {figure} {value} is outside {low:g}–{high:g}")
    if values["bandwidth_gbps"] is None:
        raise DataFileError(f"{where}: a memory bandwidth is required")
    cores, boost, simd = _cpu_compute(raw, where)
    # (_cpu_compute gives all three or none: naming the numbers too tells mypy so.)
    no_compute_given = values["int8_tops"] is None and values["fp16_tflops"] is None
    if simd and cores is not None and boost is not None and no_compute_given:
        flops, ops = SIMD_OPS_PER_CYCLE[simd]
        values["fp16_tflops"] = round(cores * boost * flops / 1000, 3)
        values["int8_tops"] = round(cores * boost * ops / 1000, 3)
    source = str(raw.get("source") or "").strip()
    if not source:
        raise DataFileError(f"{where}: every figure needs a source")
    sources = {}
    if raw.get("compute_source"):
        sources["fp16_tflops"] = sources["int8_tops"] = str(raw["compute_source"])
    aliases = tuple(str(alias) for alias in raw.get("aliases") or ())
    return Accelerator(
        name=name,
        kind=kind,
        vendor=str(raw.get("vendor") or ""),
        bandwidth_gbps=float(values["bandwidth_gbps"]),
        memory_gb=_float(values["memory_gb"]),
        fp16_tflops=_float(values["fp16_tflops"]),
        int8_tops=_float(values["int8_tops"]),
        source=source,
        aliases=aliases,
        family=str(raw.get("family") or ""),
        figure_sources=sources,
        origin=origin,
        cores=cores,
        boost_ghz=boost,
        simd=simd,
    )


def _cpu_compute(raw: dict[str, Any], where: str) -> tuple[int | None, float | None, str]:
    """A CPU entry's (cores, boost GHz, instruction set): all three or none."""
    cores, boost, simd = raw.get("cores"), raw.get("boost_ghz"), raw.get("simd")
    if cores is None and boost is None and simd is None:
        return None, None, ""
    if not (isinstance(cores, int) and not isinstance(cores, bool) and 1 <= cores <= 1024):
        raise DataFileError(f"{where}: cores must be a whole number from 1 to 1024")
    if isinstance(boost, bool) or not isinstance(boost, int | float) or not 0.1 <= boost <= 10:
        raise DataFileError(f"{where}: boost_ghz must be a clock from 0.1 to 10 GHz")
    if simd not in SIMD_OPS_PER_CYCLE:
        raise DataFileError(f"{where}: simd must be one of {', '.join(SIMD_OPS_PER_CYCLE)}")
    return cores, float(boost), simd


def _float(value: float | int | None) -> float | None:
    return None if value is None else float(value)


class Catalog:
    """Entries by name key; `find` picks the one a stored hardware name means."""

    def __init__(self, entries: list[Accelerator]) -> None:
        self.entries = list(entries)
        self._by_key: dict[str, list[Accelerator]] = {}
        for entry in self.entries:
            for key in entry.keys:
                bucket = self._by_key.setdefault(key, [])
                if entry not in bucket:
                    bucket.append(entry)

    def with_entries(self, extra: list[Accelerator]) -> Catalog:
        """This catalog with `extra` in front: an extra entry hides the file's entries that
        share one of its names."""
        if not extra:
            return self
        hidden = set().union(*(entry.keys for entry in extra))
        kept = [entry for entry in self.entries if not entry.keys & hidden]
        return Catalog([*extra, *kept])

    def find(
        self, name: str, *, kinds: tuple[str, ...], memory_gb: float | None = None
    ) -> Accelerator | None:
        """The entry for a GPU or CPU name, or None. Among variants sharing the name, the one
        whose memory matches the reported size; failing that, the fastest (a ceiling may be
        high, never low)."""
        candidates = [e for e in self._by_key.get(name_key(name), []) if e.kind in kinds]
        if not candidates:
            return None
        memory = memory_gb or memory_hint(name)
        if memory:
            sized = [
                e
                for e in candidates
                if e.memory_gb and abs(e.memory_gb - memory) <= MEMORY_TOLERANCE * e.memory_gb
            ]
            candidates = sized or candidates
        return max(candidates, key=lambda e: (e.bandwidth_gbps, e.fp16_tflops or 0.0))

    def knows(self, name: str, *, kinds: tuple[str, ...]) -> bool:
        return self.find(name, kinds=kinds) is not None


def _family_entries(
    raw_families: list[dict[str, Any]], members: list[Accelerator]
) -> list[Accelerator]:
    """One entry per family, holding its fastest listed member's bandwidth."""
    families = []
    for raw in raw_families:
        name = raw["name"]
        listed = [m for m in members if m.family == name]
        if not listed:
            raise DataFileError(f"family {name}: no member lists it")
        fastest = max(listed, key=lambda m: m.bandwidth_gbps)
        families.append(
            Accelerator(
                name=name,
                kind=raw.get("kind", "cpu"),
                vendor=raw.get("vendor", ""),
                bandwidth_gbps=fastest.bandwidth_gbps,
                source=f"model not stated: the fastest {name} listed ({fastest.name}; "
                f"{fastest.source})",
                aliases=tuple(raw.get("aliases") or ()),
                family=name,
            )
        )
    return families


def load(path: Path = DATA_FILE) -> Catalog:
    """The data file as a Catalog; DataFileError on any entry that breaks a rule."""
    document = json.loads(path.read_text(encoding="utf-8"))
    entries = [parse_entry(raw) for raw in document["accelerators"]]
    seen: dict[tuple[str, float | None], str] = {}
    for entry in entries:
        slot = (name_key(entry.name), entry.memory_gb)
        if slot in seen:
            raise DataFileError(f"accelerator {entry.name}: the same product as {seen[slot]}")
        seen[slot] = entry.name
    return Catalog(entries + _family_entries(document.get("families", []), entries))


@functools.cache
def catalog() -> Catalog:
    """The data file, read once per process."""
    return load()
