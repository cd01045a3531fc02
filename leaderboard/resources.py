"""The run page's memory, energy and cold-start figures, read from the stored bundle.

Bundles since issue 17 carry `resources` and `cold_start` (worker.engine.resources); the page
shows their figures, or "not measured" with the bundle's own reason, and says so when a run's
bundle predates them. Values are taken only when they have the schema's type, since the raw
payload of an older or legacy upload may hold anything under those names.
"""

from __future__ import annotations

from typing import Any

from leaderboard.payload import body, number, reason, text
from worker.rules.reasoning import BUDGET_SOURCES, reasoning_summary

LOAD_SOURCES = {
    "managed": "the lab started the server: launch to its health check",
    "ollama": "Ollama’s load_duration",
}


def _energy(resources: dict[str, Any]) -> dict[str, Any]:
    found = resources.get("energy")
    energy: dict[str, Any] = found if isinstance(found, dict) else {}
    per_output = number(energy.get("joules_per_output_token"))
    return {
        "per_output": per_output,
        "per_prompt": number(energy.get("joules_per_prompt_token")),
        "trials": number(energy.get("trials")),
        "trials_measured": number(energy.get("trials_measured")),
        "method": text(resources.get("energy_method")),
        "note": reason(resources.get("energy_note")) or reason(energy.get("note")),
        "idle_watts": number(resources.get("idle_watts")),
    }


def _memory(resources: dict[str, Any]) -> dict[str, Any]:
    vram = resources.get("peak_vram_mib")
    devices: list[dict[str, Any]] = []
    if isinstance(vram, dict):
        for device, mib in sorted(vram.items(), key=lambda item: str(item[0]))[:16]:
            if (found := number(mib)) is not None:
                devices.append({"device": str(device)[:8], "gib": found / 1024})
    rss = number(resources.get("peak_server_rss_mib"))
    return {
        "vram": devices,
        "vram_note": "" if devices else reason(resources.get("energy_note")),
        "rss_gib": rss / 1024 if rss is not None else None,
        "rss_note": reason(resources.get("server_rss_note")),
    }


def _cold(cold: dict[str, Any]) -> dict[str, Any]:
    source = cold.get("load_source")
    after = cold.get("first_request_after_load")
    return {
        "load_s": number(cold.get("load_s")),
        "load_source": LOAD_SOURCES.get(source, "") if isinstance(source, str) else "",
        "first_request_ms": number(cold.get("first_request_ms")),
        "after_load": after if isinstance(after, bool) else None,
        "note": reason(cold.get("note")),
    }


def resources_view(raw: Any) -> dict[str, Any]:
    """What the run page's "Memory, energy and cold start" section shows."""
    bundle = body(raw)
    resources = bundle.get("resources")
    cold = bundle.get("cold_start")
    view: dict[str, Any] = {"recorded": isinstance(resources, dict) or isinstance(cold, dict)}
    if isinstance(resources, dict):
        view["energy"] = _energy(resources)
        view["memory"] = _memory(resources)
    if isinstance(cold, dict):
        view["cold"] = _cold(cold)
    return view


def reasoning_view(raw: Any) -> dict[str, Any] | None:
    """What the run page's "Reasoning" section shows (the CLI prints the same summary), with
    the thinking's share of the output tokens for its bar; None for a run that never reasoned."""
    summary = reasoning_summary(body(raw))
    if summary is None:
        return None
    total = summary["reasoning_tokens"] + summary["answer_tokens"]
    share = 100.0 * summary["reasoning_tokens"] / total if total else None
    return {
        **summary,
        "budget_said": BUDGET_SOURCES.get(summary["budget_source"], "automatic: none"),
        "thinking_share": share,
        "answer_share": 100.0 - share if share is not None else None,
    }
