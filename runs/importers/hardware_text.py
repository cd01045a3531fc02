"""A machine named in words ("RTX 4090 24 GB", "2× RTX 3090", "Apple M4 Max 128 GB",
"CPU only: AMD Ryzen 9 7950X 64 GB"): what `--hardware` says for a file that names none."""

from __future__ import annotations

import re

from runs import normalize
from runs.importers.records import FormatError, HardwareRecord

_COUNT = re.compile(r"^\s*(\d{1,2})\s*[x×]\s*", re.IGNORECASE)
_MEMORY = re.compile(r"\s*[·,]?\s*(\d+(?:\.\d+)?)\s*GB\s*$", re.IGNORECASE)
_CPU_ONLY = re.compile(r"^\s*cpu(?:[ -]only)?\s*[:·-]?\s*", re.IGNORECASE)
MAX_TEXT = 200


def parse_hardware_text(text: str) -> HardwareRecord:
    """The machine the words name; FormatError when they name none."""
    words = (text or "").strip()
    if not words or len(words) > MAX_TEXT:
        raise FormatError("hardware", f"name a machine in at most {MAX_TEXT} characters")
    cpu_only = bool(_CPU_ONLY.match(words))
    if cpu_only:
        words = _CPU_ONLY.sub("", words, count=1)
    count_match = _COUNT.match(words)
    count = int(count_match.group(1)) if count_match else 1
    words = _COUNT.sub("", words, count=1)
    memory_match = _MEMORY.search(words)
    memory = float(memory_match.group(1)) if memory_match else None
    chip = _MEMORY.sub("", words).strip()
    if not chip or count < 1:
        raise FormatError("hardware", f"names no GPU, Apple chip or CPU: {text[:60]!r}")
    vendor = normalize.gpu_vendor(chip)
    if cpu_only or not vendor or normalize.looks_like_cpu(chip):
        return HardwareRecord(cpu=chip, gpu="", gpu_count=0, ram_gb=memory)
    if vendor == "apple":
        return HardwareRecord(cpu=chip, gpu=chip, gpu_count=1, ram_gb=memory, vram_gb=memory)
    return HardwareRecord(gpu=chip, gpu_count=count, vram_gb=memory * count if memory else None)
