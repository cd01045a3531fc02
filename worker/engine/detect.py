"""Identify the server behind an endpoint by probing its API, then list and check models."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import TypeGuard

from ..rules.contract import Launch, ModelInfo
from ..rules.engines import known_build
from .errors import EngineError, ProtocolError, UnknownModel
from .transport import Transport

LLAMA_CPP, OLLAMA, VLLM, LMSTUDIO, GENERIC = (
    "llama.cpp",
    "ollama",
    "vllm",
    "lmstudio",
    "openai-compatible",
)
# Servers documented to accept the non-standard ignore_eos sampling flag.
IGNORE_EOS_KINDS = {LLAMA_CPP, VLLM}
_BUILD_TOKEN = re.compile(r"\bb[1-9]\d*(?:-[0-9a-f]{7,40})?\b")


@dataclass
class EndpointInfo:
    """What probing learnt about an endpoint."""

    base_url: str
    kind: str
    api: str
    models: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    engine: dict = field(default_factory=dict)
    model_meta: dict[str, dict] = field(default_factory=dict)
    launch: Launch = field(default_factory=lambda: Launch())
    # Full paths the server reported for its weights: used to hash a local GGUF, never written.
    local_paths: list[str] = field(default_factory=list)

    @property
    def supports_ignore_eos(self) -> bool:
        return self.kind in IGNORE_EOS_KINDS

    def to_dict(self) -> dict:
        return asdict(self)


def detect_endpoint(
    transport: Transport, *, provider: str = "auto", timeout: float = 5.0
) -> EndpointInfo:
    """Probe well-known paths to tell llama.cpp, Ollama, vLLM, LM Studio and others apart.

    The first probe raises ``EndpointUnreachable`` when nothing listens, and any probe raises
    ``AuthError`` on 401/403. Ports are never used as evidence: people run anything anywhere.
    """
    if provider not in ("auto", "openai", "ollama"):
        raise ValueError(f"unknown provider {provider!r}")
    props = transport.get_json("/props", timeout=timeout)
    if _is_llama_props(props):
        info = EndpointInfo(transport.base_url, LLAMA_CPP, "openai")
        listing = transport.get_json("/v1/models", timeout=timeout)
        _fill_llama(info, props, listing if isinstance(listing, dict) else None)
        if not info.engine["version"]:
            build = _llama_build_elsewhere(transport, timeout)
            info.engine.update(version=build, build_info=build)
        return _check_api(info, provider)

    version = transport.get_json("/api/version", timeout=timeout)
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        tags = transport.get_json("/api/tags", timeout=timeout)
        # LM Studio and proxies sometimes answer /api/version too; Ollama also lists /api/tags.
        if isinstance(tags, dict) and isinstance(tags.get("models"), list):
            info = EndpointInfo(
                transport.base_url, OLLAMA, "ollama" if provider != "openai" else "openai"
            )
            info.engine = {"name": "ollama", "version": version["version"]}
            _fill_ollama(info, tags, transport.get_json("/api/ps", timeout=timeout))
            return info

    listing = transport.get_json("/v1/models", timeout=timeout)
    if not (isinstance(listing, dict) and isinstance(listing.get("data"), list)):
        raise ProtocolError(
            "the endpoint answered, but not as an LLM API (no /props, /api/tags or /v1/models)"
        )
    owners = {str(m.get("owned_by", "")).lower() for m in listing["data"] if isinstance(m, dict)}
    if "llamacpp" in owners:
        info = EndpointInfo(transport.base_url, LLAMA_CPP, "openai")
        _fill_llama(info, None, listing)
    elif "vllm" in owners:
        info = EndpointInfo(transport.base_url, VLLM, "openai")
        vllm_version = transport.get_json("/version", timeout=timeout)
        version_text = vllm_version.get("version", "") if isinstance(vllm_version, dict) else ""
        info.engine = {"name": "vllm", "version": version_text}
        _fill_openai(info, listing)
        for item in listing["data"]:
            if isinstance(item, dict) and item.get("max_model_len"):
                info.model_meta.setdefault(item["id"], {})["context_length"] = item["max_model_len"]
    else:
        lms = transport.get_json("/api/v0/models", timeout=timeout)
        if isinstance(lms, dict) and isinstance(lms.get("data"), list) and _looks_lmstudio(lms):
            info = EndpointInfo(transport.base_url, LMSTUDIO, "openai")
            info.engine = {"name": "lmstudio", "version": ""}
            _fill_openai(info, listing)
            _fill_lmstudio(info, lms)
        else:
            info = EndpointInfo(transport.base_url, GENERIC, "openai")
            info.engine = {"name": "openai-compatible", "version": ""}
            _fill_openai(info, listing)
    return _check_api(info, provider)


def _check_api(info: EndpointInfo, provider: str) -> EndpointInfo:
    if provider == "ollama" and info.api != "ollama":
        raise ProtocolError(
            f"--provider ollama, but the endpoint is {info.kind} (no Ollama /api/chat)",
            hint="Use --provider auto or openai for this server.",
        )
    return info


def _is_llama_props(props: object) -> TypeGuard[dict]:
    return isinstance(props, dict) and (
        "default_generation_settings" in props or "build_info" in props
    )


def _fill_openai(info: EndpointInfo, listing: dict | None) -> None:
    for item in (listing or {}).get("data") or []:
        if not isinstance(item, dict) or not item.get("id"):
            continue
        info.models.append(item["id"])
        for alias in item.get("aliases") or []:
            info.aliases[str(alias)] = item["id"]


def _llama_build_elsewhere(transport: Transport, timeout: float) -> str:
    """The build where /props names none: a /version document, else a build token (b1234)
    in the Server header; "" where the server reports it nowhere."""
    try:
        version = transport.get_json("/version", timeout=timeout)
        response = transport.request("GET", "/health", timeout=timeout, check=False)
    except EngineError:  # a probe for a detail: never the reason a run cannot start
        return ""
    if isinstance(version, dict):
        for key in ("build_info", "version", "build"):
            if build := known_build(version.get(key)):
                return build
    match = _BUILD_TOKEN.search(response.headers.get("server", ""))
    return match.group(0) if match else ""


def _fill_llama(info: EndpointInfo, props: dict | None, listing: dict | None) -> None:
    _fill_openai(info, listing)
    build = known_build((props or {}).get("build_info"))
    info.engine = {"name": "llama.cpp", "version": build, "build_info": build}
    settings = (props or {}).get("default_generation_settings") or {}
    launch = Launch()
    if settings.get("n_ctx"):
        launch["context_length"] = settings["n_ctx"]
    if props and props.get("total_slots"):
        launch["parallel_slots"] = props["total_slots"]
    if props and props.get("model_path"):
        # Only the file name: a full path would carry the user's home directory.
        launch["model_file"] = os.path.basename(str(props["model_path"]))
        info.local_paths.append(str(props["model_path"]))
    spec = (settings.get("params") or {}).get("speculative.types")
    if spec:
        launch["speculative"] = spec
    info.launch = launch
    for item in (listing or {}).get("data") or []:
        meta = item.get("meta") if isinstance(item, dict) else None
        if not isinstance(meta, dict):
            continue
        entry = info.model_meta.setdefault(item["id"], {})
        if meta.get("n_params"):
            entry["parameter_count"] = _human_count(meta["n_params"])
        if meta.get("ftype"):
            entry["quantization"] = str(meta["ftype"])
        if meta.get("n_ctx_train"):
            entry["context_length_train"] = meta["n_ctx_train"]
        if meta.get("n_ctx") and "context_length" not in launch:
            launch["context_length"] = meta["n_ctx"]


def _fill_ollama(info: EndpointInfo, tags: dict, ps: object) -> None:
    for model in tags.get("models") or []:
        name = model.get("name") or model.get("model")
        if not name:
            continue
        info.models.append(name)
        details = model.get("details") or {}
        info.model_meta[name] = {
            key: value
            for key, value in (
                ("family", details.get("family", "")),
                ("parameter_count", details.get("parameter_size", "")),
                ("quantization", details.get("quantization_level", "")),
                # The manifest digest: Ollama's name for this exact model build.
                ("digest", model.get("digest", "")),
            )
            if value
        }
    loaded_models = (ps.get("models") or []) if isinstance(ps, dict) else []
    for loaded in loaded_models:
        name = loaded.get("name") or loaded.get("model")
        if name in info.model_meta and loaded.get("context_length"):
            info.model_meta[name]["context_length"] = loaded["context_length"]


def _looks_lmstudio(lms: dict) -> bool:
    return any(
        isinstance(m, dict) and ("compatibility_type" in m or "state" in m) for m in lms["data"]
    )


def _fill_lmstudio(info: EndpointInfo, lms: dict) -> None:
    for model in lms["data"]:
        if not isinstance(model, dict) or not model.get("id"):
            continue
        meta = info.model_meta.setdefault(model["id"], {})
        if model.get("arch"):
            meta["family"] = model["arch"]
        if model.get("quantization"):
            meta["quantization"] = model["quantization"]
        context = model.get("loaded_context_length") or model.get("max_context_length")
        if context:
            meta["context_length"] = context


def _human_count(n: int) -> str:
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.1f}{suffix}"
    return str(n)


def resolve_model(info: EndpointInfo, requested: str | None) -> str:
    """Return the served model id for ``requested``; raise ``UnknownModel`` if it is not served.

    With no request and exactly one model served, that model is used. An empty listing (some
    gateways hide it) cannot be checked, so the requested name is trusted.
    """
    if not requested:
        if len(info.models) == 1:
            return info.models[0]
        raise UnknownModel("(none given)", info.models)
    if not info.models:
        return requested
    if requested in info.models:
        return requested
    if requested in info.aliases:
        return requested
    if info.kind == OLLAMA and ":" not in requested and f"{requested}:latest" in info.models:
        return f"{requested}:latest"
    raise UnknownModel(requested, info.models)


def describe_model(info: EndpointInfo, model: str) -> ModelInfo:
    """The v3 ``model`` block, filled from what the server reports."""
    meta = info.model_meta.get(info.aliases.get(model, model), {})
    return ModelInfo(
        model_id=model,
        family=str(meta.get("family", "")),
        parameter_count=str(meta.get("parameter_count", "")),
        quantization=str(meta.get("quantization", "")),
    )


# Ports that local LLM servers default to: llama.cpp, Ollama, LM Studio, vLLM/MLX, Jan,
# KoboldCpp, SGLang. They only decide where to look; the probe decides what answered.
COMMON_PORTS = (8080, 8081, 11434, 1234, 8000, 1337, 5001, 30000)


def scan_local(
    ports: tuple[int, ...] = COMMON_PORTS, *, host: str = "127.0.0.1", timeout: float = 1.5
) -> list[EndpointInfo]:
    """Probe loopback ports in parallel and return the LLM servers that answered."""
    from concurrent.futures import ThreadPoolExecutor

    from .errors import EngineError

    def probe(port: int) -> EndpointInfo | None:
        try:
            with Transport(f"http://{host}:{port}", timeout=timeout, connect_timeout=timeout) as t:
                return detect_endpoint(t, timeout=timeout)
        except EngineError:
            return None

    with ThreadPoolExecutor(max_workers=len(ports) or 1) as pool:
        found = list(pool.map(probe, ports))
    return [info for info in found if info is not None]
