"""The real harness programs the matrix runs, pinned (pure data: no imports of the programs)."""

from __future__ import annotations

from .spec import HarnessSpec

PROGRAMS: dict[str, HarnessSpec] = {
    spec.name: spec
    for spec in (
        HarnessSpec(
            name="aider",
            package="aider-chat",
            version="0.86.2",
            program="aider",
            extra="harness-aider",
            description="Aider pair-programming CLI",
        ),
        HarnessSpec(
            name="hermes-agent",
            package="hermes-agent",
            version="0.19.0",
            program="hermes",
            extra="harness-hermes",
            description="Hermes Agent (Nous Research)",
        ),
        HarnessSpec(
            name="mini-swe-agent",
            package="mini-swe-agent",
            version="2.4.6",
            program="mini",
            extra="harness-mini-swe-agent",
            description="mini-swe-agent, a minimal bash-only coding agent",
        ),
    )
}
