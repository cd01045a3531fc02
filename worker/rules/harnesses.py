"""The harnesses' names: the prompt formats, the real agent programs and their variants, and
the names earlier CLIs used. How a format prompts and parses is the engine's
(worker.engine.harnesses); how a program is pinned and started is the matrix's
(worker.engine.matrix.programs, .adapters), which keeps the same names (a test holds it).
"""

from __future__ import annotations

THINK = "think-xml-tool-call"
# Each tag format and the tag its tool calls come back in.
TAGS = {"xml-tool-call": "tool_call", "xml-function-call": "function_call", THINK: "tool_call"}
FORMATS = ("raw", *TAGS)
FORMAT_DESCRIPTIONS = {
    "raw": "native OpenAI-style tools; calls read from the API's tool_calls",
    "xml-tool-call": "tools in the system prompt; calls as <tool_call>{json}</tool_call>",
    "xml-function-call": "tools in the prompt; calls as <function_call>{json}</function_call>",
    THINK: "reasoning in <think>…</think> first, then <tool_call> tags",
}
# Until 0.4 the formats were called ``hermes``, ``qwen`` and ``pi`` (an earlier CLI's
# ``--harness hermes``).
LEGACY_NAMES = {"hermes": "xml-tool-call", "qwen": "xml-function-call", "pi": THINK}
# The real agent programs the matrix runs, as in --harness.
PROGRAM_NAMES = ("aider", "hermes-agent", "mini-swe-agent")
# A program's named variants (Aider's edit formats); a program not listed has none.
PROGRAM_VARIANTS: dict[str, tuple[str, ...]] = {"aider": ("whole", "diff")}
HARNESSES = FORMATS + PROGRAM_NAMES


def canonical(name: str) -> str:
    """The harness's current name (an old format name maps to its new one)."""
    return LEGACY_NAMES.get(name, name)


def is_program(name: str) -> bool:
    """Whether ``name`` is a real harness program rather than a prompt format."""
    return name in PROGRAM_NAMES


def program_variants(name: str) -> tuple[str, ...]:
    """The variants of the program ``name`` (none for a format or an unknown name)."""
    return PROGRAM_VARIANTS.get(name, ())


# Why a harness task failed. "format": the harness could not read the model's edit or tool call;
# "sandbox": the cage stopped something the run tried (network, a write outside the workspace);
# "wrong": the harness ran and the hidden tests said no.
FAILURES = ("format", "sandbox", "wrong", "timeout", "harness_error", "endpoint_error")
