"""The recording proxy relays only the endpoint's own API (issue 31, defect 1): raw requests from
a socket, as a caged program can send them, at a real proxy in front of a real local server, with
a second real local server (another service on the host's loopback) that must hear nothing."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from worker.engine.matrix import cage
from worker.engine.matrix.programs import PROGRAMS
from worker.engine.matrix.proxy import RecordingProxy
from worker.engine.matrix.runner import run_program
from worker.engine.matrix.spec import Endpoint, HarnessTask, Invocation, ProgramResult
from worker.engine.matrix.suite import classify
from worker.tests.llm_server import require_harness


@dataclass
class Service:
    """A real HTTP server on loopback that notes every request line it gets."""

    server: http.server.ThreadingHTTPServer
    seen: list[tuple[str, str]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.server.server_address[1]


def _service() -> Service:
    service: Service

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            service.seen.append((self.command, self.path))
            if self.path.split("?", 1)[0].endswith("/chat/completions"):
                body = {
                    "choices": [{"message": {"role": "assistant", "content": "hi"}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1},
                }
            else:
                body = {"data": [{"id": "m"}], "secret": "internal"}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_CONNECT = _answer

    service = Service(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler))
    threading.Thread(target=service.server.serve_forever, daemon=True).start()
    return service


@pytest.fixture
def services() -> Iterator[tuple[Service, Service]]:
    """The endpoint, and another service on the same loopback (the site's /healthz, a secret)."""
    endpoint, other = _service(), _service()
    try:
        yield endpoint, other
    finally:
        for service in (endpoint, other):
            service.server.shutdown()
            service.server.server_close()


def _raw(port: int, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as bytes on a new connection; the status and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head, "the proxy closed the connection without an answer (its handler crashed)"
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(head.split(b" ", 2)[1]), body


HOSTILE_TARGETS = [
    # The upstream URL became userinfo: http://127.0.0.1:<up>@127.0.0.1:<other>/x
    "@127.0.0.1:{other}/x",
    # Absolute form: crashed the handler with httpx.InvalidURL.
    "http://127.0.0.1:{other}/x",
    "http://127.0.0.1:{other}/v1/models",
    "//127.0.0.1:{other}/v1/models",
    "127.0.0.1:{other}",
    "*",
    "v1/models",
]


@pytest.mark.parametrize("target", HOSTILE_TARGETS)
def test_a_target_not_in_origin_form_is_refused_and_reaches_no_host(services, target):
    endpoint, other = services
    target = target.format(other=other.port)
    with RecordingProxy(f"http://127.0.0.1:{endpoint.port}/v1") as proxy:
        assert proxy.port is not None
        request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        status, body = _raw(proxy.port, request)
        # The proxy still serves the next request: nothing crashed.
        assert httpx.get(f"{proxy.tcp_url}/models", timeout=10).status_code == 200
    assert status == 400, body
    assert json.loads(body)["error"]["message"].startswith("refused:")
    assert other.seen == []
    assert endpoint.seen == [("GET", "/v1/models")]
    (refused,) = proxy.refused
    assert refused.startswith("request refused by the proxy: GET ")
    assert proxy.other_requests[0][2] == 400
    assert proxy.records == []


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/healthz"),
        ("GET", "/v1/../healthz"),
        ("GET", "/v1/models/../../healthz"),
        ("GET", "/v1/models/%2e%2e/secret"),
        ("GET", "/admin/"),
        ("POST", "/api/generate"),  # Ollama's own generation: past the records
        ("POST", "/v1/embeddings"),
        ("DELETE", "/v1/chat/completions"),
        ("PUT", "/v1/models"),
        ("PATCH", "/v1/chat/completions"),
        ("OPTIONS", "/v1/models"),
        ("HEAD", "/v1/models"),
        ("TRACE", "/v1/models"),
        ("CONNECT", "127.0.0.1:{other}"),
        ("POST", "/v1/models"),
    ],
)
def test_only_the_endpoints_api_paths_and_methods_are_relayed(services, method, path):
    endpoint, other = services
    path = path.format(other=other.port)
    body = b'{"model": "m"}' if method in ("POST", "PUT", "PATCH") else b""
    with RecordingProxy(f"http://127.0.0.1:{endpoint.port}/v1") as proxy:
        assert proxy.port is not None
        request = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        status, _ = _raw(proxy.port, request)
    assert status == 400
    assert endpoint.seen == [] and other.seen == []
    assert proxy.other_requests == [(method, path, 400)]
    assert proxy.refused and method in proxy.refused[0]


def test_the_model_requests_and_metadata_are_relayed_onto_the_upstreams_own_path(services):
    """The upstream path is joined, not concatenated: an endpoint behind a path prefix keeps it,
    and the upstream's host is the only host asked."""
    endpoint, other = services
    upstream = f"http://127.0.0.1:{endpoint.port}/prefix/v1"
    with RecordingProxy(upstream) as proxy:
        client = httpx.Client(base_url=proxy.tcp_url, timeout=10)
        assert client.get("/models").json()["data"] == [{"id": "m"}]
        assert client.get("/models/org/model-7b:q4").status_code == 200
        reply = client.post(
            "/chat/completions?trace=@127.0.0.1:1",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
        )
        assert reply.status_code == 200
        client.close()
    assert endpoint.seen == [
        ("GET", "/prefix/v1/models"),
        ("GET", "/prefix/v1/models/org/model-7b:q4"),
        ("POST", "/prefix/v1/chat/completions?trace=@127.0.0.1:1"),
    ]
    assert other.seen == [] and proxy.refused == []
    (record,) = proxy.records
    assert (record.status, record.prompt_tokens, record.completion_tokens) == (200, 5, 1)


def test_the_cages_unix_socket_refuses_the_same(services, tmp_path: Path):
    """The harness reaches the proxy through its Unix socket (the cage's forwarder)."""
    endpoint, other = services
    path = tmp_path / "proxy.sock"
    upstream = f"http://127.0.0.1:{endpoint.port}/v1"
    with RecordingProxy(upstream, unix_path=path) as proxy, socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(path))
        conn.sendall(f"GET @127.0.0.1:{other.port}/x HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = conn.recv(65536)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert other.seen == [] and endpoint.seen == []
    assert len(proxy.refused) == 1


CAGE_PROBE = """
import socket
def ask(target):
    with socket.create_connection(("127.0.0.1", PORT), timeout=10) as conn:
        head = f"GET {target} HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n"
        conn.sendall(head.encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data.split(b" ", 2)[1].decode() if data else "no answer"
print(ask("@127.0.0.1:OTHER/x"), ask("http://127.0.0.1:OTHER/x"), ask("/v1/models"))
"""


class _CageProbe:
    """A stand-in adapter: the harness install's own python3 runs ``code`` in the cage."""

    spec = PROGRAMS["mini-swe-agent"]

    def __init__(self, code: str) -> None:
        self.code = code

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        return Invocation(argv=["python3", "-c", self.code])

    def format_failures(self, result: ProgramResult) -> list[str]:
        return []


def test_from_inside_the_cage_the_proxy_reaches_no_other_service(services, tmp_path: Path):
    """The caged program's only way out is the proxy: a hostile target gets a 400 and is
    recorded as the harness's fault (a denial), and the host's other service hears nothing."""
    require_harness(_CageProbe.spec)
    endpoint, other = services
    code = CAGE_PROBE.replace("PORT", str(cage.FORWARD_PORT)).replace("OTHER", str(other.port))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = run_program(
        _CageProbe(code),
        HarnessTask("probe", "probe the proxy", ()),
        workspace,
        f"http://127.0.0.1:{endpoint.port}/v1",
        "m",
        max_tokens_cap=8,
        timeout_s=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["400", "400", "200"]
    assert other.seen == [] and endpoint.seen == [("GET", "/v1/models")]
    assert [d.split(":", 1)[0] for d in result.denials[:2]] == ["request refused by the proxy"] * 2
    assert classify(result, False, []) == ("sandbox", result.denials[0])
