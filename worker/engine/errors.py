"""Typed engine errors; each carries a hint a person can act on."""

from __future__ import annotations

from ..rules.contract import BundleError


class EngineError(Exception):
    """Base class: ``message`` says what happened, ``hint`` what to try."""

    kind = "error"
    default_hint = ""

    def __init__(self, message: str, *, hint: str | None = None, status_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint
        self.status_code = status_code

    def to_dict(self) -> BundleError:
        """The bundle's ``error`` block."""
        return BundleError(kind=self.kind, message=self.message, hint=self.hint)


class EndpointUnreachable(EngineError):
    """Nothing answered at the address (refused, DNS failure, no route)."""

    kind = "unreachable"
    default_hint = (
        "Is the server running and listening on that address? Start it (for example "
        "`llama-server -m model.gguf --port 8080` or `ollama serve`) or fix --url."
    )


class RequestTimeout(EngineError):
    """The server accepted the request but did not answer in time."""

    kind = "timeout"
    default_hint = (
        "The server is too slow for the timeout (large prompt on a slow machine, or a model "
        "still loading). Raise --timeout or check the server's load."
    )


class AuthError(EngineError):
    """The endpoint (or site) rejected the credentials."""

    kind = "auth"
    default_hint = "Pass the endpoint's key with --api-key or $BENCHLOOP_ENDPOINT_API_KEY."


class UnknownModel(EngineError):
    """The requested model is not served by the endpoint."""

    kind = "unknown_model"

    def __init__(self, model: str, available: list[str] | None = None, **kwargs):
        available = available or []
        shown = ", ".join(available[:12]) + (" …" if len(available) > 12 else "")
        hint = (
            f"Available models: {shown}. Pass one of them with --model."
            if available
            else "The server lists no models; load one first (for Ollama: `ollama pull NAME`)."
        )
        super().__init__(f"model {model!r} is not served by this endpoint", hint=hint, **kwargs)
        self.model = model
        self.available = available


class ContextOverflow(EngineError):
    """The prompt plus the requested output does not fit the server's context window."""

    kind = "context_overflow"
    default_hint = (
        "Start the server with a larger context (llama-server -c 4096 or more; Ollama num_ctx), "
        "or skip the long-prompt tasks."
    )


class ServerError(EngineError):
    """The server answered 5xx."""

    kind = "server_error"
    default_hint = (
        "The server failed while handling the request (out of memory, crashed runner, model not "
        "loaded). Check the server's log."
    )


class RequestRejected(EngineError):
    """A 4xx the engine has no better name for."""

    kind = "rejected"
    default_hint = "The server refused the request; its message above says why."


class StreamInterrupted(EngineError):
    """The connection dropped while a streamed answer was still arriving."""

    kind = "stream_interrupted"
    default_hint = "The server closed the stream early: it may have crashed or been restarted."


class ProtocolError(EngineError):
    """The server's answer did not look like the API the engine expected."""

    kind = "protocol"
    default_hint = "Check --provider and that --url points at the server's API root."


class UsageError(EngineError):
    """The request itself is wrong (unknown suite or profile, bad option)."""

    kind = "usage"


class BundleWriteError(OSError):
    """The run bundle could not be saved (disk full, quota, size limit); the old copy stays.

    An OSError rather than an EngineError: the CLI reports any OSError plainly (exit 1), and
    callers that already catch OSError for disk trouble keep working.
    """

    def __init__(self, path: object, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror, str(path))
        reason = (cause.strerror or str(cause)).rstrip(".")
        self.message = f"could not save the run bundle {path}: {reason[:1].lower()}{reason[1:]}"
        self.hint = (
            "The previous copy of the bundle is unchanged. Free some space, or set "
            "$BENCHLOOP_HOME to a disk with room, and run again."
        )

    def __str__(self) -> str:
        return f"{self.message}. {self.hint}"
