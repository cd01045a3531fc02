"""The adapters that tell each real harness program how to work on a matrix task."""

from __future__ import annotations

from ..spec import Adapter
from .aider import AiderAdapter
from .hermes_agent import HermesAgent
from .mini_swe_agent import MiniSweAgent

# One line per adapter: keep it that way so parallel additions merge without conflicts.
ADAPTERS: dict[str, Adapter] = {}
ADAPTERS[MiniSweAgent.spec.name] = MiniSweAgent()
ADAPTERS["aider"] = AiderAdapter(edit_format="whole")
ADAPTERS["aider-diff"] = AiderAdapter(edit_format="diff")
ADAPTERS[HermesAgent.spec.name] = HermesAgent()


def adapter(name: str) -> Adapter:
    """The adapter for the harness ``name`` (as in ``--harness``); KeyError if there is none."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise KeyError(f"no adapter for harness {name!r} (known: {sorted(ADAPTERS)})") from None
