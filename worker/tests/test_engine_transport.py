"""The transport sends a request in one write, and marks it written when the client's part ends."""

from __future__ import annotations

import socket
import threading
import time

import httpcore

from worker.engine.transport import Transport, _OneWriteBackend

REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def _listener() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    return listener


def test_a_request_is_held_until_the_answer_is_read_and_then_sent_whole():
    listener = _listener()
    backend = _OneWriteBackend(httpcore.SyncBackend())
    stream = backend.connect_tcp("127.0.0.1", listener.getsockname()[1], timeout=5)
    conn, _ = listener.accept()
    conn.settimeout(5)
    try:
        stream.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
        stream.write(b"hello")
        time.sleep(0.2)  # on loopback, bytes written would be here long before this
        conn.setblocking(False)
        try:
            early = conn.recv(65536)
        except BlockingIOError:
            early = b""
        assert early == b""  # nothing left the client before it started reading

        answer: list[bytes] = []
        reader = threading.Thread(target=lambda: answer.append(stream.read(65536, timeout=5)))
        reader.start()
        conn.setblocking(True)
        got = b""
        while not got.endswith(b"hello"):
            got += conn.recv(65536)
        conn.sendall(REPLY)
        reader.join(timeout=5)
        assert got == b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        assert answer == [REPLY]
    finally:
        stream.close()
        conn.close()
        listener.close()


def _one_shot_server(listener: socket.socket, delay_s: float) -> threading.Thread:
    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data or not data.endswith(b"{}"):
                data += conn.recv(65536)
            time.sleep(delay_s)
            conn.sendall(REPLY)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_the_written_mark_falls_between_sending_and_the_answer():
    """Through the real transport (httpx's own pool, its backend wrapped): the request is marked
    written after it was sent and well before a reply that came 100 ms later."""
    listener = _listener()
    server = _one_shot_server(listener, delay_s=0.1)
    try:
        with Transport(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=5) as transport:
            assert transport.one_write  # fails if a new httpx or httpcore moved its pool
            with transport.stream("POST", "/v1/chat/completions", json={}) as sent:
                assert sent.response.read() == b"{}"
        assert sent.t_written is not None and sent.t_headers is not None
        assert sent.t_sent < sent.t_written < sent.t_sent + 0.05
        assert sent.t_headers - sent.t_written >= 0.09
        server.join(timeout=5)
    finally:
        listener.close()
