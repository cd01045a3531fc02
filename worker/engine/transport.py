"""HTTP transport: one pooled httpx client per endpoint, error mapping and keep-alive retry."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from . import __version__
from .errors import (
    AuthError,
    ContextOverflow,
    EndpointUnreachable,
    EngineError,
    ProtocolError,
    RequestRejected,
    RequestTimeout,
    ServerError,
    StreamInterrupted,
    UnknownModel,
    UsageError,
)

USER_AGENT = f"benchloop/{__version__}"

# Errors raised by httpx when a pooled keep-alive connection was closed by the server just as we
# reused it. llama.cpp drops idle connections after about 5 s, so this race is routine.
STALE_CONNECTION_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)

_CONTEXT_PATTERNS = re.compile(
    r"exceed_context|exceeds the available context|context length|context size|maximum context"
    r"|context window|too many tokens|prompt is too long|input length|num_ctx",
    re.IGNORECASE,
)


def normalize_base_url(url: str) -> str:
    """Return the API root: scheme added, trailing slash and a trailing ``/v1`` removed."""
    url = url.strip()
    if not url:
        raise UsageError("empty endpoint URL")
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"not an http(s) URL: {url!r}", hint="Use --url http://host:port")
    path = parts.path.rstrip("/")
    # Users paste OpenAI-style base URLs ending in /v1; the providers add /v1 themselves.
    if path.endswith("/v1"):
        path = path[:-3]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def error_message(response: httpx.Response) -> str:
    """Pull a readable message out of an error body (OpenAI, Ollama or plain text)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            return str(err.get("message") or err)[:300]
        if err:
            return str(err)[:300]
    return str(body)[:300]


def raise_for_status(response: httpx.Response, *, model: str | None = None) -> None:
    """Map an HTTP error status to a typed engine error (reads the body if it was streamed)."""
    code = response.status_code
    if code < 400:
        return
    if not response.is_closed:
        response.read()
    message = error_message(response)
    text = f"HTTP {code}: {message}"
    if code in (401, 403):
        raise AuthError(text, status_code=code)
    if _CONTEXT_PATTERNS.search(message):
        raise ContextOverflow(text, status_code=code)
    if code == 404 and model and "model" in message.lower():
        raise UnknownModel(model, status_code=code)
    if code == 408:
        raise RequestTimeout(text, status_code=code)
    if code >= 500:
        raise ServerError(text, status_code=code)
    raise RequestRejected(text, status_code=code)


def map_transport_error(exc: httpx.HTTPError, *, during_stream: bool = False) -> EngineError:
    """Turn an httpx exception into an engine error with a hint."""
    if isinstance(exc, httpx.ConnectTimeout):
        return EndpointUnreachable("connection to the endpoint timed out")
    if isinstance(exc, httpx.ConnectError):
        return EndpointUnreachable(f"could not connect to the endpoint ({_short(exc)})")
    if isinstance(exc, httpx.TimeoutException):
        return RequestTimeout(f"the endpoint stopped answering ({type(exc).__name__})")
    if during_stream or isinstance(exc, STALE_CONNECTION_ERRORS):
        return StreamInterrupted(f"connection dropped: {_short(exc)}")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ProtocolError(f"bad endpoint URL: {_short(exc)}")
    return EngineError(f"HTTP failure: {_short(exc)}")


def timed_lines(response: httpx.Response) -> Iterator[tuple[float, bytes]]:
    """A streamed body's lines (bytes, ``\\n`` removed), each with the perf_counter reading of the
    network read that completed it.

    One clock reading and one split per read, not per line, and no text decoding: the SSE and
    NDJSON readers hand the bytes to ``json.loads`` as they are. A line cut between two reads is
    the only thing carried over (and joined once). A ``\\r`` before the ``\\n`` stays on the line
    for the reader to strip; a lone ``\\r`` is not taken as a line end (no server here sends one).
    """
    tail = b""
    for chunk in response.iter_bytes():
        now = time.perf_counter()
        if tail:
            chunk = tail + chunk
        lines = chunk.split(b"\n")
        tail = lines.pop()
        for line in lines:
            yield now, line
    if tail:
        yield time.perf_counter(), tail


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    # httpx messages can embed the full URL; keep errors free of endpoint addresses.
    return re.sub(r"https?://\S+", "<endpoint>", text)[:200]


# httpcore's trace event once the request's last byte is handed to the socket.
_WRITTEN = "http11.send_request_body.complete"


_CONNECTED = "connection.connect_tcp.complete"


def _written(marks: dict[str, float], t_sent: float, cpu_sent: float) -> float | None:
    """When the client's part of sending ended (see Sent): on the CPU clock, except for a
    request that opened its connection, whose handshake is the client's wait in full."""
    if _WRITTEN not in marks:
        return None
    if _CONNECTED in marks:
        return marks[_WRITTEN]
    return t_sent + marks["cpu_written"] - cpu_sent


@dataclass
class Sent:
    """A response whose headers arrived, with perf_counter readings of the (final) attempt.

    ``t_sent`` is when the client began sending, ``t_written`` when it had done its own part of
    writing the request (``t_sent`` plus the CPU time its thread spent until the body was
    written) and ``t_headers`` when the response headers were in. ``new_connection`` says
    whether this attempt had to open a TCP connection (a cost the client pays inside TTFT).

    The write is timed on the thread's CPU clock because the write that completes a request
    wakes the server, which on loopback often runs on this thread's core at once: it parses and
    tokenizes the prompt while this thread waits inside its write. That wait is the server's
    work (the split's setup), not the client's (bench/README.md, "Where the client's share of
    TTFT goes").
    """

    response: httpx.Response
    t_sent: float
    retried: bool
    t_written: float | None = None
    t_headers: float | None = None
    new_connection: bool = False


class Transport:
    """Pooled HTTP client bound to one endpoint."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        connect_timeout: float = 10.0,
    ):
        self.base_url = normalize_base_url(base_url)
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=self.timeout)
        self.reconnects = 0
        # Set once a streamed request had to open a new connection after an earlier stream: the
        # server closes streams' connections (llama.cpp does), so later streams warm one first.
        self.warm_before_streams = False
        self._streamed = False
        self._readied = False

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, request: httpx.Request) -> Sent:
        """Send with one transparent retry when a reused connection turns out to be dead.

        The retry happens only before any response byte arrived, so the server never started
        answering the first attempt and resending cannot duplicate work the client has seen.
        """
        for attempt in (0, 1):
            marks: dict[str, float] = {}

            def trace(name: str, info: object, marks: dict[str, float] = marks) -> None:
                marks.setdefault(name, time.perf_counter())
                if name == _WRITTEN:
                    marks.setdefault("cpu_written", time.thread_time())

            request.extensions = {**request.extensions, "trace": trace}
            cpu_sent = time.thread_time()
            t_sent = time.perf_counter()
            try:
                response = self.client.send(request, stream=True)
                t_headers = time.perf_counter()
            except STALE_CONNECTION_ERRORS as exc:
                if attempt == 0:
                    self.reconnects += 1
                    continue
                raise map_transport_error(exc) from exc
            except httpx.HTTPError as exc:
                raise map_transport_error(exc) from exc
            return Sent(
                response=response,
                t_sent=t_sent,
                retried=attempt > 0,
                t_written=_written(marks, t_sent, cpu_sent),
                t_headers=t_headers,
                new_connection=_CONNECTED in marks,
            )
        raise AssertionError("unreachable")

    def warm(self, path: str) -> None:
        """Leave an open keep-alive connection in the pool before a timed request.

        llama.cpp closes the connection after every streamed answer, so without this each
        measured request would pay a TCP connect (and sometimes a stale-connection retry) inside
        its TTFT. Any answer, even an error status, warms the connection; failures are ignored
        because the timed request reports its own.
        """
        with suppress(EngineError):
            self.request("GET", path, check=False, timeout=10.0)

    def ready_for_stream(self, warm_path: str) -> None:
        """Open the connection the next stream will use, now, outside its clock.

        A round of concurrent streams calls this before its barrier, so each stream's prompt
        leaves at the barrier on an open connection: warming after it would send them a round
        trip apart, and a stream not yet seen to need warming would connect inside its TTFT.
        """
        if not self._readied:  # outside the clock, so whatever the server does with connections
            self.warm(warm_path)
            self._readied = True

    def request(
        self,
        method: str,
        path: str,
        *,
        json: object | None = None,
        timeout: float | None = None,
        model: str | None = None,
        check: bool = True,
    ) -> httpx.Response:
        """Send a request and read the whole body; errors are mapped to engine errors."""
        # httpx's own default (the client's timeout) stands when none is given.
        request = self.client.build_request(
            method,
            path,
            json=json,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
        sent = self._send(request)
        try:
            sent.response.read()
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, during_stream=True) from exc
        finally:
            sent.response.close()
        if check:
            raise_for_status(sent.response, model=model)
        return sent.response

    @contextmanager
    def stream(
        self,
        method: str,
        path: str,
        *,
        json: object | None = None,
        model: str | None = None,
        warm_path: str | None = None,
    ) -> Iterator[Sent]:
        """Send a request and yield the open response once its headers are in.

        With ``warm_path``, a server seen closing streamed connections gets a cheap request on
        that path first, so the timed request starts on an open connection.
        """
        if warm_path and self.warm_before_streams and not self._readied:
            self.warm(warm_path)
        request = self.client.build_request(method, path, json=json)
        self._readied = False
        sent = self._send(request)
        if warm_path and self._streamed and sent.new_connection:
            self.warm_before_streams = True
        self._streamed = True
        try:
            raise_for_status(sent.response, model=model)
            yield sent
        finally:
            sent.response.close()

    def get_json(self, path: str, *, timeout: float | None = None) -> object | None:
        """GET a JSON document; ``None`` for any non-200 or non-JSON answer (used by probes)."""
        response = self.request("GET", path, timeout=timeout, check=False)
        if response.status_code in (401, 403):
            raise AuthError(f"HTTP {response.status_code} on {path}", status_code=401)
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except ValueError:
            return None
