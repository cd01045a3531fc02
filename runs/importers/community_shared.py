"""What the three community importers share: provenance, the mapping report, merging repeats,
names (hardware, model, engine) and keeping private text out of what is stored.

Django-free, like every importer (parser processes load it).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from runs import accelerators, normalize
from runs.importers.records import HardwareRecord, JsonObject, RunRecord
from worker.rules.redact import REDACTED, redact_command, redact_text

LLMFIT_REPOSITORY = "AlexsJones/llmfit"
LLMFIT_COMMIT = "3f44fd30a43d"
CLUB_REPOSITORY = "5p00kyy/club-5060ti"
CLUB_COMMIT = "90ce13438a32"
MIT = "MIT"
# The leaderboard llmfit copied states no licence for its data (the README's caveat).
LOCALMAXXING_LICENCE = "no licence stated; facts attributed to LocalMaxxing via llmfit"

HARDWARE_NOT_MAPPED = "hardware not mapped"
MODEL_NOT_MAPPED = "model name not mapped"

T = TypeVar("T")


@dataclass
class SourceReport:
    """What one source's rows became: every distinct row is a record, a repeat merged into
    one, unmapped (hardware or model name), or without any speed figure."""

    source: str
    files: int = 0
    rows: int = 0  # as listed in the files
    listed_twice: int = 0  # the same row (same id) listed again, in another preset
    records: int = 0
    duplicates_merged: int = 0  # rows repeating another row's measurement under their own id
    unmapped: list[dict[str, str]] = field(default_factory=list)
    no_figure: list[dict[str, str]] = field(default_factory=list)

    @property
    def distinct_rows(self) -> int:
        return self.rows - self.listed_twice

    def leave_out(self, row_id: str, reason: str, *, figure: bool = False) -> None:
        (self.no_figure if figure else self.unmapped).append({"row_id": row_id, "reason": reason})

    def add(self, other: SourceReport) -> None:
        self.files += other.files
        self.rows += other.rows
        self.listed_twice += other.listed_twice
        self.records += other.records
        self.duplicates_merged += other.duplicates_merged
        self.unmapped += other.unmapped
        self.no_figure += other.no_figure

    def as_dict(self) -> JsonObject:
        distinct = self.distinct_rows
        return {
            "files": self.files,
            "rows": self.rows,
            "listed_twice": self.listed_twice,
            "distinct_rows": distinct,
            "records": self.records,
            "duplicates_merged": self.duplicates_merged,
            "unmapped": len(self.unmapped),
            "unmapped_pct": round(100 * len(self.unmapped) / distinct, 2) if distinct else 0.0,
            "unmapped_rows": list(self.unmapped),
            "no_figure": len(self.no_figure),
            "no_figure_rows": list(self.no_figure),
        }


@dataclass
class Parsed:
    records: list[RunRecord]
    report: SourceReport


def provenance(
    *,
    source: str,
    repository: str,
    commit: str,
    path: str,
    row_ids: list[str],
    licence: str = MIT,
    **extra: Any,
) -> JsonObject:
    """Where a record came from; `row_ids` are every source row it stands for (the first is
    the one whose figures and time it carries)."""
    found: JsonObject = {
        "source": source,
        "repository": repository,
        "commit": commit,
        "path": path,
        "row_id": row_ids[0],
        "licence": licence,
        "repeats": len(row_ids),
    }
    if len(row_ids) > 1:
        found["row_ids"] = list(row_ids)
    return found | {k: v for k, v in extra.items() if v is not None}


def speed_record(
    *,
    method: str,
    row_id: str,
    started_at: datetime,
    model_id: str,
    provenance: JsonObject,
    raw: JsonObject,
    **fields: Any,
) -> RunRecord:
    """A community row as a speed-only run: attributed to its source, never to a person."""
    record = RunRecord(
        source_format=method,
        started_at=started_at,
        model_id=model_id,
        score_scale="speed",
        client_run_id=f"{method}:{row_id}",
        benchmark_id=method,
        method=method,
        provenance=provenance,
        hardware_source="file",
        submitter_name="",
        outcome="complete",
        raw_payload=raw,
        **fields,
    )
    record.launch_settings = normalize.normalise_launch_settings(record.launch_settings)
    return record


def merge_repeats(
    rows: Iterable[T], *, key: Callable[[T], str], order: Callable[[T], Any]
) -> list[list[T]]:
    """Rows grouped by what they measured, each group earliest first (`order`), groups in
    the order their first row came."""
    groups: dict[str, list[T]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return [sorted(group, key=order) for group in groups.values()]


# --- privacy -----------------------------------------------------------------------------

# Programs that only wrap the one that measured ("taskset -c 0-7 llama-bench ...").
_WRAPPERS = frozenset({"taskset", "numactl", "nice", "nohup", "sudo", "env", "time", "exec"})
_WRAPPER_ARG = re.compile(r"^(?:-\S*|[\d,.-]+)$")
# Options whose value locates a machine, names a person or holds free text: left out whole.
_PRIVATE_OPTIONS = frozenset(
    {
        "--host", "--hostname", "--port", "--url", "--base-url", "--api-base", "--endpoint",
        "--api-key", "--hf-token", "--token", "--user", "--username", "--password",
        "--alias", "-a", "--served-model-name", "--log-file", "--slot-save-path",
        "--ssl-key-file", "--ssl-cert-file", "--download-dir", "--prompt", "--prompt-file",
        "-f", "--file", "-sys", "--system-prompt", "--system-prompt-file",
        "--chat-template-file",
    }
)  # fmt: skip
# "-p" is a prompt's size to llama-bench ("-p 512,2048") and a prompt's text to llama-cli.
_PROMPT_SIZES = re.compile(r"^\d+(?:,\d+)*$")
_SHELL_SUBSTITUTION = re.compile(r"\$\(|`")
_PATH_LIKE = re.compile(r"^(?:[~.]{0,2}/|[A-Za-z]:[\\/]|\\\\)|[\\]|/.*/")
_HF_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
# An address, a user@host, or a published port ("-p 8000:8000").
_LOCATING = re.compile(
    r"://|\blocalhost\b|(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.])|@|^\d{2,5}:\d{2,5}$",
    re.IGNORECASE,
)


@dataclass
class Command:
    """A launch command kept to its program and flags, with what the flags say."""

    text: str = ""
    tool: str = ""
    options: dict[str, str] = field(default_factory=dict)

    def value(self, *names: str) -> str:
        for name in names:
            if name in self.options:
                return self.options[name]
        return ""


def scrub_command(snippet: str) -> Command:
    """`snippet` kept to the program's name and its flags: comments, wrappers, environment
    assignments, addresses, ports, aliases, prompts and shell substitutions are dropped, and a
    path is cut to its file name (a model file's name is public, the folders above it are
    not). The result passes redact_command as well, as every stored command does."""
    tokens = _tokens(snippet)
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", tokens[0]):
        tokens.pop(0)  # CUDA_VISIBLE_DEVICES=0 llama-server ...
    while tokens and _basename(tokens[0]) in _WRAPPERS:
        tokens.pop(0)
        while tokens and _WRAPPER_ARG.match(tokens[0]):
            tokens.pop(0)
    kept: list[str] = []
    command = Command()
    if tokens and not tokens[0].startswith("-"):
        command.tool = _basename(tokens.pop(0))
        kept.append(command.tool)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        flag, _, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        values = [inline] if inline else []
        while not inline and index < len(tokens) and not _is_flag(tokens[index]):
            values.append(tokens[index])
            index += 1
        if not token.startswith("-"):
            kept += [_public_value(t) for t in [token, *values] if _public_value(t)]
            continue
        cleaned = [_public_value(v) for v in values]
        prompt_text = flag == "-p" and not all(_PROMPT_SIZES.match(v) for v in cleaned)
        if flag.lower() in _PRIVATE_OPTIONS or prompt_text or any(not v for v in cleaned):
            continue  # a value that cannot be shown takes its flag with it
        command.options[flag] = " ".join(cleaned)
        kept += [f"{flag}={cleaned[0]}" if inline else flag, *([] if inline else cleaned)]
    command.text = redact_command(" ".join(kept))
    return command


def _tokens(snippet: str) -> list[str]:
    text = (snippet or "").strip()
    # A comment ends the command ("# Remote endpoint: http://10.0.0.5:8000 ...").
    text = re.split(r"(?:^|\s)#", text, maxsplit=1)[0].replace("\\\n", " ")
    try:
        tokens = shlex.split(text)
    except ValueError:  # truncated snippets leave quotes open
        tokens = text.split()
    return [t.strip() for t in tokens if t.strip()]


def _is_flag(token: str) -> bool:
    return token.startswith("-") and not _NUMBER.match(token)


def _basename(token: str) -> str:
    return re.split(r"[\\/]", token.rstrip("/\\"))[-1]


def _public_value(value: str) -> str:
    """A flag's value as it may be shown: "" when it cannot be (an address, a substitution)."""
    if _SHELL_SUBSTITUTION.search(value) or _LOCATING.search(value):
        return ""
    if value.startswith("~") or (_PATH_LIKE.search(value) and not _HF_ID.match(value)):
        return _basename(value)
    return value


_PATH_IN_TEXT = re.compile(r"(?:~|\.{1,2})?(?:/[\w.@+-]+){2,}/?|[A-Za-z]:\\[^\s,;)]+")


def scrub_text(text: str) -> str:
    """Free text (a note) with addresses, secrets, home folders and every multi-part path
    replaced: what a raw payload may keep."""
    return _PATH_IN_TEXT.sub(REDACTED, redact_text(text or ""))


def scrub_tree(value: Any) -> Any:
    """scrub_text on every string in a JSON value."""
    if isinstance(value, dict):
        return {k: scrub_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_tree(v) for v in value]
    return scrub_text(value) if isinstance(value, str) else value


# --- names -------------------------------------------------------------------------------

_BRANDS = {"nvidia": "NVIDIA", "amd": "AMD Radeon"}
_NO_NAME = frozenset({"", "n/a", "na", "none", "null", "unknown", "-", "?"})
# "(CachyOS)" after a CPU names the OS, not the CPU; (R) and (TM) stay for normalize.
_ASIDE = re.compile(r"\((?!r\)|tm\)|c\))[^)]*\)", re.IGNORECASE)
_INTEGRATED = re.compile(r"\(integrated\)|\bintegrated\b", re.IGNORECASE)
_BRACKETED = re.compile(r"\[([^\]]+)\]")
_RADEON_IN_CPU = re.compile(r"\bradeon\s+(\d{3,4}[a-z]?)\b", re.IGNORECASE)


def known(text: str | None) -> str:
    """A name, or "" for the placeholders sources write for none."""
    value = (text or "").strip()
    return "" if value.lower() in _NO_NAME else value


def cpu_name(text: str | None) -> str:
    return re.sub(r"\s+", " ", _ASIDE.sub(" ", known(text))).strip()


def gpu_name(text: str | None, *, cpu: str = "") -> str:
    """A GPU's name as the site normalises it: an integrated GPU by its marketing name
    ("Intel Alder Lake-P GT2 [Iris Xe Graphics] (integrated)" is "Intel Iris Xe Graphics
    (Alder Lake-P)"), one of alternatives by the CPU that names it ("Radeon 840M / 860M" on a
    "Ryzen AI 7 350 w/ Radeon 860M" is its 860M), and a name that does not say its vendor
    ("T4") with the vendor accelerators.json gives it."""
    name = known(text)
    if not name:
        return ""
    name = re.sub(r"\s+", " ", _INTEGRATED.sub(" ", name)).strip()
    # nvidia-smi's "Tesla T4" is the "T4" other sources (and accelerators.json) name.
    name = re.sub(r"^(?:nvidia\s+)?tesla\s+(?=\S)", "", name, flags=re.IGNORECASE)
    name = re.sub(r"\bSUPER\b", "Super", name)  # "RTX 2070 SUPER" is the "RTX 2070 Super"
    bracket = _BRACKETED.search(name)
    if bracket:
        platform = name[: bracket.start()].strip()
        platform = re.sub(r"^(?:intel|amd|nvidia)\s+|\s+gt\d\b", "", platform, flags=re.I)
        vendor = name.split()[0]
        name = f"{vendor} {bracket.group(1).strip()}" + (f" ({platform})" if platform else "")
    if "/" in name:
        named = _RADEON_IN_CPU.search(cpu or "")
        if named and named.group(1).lower() in name.lower():
            name = f"AMD Radeon {named.group(1).upper()}"
    if not normalize.gpu_vendor(name):
        entry = accelerators.catalog().find(name, kinds=("gpu",))
        if entry is not None and entry.vendor in _BRANDS:
            name = f"{_BRANDS[entry.vendor]} {name}"
    return name


def cpu_names_gpu(cpu: str, gpu: str) -> bool:
    """Whether the CPU's name names this GPU ("Ryzen AI 7 350 w/ Radeon 860M"): the GPU is
    the one built into the CPU, with the system's memory."""
    named = _RADEON_IN_CPU.search(cpu or "")
    return bool(named and re.search(rf"\b{named.group(1)}\b", gpu or "", re.IGNORECASE))


def os_family(text: str | None) -> str:
    """linux, macos, windows or android, from whatever a source wrote ("Ubuntu 24.04.4 LTS",
    "Windows Server 2025 (WSL2)", "macOS 26.4 build 25E246"); "" when it does not say."""
    value = known(text).lower()
    if not value:
        return ""
    if "wsl" in value:
        return "linux"  # the measurement ran in Linux under Windows
    if value.startswith(("mac", "darwin", "osx")):
        return "macos"
    if value.startswith("win") or "windows" in value:
        return "windows"
    if "android" in value:
        return "android"
    linux = (
        "linux", "ubuntu", "debian", "fedora", "arch", "cachy", "mint", "pop", "nixos", "centos",
        "rhel", "rocky", "alma", "opensuse", "suse", "unraid", "proxmox", "manjaro", "endeavour",
    )  # fmt: skip
    return "linux" if any(word in value for word in linux) else ""


def apple_chip(name: str) -> str:
    """ "Apple M4 Max" from "M4 Max", "Apple M4 Max 16-core CPU / 40-core GPU" or "m4 max"."""
    match = re.search(r"\bM(\d)\s*(pro|max|ultra)?\b", name or "", re.IGNORECASE)
    if not match:
        return ""
    tier = f" {match.group(2).capitalize()}" if match.group(2) else ""
    return f"Apple M{match.group(1)}{tier}"


def apple_hardware(chip: str, memory_gb: float | None, *, os_name: str = "macos") -> HardwareRecord:
    """A unified-memory Apple machine: the chip is its GPU and CPU, and carries its memory."""
    return HardwareRecord(
        cpu=chip, gpu=chip, gpu_count=1, vram_gb=memory_gb, ram_gb=memory_gb, os_name=os_name
    )


def hardware_problem(hardware: HardwareRecord | None) -> str:
    """Why a machine cannot be put in a hardware class ("" when it can)."""
    if hardware is None:
        return f"{HARDWARE_NOT_MAPPED}: none given"
    identity = normalize.hardware_identity(
        cpu=hardware.cpu,
        gpu=hardware.gpu,
        gpu_count=hardware.gpu_count,
        vram_gb=hardware.vram_gb,
        ram_gb=hardware.ram_gb,
        os_name=hardware.os_name,
    )
    if not identity["gpu_model"] and not identity["cpu_model"]:
        return f"{HARDWARE_NOT_MAPPED}: neither a GPU nor a CPU is named"
    if identity["gpu_vendor"] == "apple" and not re.search(r"\bM\d", identity["gpu_model"]):
        return f"{HARDWARE_NOT_MAPPED}: Apple chip not named ({identity['gpu_model']!r})"
    return ""


_ENGINES = {
    "llama.cpp": "llama.cpp",
    "llamacpp": "llama.cpp",
    "llama_cpp": "llama.cpp",
    "llama-server": "llama.cpp",
    "ik_llama.cpp": "ik_llama.cpp",
    "vllm": "vllm",
    "sglang": "sglang",
    "ollama": "ollama",
    "mlx": "mlx",
    "mlx-lm": "mlx",
    "lmstudio": "lm-studio",
    "lm studio": "lm-studio",
    "lm-studio": "lm-studio",
    "hipfire": "hipfire",
}


def engine_name(text: str | None) -> str:
    """The engine as runs.normalize names engines: lower-case, llama.cpp's forks' builds
    ("llama.cpp MTP") as llama.cpp."""
    value = known(text).lower()
    if value in _ENGINES:
        return _ENGINES[value]
    first = value.split(" ")[0] if value else ""
    return _ENGINES.get(first) or normalize.engine_from_provider(value)


_KV_ALIASES = {"fp16": "f16", "float16": "f16", "half": "f16"}


def kv_cache(key: str | None, value: str | None = None) -> str:
    """One KV-cache type, or "k/v" when the two differ; "" when not known."""
    k = _KV_ALIASES.get(known(key).lower(), known(key).lower())
    v = _KV_ALIASES.get(known(value).lower(), known(value).lower()) if value is not None else k
    return k if k == v or not v else f"{k}/{v}" if k else v


_MLX_BITS = re.compile(r"[-_](\d)bit$", re.IGNORECASE)
# Microscaling formats runs.normalize's quantization pattern does not know ("gpt-oss-20b-MXFP4",
# "laguna-xs-2.1:nvfp4").
_FP_QUANT = re.compile(r"(?:^|[-_.:/ ])((?:mlx-)?(?:mx|nv)fp\d)(?=$|[-_.: ])", re.IGNORECASE)


def model_id_and_quant(raw: str, *, quantization: str = "", engine: str = "") -> tuple[str, str]:
    """The model id as stored (a file path cut to its file name, Ollama's hf.co/ prefix and
    :latest dropped) and its quantization: the source's, else read from the name."""
    text = known(raw)
    if text.startswith(("/", "~", "./", "../")) or re.match(r"^[A-Za-z]:\\", text):
        text = _basename(text)
    text = re.sub(r"^hf\.co/", "", text, flags=re.IGNORECASE)
    model_id = normalize.normalise_model_id(text)
    quant = (
        normalize.normalise_quant(known(quantization))
        or normalize.parse_model(model_id)["quantization"]
    )
    if not quant and (scaled := _FP_QUANT.search(model_id)):
        quant = normalize.normalise_quant(scaled.group(1))
    if not quant and engine == "mlx" and (bits := _MLX_BITS.search(model_id)):
        quant = f"mlx-{bits.group(1)}bit"
    return model_id, quant[:40]


def number(value: Any) -> float | None:
    """A figure, or None for a missing, zero, negative or non-numeric one ("n/a")."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float) or value != value or value <= 0:
        return None
    return float(value)
