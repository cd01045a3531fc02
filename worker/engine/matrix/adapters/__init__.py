"""The adapters that tell each real harness program how to work on a matrix task."""

from __future__ import annotations

from ...errors import UsageError
from ..spec import Adapter
from .aider import AiderAdapter
from .hermes_agent import HermesAgent
from .mini_swe_agent import MiniSweAgent

# One line per adapter: keep it that way so parallel additions merge without conflicts.
ADAPTERS: dict[str, Adapter] = {}
ADAPTERS[MiniSweAgent.spec.name] = MiniSweAgent()
ADAPTERS[AiderAdapter.spec.name] = AiderAdapter(edit_format="whole")
ADAPTERS[HermesAgent.spec.name] = HermesAgent()


def variants(name: str) -> dict[str, Adapter]:
    """A program's named variants (Aider's edit formats), each an adapter of its own."""
    return dict(getattr(ADAPTERS.get(name), "variants", {}))


def adapter(name: str, variant: str = "") -> Adapter:
    """The adapter for the harness ``name`` (as in ``--harness``) and ``variant``; KeyError if
    there is no such harness, UsageError for a variant it does not have."""
    try:
        base = ADAPTERS[name]
    except KeyError:
        raise KeyError(f"no adapter for harness {name!r} (known: {sorted(ADAPTERS)})") from None
    if not variant:
        return base
    named = variants(name)
    if variant not in named:
        known = ", ".join(named) or "none"
        raise UsageError(f"{name} has no variant {variant!r}", hint=f"Its variants: {known}.")
    return named[variant]
