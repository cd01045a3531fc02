"""The recording proxy: every harness reaches the endpoint through it; it is the overhead meter.

A small threaded HTTP/1.1 server in front of the real endpoint. It listens on a Unix socket (bound
into the harness's cage, where a forwarder turns it into 127.0.0.1:<port>) and, optionally, on a
free loopback TCP port (for our own in-process baseline loop). Only the endpoint's own API is
relayed (``ALLOWED``: the model requests and the read-only model metadata, origin-form targets
only); anything else is answered 400 and recorded as refused, so a caged program cannot use the
proxy to reach another service on the host. An allowed request is forwarded upstream as it came
(server-sent events are passed on chunk by chunk, never buffered); each model request
(``/v1/chat/completions``, ``/v1/completions``) is recorded with the server's own token counts:
llama.cpp's ``timings`` where present, else the OpenAI ``usage`` block. The harness's own
accounting is never used.
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import json
import os
import re
import socketserver
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from ..transport import STALE_CONNECTION_ERRORS
from .spec import RequestRecord

MODEL_PATHS = ("/v1/chat/completions", "/v1/completions")
# What a harness may ask of the endpoint, by method: the model requests (recorded) and the
# read-only metadata clients probe for (the model list; Ollama's, LM Studio's and llama.cpp's
# model facts: Hermes Agent probes /api/v1/models, /api/tags, /v1/props, /props and /v1/models,
# docs/harnesses.md). Ollama's own generation paths (/api/chat, /api/generate) are not here:
# they would bypass the records, and every harness in the matrix is pointed at /v1.
ALLOWED: dict[str, frozenset[str]] = {
    "POST": frozenset({*MODEL_PATHS, "/api/show"}),
    "GET": frozenset(
        {
            "/v1/models",
            "/api/v1/models",
            "/api/tags",
            "/api/version",
            "/v1/props",
            "/props",
            "/health",
        }
    ),
}
# GET /v1/models/<id> (the OpenAI client's models.retrieve; an id may hold "/"): plain
# segments, none of them "." or "..", nothing percent-encoded.
_MODEL_ENTRY = re.compile(r"/v1/models(?:/(?!\.\.?(?:/|\Z))[A-Za-z0-9._~:@+-]{1,200}){1,8}\Z")
# An origin-form target (RFC 9112 3.2.1) in printable ASCII: a path from "/" and a query.
_ORIGIN_FORM = re.compile(r"/(?!/)[\x21-\x7e]*\Z")
MAX_REFUSALS = 20  # refusals kept, in words (the first ones)
TRANSCRIPT_BODIES = 16  # request bodies kept as the transcript (the newest)
TRANSCRIPT_BYTES = 64 * 1024  # per body
_CONTENT_BYTES = 16 * 1024  # one message's content, head and tail kept
_BODY_LIMIT = 32 * 1024 * 1024  # a request body larger than this is refused
# Hop-by-hop headers (RFC 9110 7.6.1) and the ones this proxy sets itself.
_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
    "accept-encoding",
}

Rewrite = Callable[[dict], dict]


def _upstream_root(url: str) -> str:
    """``http://host:port`` from an endpoint URL with or without its ``/v1``."""
    root = url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def refusal(method: str, target: str) -> str:
    """Why the proxy will not relay ``method target``, or "" when it will."""
    if not _ORIGIN_FORM.match(target) or "#" in target:
        return "the target is not a path on the endpoint (origin-form, from /)"
    path = target.split("?", 1)[0]
    bare = path.rstrip("/") or "/"
    if bare in ALLOWED.get(method, ()):
        return ""
    if method == "GET" and _MODEL_ENTRY.match(bare):
        return ""
    return "not one of the endpoint's API paths for this method"


def upstream_url(base: httpx.URL, target: str) -> httpx.URL:
    """``target`` (an allowed origin-form path and query) joined onto the upstream's own path:
    the scheme, host and port are the upstream's whatever the target holds."""
    path, _, query = target.partition("?")
    joined = base.path.rstrip("/") + path
    return base.copy_with(raw_path=(joined + (f"?{query}" if query else "")).encode("ascii"))


def token_counts(payload: dict) -> tuple[int | None, int | None, int | None, str]:
    """(prompt incl. cached, cached, completion, source) from one response object or chunk."""
    timings = payload.get("timings")
    if isinstance(timings, dict) and "prompt_n" in timings:
        cached = int(timings.get("cache_n") or 0)
        prompt = int(timings.get("prompt_n") or 0) + cached
        return prompt, cached, int(timings.get("predicted_n") or 0), "timings"
    usage = payload.get("usage")
    if isinstance(usage, dict) and "prompt_tokens" in usage:
        details = usage.get("prompt_tokens_details") or {}
        cached_raw = details.get("cached_tokens") if isinstance(details, dict) else None
        return (
            int(usage.get("prompt_tokens") or 0),
            None if cached_raw is None else int(cached_raw),
            int(usage.get("completion_tokens") or 0),
            "usage",
        )
    return None, None, None, "none"


class _SSECounts:
    """Reads the token counts out of a server-sent event stream as it passes."""

    def __init__(self) -> None:
        self._pending = b""
        self.timings: dict | None = None
        self.usage: dict | None = None

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def close(self) -> None:
        self._line(self._pending.strip())
        self._pending = b""

    def _line(self, line: bytes) -> None:
        # Only the chunks that carry counts are parsed; llama.cpp puts them in the last ones.
        if not line.startswith(b"data:") or (b'"timings"' not in line and b'"usage"' not in line):
            return
        try:
            event = json.loads(line[5:])
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        if isinstance(event.get("timings"), dict):
            self.timings = event
        if isinstance(event.get("usage"), dict):
            self.usage = event

    def counts(self) -> tuple[int | None, int | None, int | None, str]:
        for event in (self.timings, self.usage):
            if event is not None:
                found = token_counts(event)
                if found[3] != "none":
                    return found
        return None, None, None, "none"


def _trim(text: str) -> str:
    if len(text) <= _CONTENT_BYTES:
        return text
    half = _CONTENT_BYTES // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def _bounded_messages(body: dict) -> list:
    """The body's messages (or prompt), the newest that fit in ``TRANSCRIPT_BYTES``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        prompt = body.get("prompt")
        messages = [{"role": "prompt", "content": prompt if isinstance(prompt, str) else ""}]
    kept: list = []
    used = 0
    for message in reversed(messages):
        message = copy.deepcopy(message) if isinstance(message, dict) else {"content": message}
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = _trim(content)
        elif isinstance(content, list):
            message["content"] = [
                {**p, "text": _trim(p["text"])}
                if isinstance(p, dict) and isinstance(p.get("text"), str)
                else p
                for p in content
            ]
        size = len(json.dumps(message, default=str))
        if used + size > TRANSCRIPT_BYTES and kept:
            break
        kept.append(message)
        used += size
    return list(reversed(kept))


def cap_max_tokens(body: dict, cap: int) -> dict:
    """Clamp the body's completion budget to ``cap``, and set it where the harness left it out."""
    fields = [k for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None]
    for key in fields:
        try:
            body[key] = min(int(body[key]), cap)
        except (TypeError, ValueError):
            body[key] = cap
    if not fields:
        body["max_tokens"] = cap
    return body


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _TCPHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True


class RecordingProxy:
    """Forward to ``upstream_url`` and record every model request; start() it, then close()."""

    def __init__(
        self,
        upstream_url: str,
        *,
        unix_path: str | os.PathLike | None = None,
        tcp: bool | None = None,
        max_tokens_cap: int | None = None,
        rewrite: Rewrite | None = None,
        api_key: str | None = None,
        read_timeout_s: float = 600.0,
    ) -> None:
        """``tcp`` defaults to a loopback listener only when there is no Unix socket.
        ``api_key``, if given, is what the upstream gets (the harness only ever holds a dummy)."""
        self.upstream = _upstream_root(upstream_url)
        self._base = httpx.URL(self.upstream)
        self.unix_path = str(unix_path) if unix_path else None
        self.tcp = (self.unix_path is None) if tcp is None else tcp
        self.api_key = api_key
        self.max_tokens_cap = max_tokens_cap
        self.rewrite = rewrite
        self._client = httpx.Client(
            timeout=httpx.Timeout(read_timeout_s, connect=10.0), follow_redirects=False
        )
        self._lock = threading.Lock()
        # Relays in progress: close() waits for them, so a record is never read before the
        # relay that makes it has finished (a client can read the last byte of an answer
        # before the relay's thread records it).
        self._idle = threading.Condition(self._lock)
        self._active = 0
        self._records: list[RequestRecord] = []
        self._transcript: deque[dict] = deque(maxlen=TRANSCRIPT_BODIES)
        self._other: list[tuple[str, str, int]] = []
        self._refused: list[str] = []
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._t0 = time.monotonic()
        self.port: int | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> RecordingProxy:
        handler = self._handler_class()
        if self.unix_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)
            unix = _UnixHTTPServer(self.unix_path, handler)
            os.chmod(self.unix_path, 0o666)
            self._servers.append(unix)
        if self.tcp:
            tcp = _TCPHTTPServer(("127.0.0.1", 0), handler)
            self.port = tcp.server_address[1]
            self._servers.append(tcp)
        for server in self._servers:
            thread = threading.Thread(target=server.serve_forever, daemon=True, name="mx-proxy")
            thread.start()
            self._threads.append(thread)
        self._t0 = time.monotonic()
        return self

    def close(self, drain_s: float = 10.0) -> None:
        """Stop listening, then wait up to ``drain_s`` for the relays in progress to record."""
        for server in self._servers:
            server.shutdown()
            server.server_close()
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0, timeout=drain_s)
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers, self._threads = [], []
        self._client.close()
        if self.unix_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what was recorded -----------------------------------------------------------------
    @property
    def url(self) -> str:
        """The TCP listener's base URL, ``/v1`` included (only with ``tcp=True``)."""
        if self.port is None:
            raise RuntimeError("the proxy has no TCP listener")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def tcp_url(self) -> str:
        return self.url

    @property
    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    @property
    def transcript(self) -> list[dict]:
        with self._lock:
            return list(self._transcript)

    @property
    def other_requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of the requests that were not model requests."""
        with self._lock:
            return list(self._other)

    @property
    def refused(self) -> list[str]:
        """The requests the proxy would not relay, in words (the harness's faults)."""
        with self._lock:
            return list(self._refused)

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    # -- the relay -------------------------------------------------------------------------
    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "benchloop-proxy"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass  # the records are the log

            def address_string(self) -> str:
                return "unix" if isinstance(self.client_address, str) else super().address_string()

            def do_GET(self) -> None:
                proxy._relay(self)

            # Every method reaches the relay, which refuses all but ALLOWED's (CONNECT too:
            # this is no tunnel).
            do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET
            do_CONNECT = do_TRACE = do_GET

        return Handler

    def _read_body(self, handler: http.server.BaseHTTPRequestHandler) -> bytes:
        if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > _BODY_LIMIT:
                    raise ValueError("request body too large")
                parts.append(handler.rfile.read(size))
                handler.rfile.readline()
        length = int(handler.headers.get("Content-Length") or 0)
        if length > _BODY_LIMIT:
            raise ValueError("request body too large")
        return handler.rfile.read(length) if length else b""

    def _relay(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        with self._lock:
            self._active += 1
        try:
            self._relay_one(handler)
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def _refuse(self, handler: http.server.BaseHTTPRequestHandler, why: str) -> None:
        """Answer 400 without touching the upstream, and record it as the harness's fault."""
        target = handler.path[:200]
        with self._lock:
            self._other.append((handler.command, target, 400))
            if len(self._refused) < MAX_REFUSALS:
                self._refused.append(
                    f"request refused by the proxy: {handler.command} {target!r}: {why}"
                )
        handler.close_connection = True  # its body, if any, is never read
        with contextlib.suppress(OSError):
            self._reply_error(handler, 400, f"refused: {why}")

    def _relay_one(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        path = handler.path
        why = refusal(handler.command, path)
        if why:
            self._refuse(handler, why)
            return
        bare = path.split("?", 1)[0].rstrip("/")
        is_model = handler.command == "POST" and bare in MODEL_PATHS
        started = self.elapsed()
        try:
            body = self._read_body(handler)
        except (ValueError, OSError) as exc:
            self._reply_error(handler, 400, f"bad request body: {exc}")
            return
        stream = False
        if is_model:
            body, stream = self._prepare(body)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        headers["Accept-Encoding"] = "identity"  # so the counts can be read from the bytes
        if self.api_key:
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = f"Bearer {self.api_key}"
        record = RequestRecord(started_s=started, ended_s=started, status=0, stream=stream)
        try:
            self._forward(handler, path, body, headers, record)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            if not record.status:
                record.status = 502
                with contextlib.suppress(OSError):
                    self._reply_error(handler, 502, f"upstream failed: {record.error}")
            else:
                handler.close_connection = True  # the reply was cut off mid-way
        record.ended_s = self.elapsed()
        with self._lock:
            if is_model:
                self._records.append(record)
            else:
                self._other.append((handler.command, path, record.status))

    def _prepare(self, raw: bytes) -> tuple[bytes, bool]:
        """The model request as it goes upstream (rewritten, capped), and whether it streams."""
        try:
            body = json.loads(raw)
        except ValueError:
            return raw, False
        if not isinstance(body, dict):
            return raw, False
        with self._lock:
            self._transcript.append(
                {"at_s": round(self.elapsed(), 3), "messages": _bounded_messages(body)}
            )
        if self.rewrite is not None:
            body = self.rewrite(body)
        if self.max_tokens_cap is not None:
            body = cap_max_tokens(body, self.max_tokens_cap)
        return json.dumps(body).encode(), body.get("stream") is True

    def _forward(
        self,
        handler: http.server.BaseHTTPRequestHandler,
        path: str,
        body: bytes,
        headers: dict[str, str],
        record: RequestRecord,
    ) -> None:
        request = self._client.build_request(
            handler.command, upstream_url(self._base, path), headers=headers, content=body
        )
        try:
            response = self._client.send(request, stream=True)
        except STALE_CONNECTION_ERRORS:
            # A kept-alive connection the upstream had closed (llama.cpp closes one after each
            # streamed answer): no byte of an answer came, so sending again repeats nothing.
            response = self._client.send(request, stream=True)
        try:
            streaming = "text/event-stream" in response.headers.get("content-type", "")
            data = b"" if streaming else response.read()
            # From here on the harness has a status line: a later failure can only cut it off.
            record.status = response.status_code
            handler.send_response(response.status_code)
            for key, value in response.headers.items():
                if key.lower() not in _HOP:
                    handler.send_header(key, value)
            if streaming:
                record.stream = True
                self._pass_stream(handler, response.iter_raw(), record)
                return
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(data)
            handler.wfile.flush()
            if data[:1] == b"{":
                try:
                    payload = json.loads(data)
                except ValueError:
                    payload = None
                if isinstance(payload, dict):
                    counts = token_counts(payload)
                    (record.prompt_tokens, record.cached_tokens) = counts[:2]
                    record.completion_tokens, record.source = counts[2:]
        finally:
            response.close()

    def _pass_stream(
        self,
        handler: http.server.BaseHTTPRequestHandler,
        chunks: Iterator[bytes],
        record: RequestRecord,
    ) -> None:
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.flush()
        sse = _SSECounts()
        try:
            for chunk in chunks:
                if not chunk:
                    continue
                sse.feed(chunk)
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()  # each event reaches the harness as it comes
        finally:
            sse.close()
            counts = sse.counts()
            record.prompt_tokens, record.cached_tokens = counts[:2]
            record.completion_tokens, record.source = counts[2:]
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    def _reply_error(
        self, handler: http.server.BaseHTTPRequestHandler, status: int, message: str
    ) -> None:
        data = json.dumps({"error": {"message": message, "type": "benchloop_proxy"}}).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        if handler.close_connection:
            handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()


def socket_dir() -> Path:
    """A short private folder for the proxy's socket (a Unix socket path has ~100 bytes)."""
    return Path(tempfile.mkdtemp(prefix="bl-mx-"))
