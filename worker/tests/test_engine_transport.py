"""When a request counts as written: the client's own part of sending it, on its thread's CPU
clock, so a wait inside the write (the server running on this core, or a server slow to read)
falls in the server's share; a request that had to connect is timed on the wall clock."""

from __future__ import annotations

import socket
import threading
import time

from worker.engine.transport import Transport

REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
BIG = "x" * (16 * 1024 * 1024)  # more than the socket buffers hold: the write waits for reads
READ_DELAY_S = 0.3


def _server(requests: int) -> tuple[socket.socket, threading.Thread]:
    """Answers `requests` requests on one kept-alive connection; it starts reading each POST's
    body only READ_DELAY_S after the request began to arrive."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            for _ in range(requests):
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536)
                header, _, body = head.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in header.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                if length > 1000:
                    time.sleep(READ_DELAY_S)
                while len(body) < length:
                    body += conn.recv(1 << 20)
                conn.sendall(REPLY)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def _post(transport: Transport, payload: str):
    with transport.stream("POST", "/v1/chat/completions", json={"p": payload}) as sent:
        assert sent.response.read() == b"{}"
    return sent


def test_a_wait_inside_the_write_is_not_the_client_s_time():
    listener, server = _server(requests=2)
    try:
        with Transport(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=10) as transport:
            # The first request opens the connection: its write is timed on the wall clock, so
            # the server's slowness to read counts in full.
            first = _post(transport, BIG)
            assert first.new_connection
            assert first.t_written - first.t_sent >= READ_DELAY_S * 0.9
            # On the open connection the same wait happens inside the write, where this thread
            # spends no CPU: the client's part ends long before the server had read the body.
            second = _post(transport, BIG)
            assert not second.new_connection
            assert second.t_sent < second.t_written < second.t_sent + READ_DELAY_S / 3
            assert second.t_headers - second.t_written >= READ_DELAY_S * 0.6
        server.join(timeout=10)
    finally:
        listener.close()
