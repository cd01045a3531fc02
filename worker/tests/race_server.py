"""A raw HTTP server that closes a kept-alive connection as a request comes in: llama.cpp's race."""

from __future__ import annotations

import socket
import threading


def race_server() -> tuple[socket.socket, list[int]]:
    """A raw HTTP server that answers once, then closes the kept-alive socket on the next
    request without replying: the race a pooled client hits with llama.cpp's idle timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    connections: list[int] = []
    body = b'{"data": [{"id": "m"}]}'
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(1)
            with conn:
                served = 0
                while True:
                    try:
                        data = conn.recv(65536)
                    except OSError:  # the client reset the connection
                        break
                    if not data:
                        break
                    if served == 1 and len(connections) == 1:
                        break  # drop the first connection on its second request
                    conn.sendall(reply)
                    served += 1

    threading.Thread(target=serve, daemon=True).start()
    return listener, connections
