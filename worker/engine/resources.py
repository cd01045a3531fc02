"""What a run cost the machine, and how the server started: the `resources` and `cold_start`
blocks of the bundle (docs/metrics.md, "Memory and energy" and "Cold start").

The orchestrator starts the power monitor beside the contention monitor, hands it to the speed
suite (each trial integrates its own windows) and asks here for the two blocks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from .errors import EngineError
from .metrics import measured_trials
from .power import INTERVAL_S, PowerMonitor, energy_summary, unmeasured_block

if TYPE_CHECKING:
    from ..rules.contract import Bundle, ColdStart, Resources
    from .plan import PreparedRun
    from .providers import ChatResponse

REMOTE = "the server runs on another machine"


def expected_gpus(hardware: Mapping[str, Any]) -> int:
    """The GPUs the run should see power from: those NVML listed, or the user named."""
    if hardware.get("gpu_source") in ("nvml", "override"):
        return len(hardware.get("gpus") or [])
    return 0


def start_power(prep: PreparedRun, hardware: Mapping[str, Any]) -> tuple[PowerMonitor | None, str]:
    """A started monitor for a server on this machine, or None and the reason there is none."""
    if not prep.locality.same_machine:
        return None, f"not measured: {REMOTE}"
    server = prep.stack.server
    monitor = PowerMonitor(
        expected_devices=expected_gpus(hardware),
        server_pids=server.tree if server is not None else None,
        interval=INTERVAL_S,
        clock=time.perf_counter,  # the clock the transport times requests with
    )
    return monitor.start(), ""


def resources_block(
    monitor: PowerMonitor | None, bundle: Bundle, hardware: Mapping[str, Any]
) -> Resources:
    """The `resources` block: sampling's findings plus the run's energy per token."""
    if monitor is not None:
        block = monitor.block()
    else:
        block = unmeasured_block(REMOTE, expected_gpus(hardware))
    speed = bundle["suites"].get("speed")
    block["energy"] = energy_summary(measured_trials(speed["tasks"] if speed else []))
    return block  # type: ignore[return-value]  # an open dict the schema describes


def ollama_model_loaded(prep: PreparedRun) -> bool | None:
    """Whether Ollama already holds the model in memory (`/api/ps`); None when it cannot say."""
    if prep.provider.api != "ollama":
        return None
    with contextlib.suppress(EngineError, ValueError, TypeError, AttributeError):
        answer = prep.transport.request("GET", "/api/ps", check=False)
        if answer.status_code == 200:
            names = {m.get("name") for m in answer.json().get("models") or []}
            names |= {m.get("model") for m in answer.json().get("models") or []}
            return prep.model in names
    return None


def cold_start_block(
    prep: PreparedRun,
    first: ChatResponse | None,
    first_request_ms: float | None,
    loaded_before: bool | None,
) -> ColdStart:
    """Model load time and the run's first request, kept apart from the warm figures."""
    load_s: float | None = None
    source: Literal["managed", "ollama"] | None = None
    after_load: bool | None = None
    note = ""
    server_load = first.server.load_ms if first is not None and first.server else None
    if prep.config.server_load_s is not None:
        load_s, source, after_load = prep.config.server_load_s, "managed", True
    elif prep.provider.api == "ollama" and loaded_before is False and server_load is not None:
        load_s, source, after_load = server_load / 1000.0, "ollama", True
    elif prep.provider.api == "ollama" and loaded_before:
        after_load = False
        note = "the model was already loaded (Ollama's /api/ps), so this run saw no load"
    elif prep.provider.api == "ollama":
        note = "Ollama did not say whether the model was loaded or how long loading took"
    else:
        note = "the server was started outside this run, so its load time is not seen"
    return {
        "load_s": round(load_s, 3) if load_s is not None else None,
        "load_source": source,
        "first_request_ms": round(first_request_ms, 1) if first_request_ms is not None else None,
        "first_request_after_load": after_load,
        "note": note,
    }
