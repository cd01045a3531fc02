"""Transport-level providers: OpenAI-compatible chat and Ollama's native chat."""

from __future__ import annotations

from ..transport import Transport
from .base import ChatRequest, ChatResponse, Provider, ToolCall
from .ollama import OllamaProvider
from .openai_compat import OpenAIProvider

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "OllamaProvider",
    "OpenAIProvider",
    "Provider",
    "ToolCall",
    "make_provider",
]


def make_provider(
    api: str,
    transport: Transport,
    model: str,
    *,
    supports_ignore_eos: bool = False,
    num_ctx: int | None = None,
) -> Provider:
    """Build the provider for an API family ("openai" or "ollama")."""
    if api == "ollama":
        return OllamaProvider(transport, model, num_ctx=num_ctx)
    if api == "openai":
        return OpenAIProvider(transport, model, supports_ignore_eos=supports_ignore_eos)
    raise ValueError(f"unknown provider API {api!r} (expected 'openai' or 'ollama')")
