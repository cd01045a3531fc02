"""How the server was launched: its process when it runs here, its command line and settings.

The stack is named by what changes results (docs/upload-schema.md, bundle 1.1): the weights'
digest, context, KV-cache type, draft model and the launch settings. They come from the user
(``--launch-command``, ``--model-file``), from the server's answers, and, when the server
listens on this machine, from its own process (command line, and Ollama's environment).
The command kept in the bundle is redacted (worker.rules.redact); directories never are kept.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from ..rules.contract import Launch, Weights
from ..rules.redact import redact_command
from .weights import gguf_identity, ollama_identity

# llama-server options that change what a run measures, by canonical name. Port, host, API keys,
# logging and the like change nothing and are left out, so they never split a stack.
_VALUE_FLAGS = {
    "n_gpu_layers": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "batch_size": ("-b", "--batch-size"),
    "ubatch_size": ("-ub", "--ubatch-size"),
    "threads": ("-t", "--threads"),
    "threads_batch": ("-tb", "--threads-batch"),
    "parallel": ("-np", "--parallel"),
    "split_mode": ("-sm", "--split-mode"),
    "tensor_split": ("-ts", "--tensor-split"),
    "main_gpu": ("-mg", "--main-gpu"),
    "device": ("-dev", "--device"),
    "override_tensor": ("-ot", "--override-tensor"),
    "n_cpu_moe": ("-ncmoe", "--n-cpu-moe"),
    "rope_scaling": ("--rope-scaling",),
    "rope_scale": ("--rope-scale",),
    "rope_freq_base": ("--rope-freq-base",),
    "rope_freq_scale": ("--rope-freq-scale",),
    "yarn_orig_ctx": ("--yarn-orig-ctx",),
    "draft_max": ("--draft-max", "--draft", "--draft-n"),
    "draft_min": ("--draft-min", "--draft-n-min"),
    "draft_p_min": ("--draft-p-min",),
    "n_gpu_layers_draft": ("-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"),
    "cache_type_k_draft": ("-ctkd", "--cache-type-k-draft"),
    "cache_type_v_draft": ("-ctvd", "--cache-type-v-draft"),
    "reasoning_format": ("--reasoning-format",),
    "reasoning_budget": ("--reasoning-budget",),
    "chat_template": ("--chat-template",),
    "chat_template_file": ("--chat-template-file",),
    "override_kv": ("--override-kv",),
}
_BOOL_FLAGS = {
    "cpu_moe": ("-cmoe", "--cpu-moe"),
    "no_kv_offload": ("-nkvo", "--no-kv-offload"),
    "swa_full": ("--swa-full",),
    "jinja": ("--jinja",),
    "kv_unified": ("-kvu", "--kv-unified"),
    "no_op_offload": ("--no-op-offload",),
    # Weight repacking changes the CPU kernels a matrix product runs, so it changes speed.
    "no_repack": ("-nr", "--no-repack"),
}
# Their negations, where llama-server's default depends on other settings (a unified KV buffer
# is the default when the slot count is automatic, and splits concurrency figures otherwise).
_NEGATED_FLAGS = {"kv_unified": ("-no-kvu", "--no-kv-unified")}
_FLASH = ("-fa", "--flash-attn")
_CTX = ("-c", "--ctx-size")
_CTK, _CTV = ("-ctk", "--cache-type-k"), ("-ctv", "--cache-type-v")
_DRAFT = ("-md", "--model-draft")
_MODEL = ("-m", "--model")
_FLASH_VALUES = {"on", "off", "auto", "1", "0", "true", "false"}
_BY_FLAG = {flag: name for name, flags in _VALUE_FLAGS.items() for flag in flags}
_BOOL_BY_FLAG = {flag: name for name, flags in _BOOL_FLAGS.items() for flag in flags}
_NEGATED_BY_FLAG = {flag: name for name, flags in _NEGATED_FLAGS.items() for flag in flags}
# Ollama reads these from its environment; a server process we may read tells us them.
_OLLAMA_ENV = {
    "OLLAMA_KV_CACHE_TYPE": "kv_cache_type",
    "OLLAMA_FLASH_ATTENTION": "flash_attn",
    "OLLAMA_NUM_PARALLEL": "parallel",
    "OLLAMA_CONTEXT_LENGTH": "context_length",
}
_FILE_VALUED = {"chat_template_file", "override_tensor"}


@dataclass
class ServerProcess:
    """The process listening on the endpoint's port, as far as this user may see it."""

    pid: int
    name: str
    cmdline: list[str] = field(default_factory=list)
    environ: dict[str, str] = field(default_factory=dict)

    def tree(self) -> set[int]:
        """This process and its descendants (Ollama's runners are children of `ollama serve`)."""
        pids = {self.pid}
        with contextlib.suppress(psutil.Error):
            pids.update(p.pid for p in psutil.Process(self.pid).children(recursive=True))
        return pids


def _port(base_url: str) -> int | None:
    parts = urlsplit(base_url)
    try:
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def find_server_process(base_url: str) -> ServerProcess | None:
    """The local process that listens on the endpoint's port, or None where it cannot be seen
    (another user's process, a container, a platform that hides sockets)."""
    port = _port(base_url)
    if port is None:
        return None
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None
    pids = {
        c.pid
        for c in connections
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid
    }
    for pid in sorted(pids):
        try:
            process = psutil.Process(pid)
            found = ServerProcess(pid=pid, name=process.name(), cmdline=process.cmdline())
        except psutil.Error:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            env = process.environ()
            found.environ = {k: env[k] for k in _OLLAMA_ENV if k in env}
        return found
    return None


def is_llama_server(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]).startswith("llama-server")


def _flash(value: str | None) -> str:
    if value is None:
        return "on"  # the old boolean form: -fa alone turned it on
    return {"1": "on", "true": "on", "0": "off", "false": "off"}.get(value.lower(), value.lower())


def parse_llama_args(argv: list[str]) -> dict:
    """``{context_length?, kv_cache_type?, draft_model?, model_path?, settings}`` from a
    llama-server command line (``--opt value`` and ``--opt=value`` forms)."""
    out: dict = {"settings": {}}
    settings = out["settings"]
    kv: dict[str, str] = {}
    tokens = list(argv[1:])
    valued = {*_CTX, *_CTK, *_CTV, *_DRAFT, *_MODEL, *_BY_FLAG}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-"):
            continue
        flag, eq, inline = token.partition("=")
        if flag in _FLASH:
            text = None
            if eq:
                text = inline
            elif i < len(tokens) and tokens[i].lower() in _FLASH_VALUES:
                text, i = tokens[i], i + 1
            settings["flash_attn"] = _flash(text)
            continue
        if flag in _BOOL_BY_FLAG:
            settings[_BOOL_BY_FLAG[flag]] = True
            continue
        if flag in _NEGATED_BY_FLAG:
            settings[_NEGATED_BY_FLAG[flag]] = False
            continue
        if flag not in valued:
            continue
        if eq:
            text = inline
        elif i < len(tokens):
            text, i = tokens[i], i + 1
        else:
            continue
        if flag in _CTX:
            if text.isdigit() and int(text) > 0:
                out["context_length"] = int(text)
        elif flag in _CTK or flag in _CTV:
            kv["k" if flag in _CTK else "v"] = text.lower()
        elif flag in _DRAFT:
            out["draft_model"] = os.path.basename(text)
        elif flag in _MODEL:
            out["model_path"] = text
        else:
            name = _BY_FLAG[flag]
            settings[name] = os.path.basename(text) if name in _FILE_VALUED else _typed(text)
    k, v = kv.get("k", "f16"), kv.get("v", "f16")
    # f16 is llama-server's default for both, so an unflagged server is named like a flagged one.
    out["kv_cache_type"] = k if k == v else f"{k}/{v}"
    return out


def _typed(text: str) -> str | int | float:
    with contextlib.suppress(ValueError):
        return int(text)
    with contextlib.suppress(ValueError):
        return float(text)
    return text


def ollama_settings(environ: dict[str, str]) -> dict:
    """Launch keys from an Ollama server's environment (only those it sets)."""
    out: dict = {"settings": {}}
    for key, name in _OLLAMA_ENV.items():
        raw = environ.get(key, "").strip()
        if not raw:
            continue
        if name == "kv_cache_type":
            out["kv_cache_type"] = raw.lower()
        elif name == "context_length":
            if raw.isdigit() and int(raw) > 0:
                out["settings"]["default_context_length"] = int(raw)
        elif name == "flash_attn":
            out["settings"]["flash_attn"] = _flash(raw)
        else:
            out["settings"][name] = _typed(raw)
    return out


@dataclass
class StackInfo:
    """What identification found: keys for the bundle's `model` and `launch`, and the server's
    process ids (the contention monitor leaves them out of "other" load)."""

    model: Weights = field(default_factory=lambda: Weights())
    launch: Launch = field(default_factory=lambda: Launch())
    server: ServerProcess | None = None
    # The model's own context length (Ollama's /api/show), as against the server's per-request
    # one: what the depth sweep may ask Ollama for (worker.engine.sweeps). Not in the bundle.
    model_context: int | None = None


def identify(
    *,
    transport,
    info,
    model: str,
    same_machine: bool,
    model_file: str | None = None,
    launch_command: str | None = None,
    hash_weights: bool = True,
    home: Path | None = None,
    on_hashing: Callable[[Path, int], None] | None = None,
) -> StackInfo:
    """Name the stack as fully as this machine can see it (no step here ends a run)."""
    stack = StackInfo()
    server = find_server_process(transport.base_url) if same_machine else None
    stack.server = server
    argv: list[str] = []
    if launch_command:
        with contextlib.suppress(ValueError):
            argv = shlex.split(launch_command)
        stack.launch["command"] = redact_command(launch_command)
        stack.launch["command_source"] = "user"
    elif server is not None and server.cmdline:
        argv = server.cmdline
        stack.launch["command"] = redact_command(shlex.join(server.cmdline))
        stack.launch["command_source"] = "process"
    parsed: dict = {"settings": {}}
    if info.kind == "llama.cpp" and is_llama_server(argv):
        parsed = parse_llama_args(argv)
    elif info.kind == "ollama" and server is not None:
        parsed = ollama_settings(server.environ)
    # What the command line says that the server did not (its own answers come first).
    if parsed.get("context_length") is not None:
        stack.launch.setdefault("context_length", parsed["context_length"])
    if parsed.get("kv_cache_type") is not None:
        stack.launch.setdefault("kv_cache_type", parsed["kv_cache_type"])
    if parsed.get("draft_model") is not None:
        stack.launch.setdefault("draft_model", parsed["draft_model"])
    stack.launch["settings"] = parsed["settings"]
    if info.kind == "ollama":
        show = _ollama_show(transport, model)
        digest = info.model_meta.get(model, {}).get("digest")
        stack.model.update(ollama_identity(digest, show))
        stack.model_context = ollama_model_context(show)
    elif hash_weights:
        candidates = [model_file or ""]
        if same_machine:
            candidates += [*info.local_paths, parsed.get("model_path", ""), model]
        stack.model.update(gguf_identity(candidates, home=home, on_hashing=on_hashing))
    elif model_file:
        stack.model["file"] = os.path.basename(model_file)
    return stack


def _ollama_show(transport, model: str) -> dict | None:
    """Ollama's `/api/show` for the model (its Modelfile, details and model_info), or None."""
    from .errors import EngineError

    try:
        response = transport.request("POST", "/api/show", json={"model": model}, check=False)
        if response.status_code == 200:
            show = response.json()
            return show if isinstance(show, dict) else None
    except (EngineError, ValueError):
        pass
    return None


def ollama_model_context(show: dict | None) -> int | None:
    """The model's trained context from `/api/show`: ``model_info["<arch>.context_length"]``."""
    info = (show or {}).get("model_info")
    if not isinstance(info, dict):
        return None
    value = info.get(f"{info.get('general.architecture')}.context_length")
    # bool is an int too; a JSON true is no context length.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
