"""The load generator's raw HTTP client against a real socket server that answers as told: in pieces,
larger than the client's first buffer, closing kept-alive connections, truncating, or omitting headers."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from accelbench.loadtests.clients import _RECV, HttpClient

REQUEST = b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"


def _answer(body: bytes, *, header_length: int | None = None, extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n"
    if header_length is not None:
        head += f"Inference-Header-Content-Length: {header_length}\r\n"
    return (head + extra + "\r\n").encode() + body


class Server:
    """Accepts connections; for each request read, calls ``script(n, conn)`` (n counts requests over all
    connections), which writes the answer (or closes)."""

    def __init__(self, script) -> None:
        self.script, self.requests, self.connections = script, 0, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                got = b""
                while len(got) < len(REQUEST):
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    got += chunk
                assert got == REQUEST
                self.requests += 1
                if self.script(self.requests, conn) == "close":
                    return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve():
    servers = []

    def start(script) -> tuple[Server, HttpClient]:
        server = Server(script)
        servers.append(server)
        return server, HttpClient(f"127.0.0.1:{server.port}", timeout_s=5.0)

    yield start
    for server in servers:
        server.close()


def test_answers_in_pieces_and_larger_than_the_first_buffer(serve) -> None:
    bodies = [b'{"outputs":[]}' + bytes(range(256)) * (3 * _RECV // 256 + 7), b'{"a":1}xyz']

    def script(n, conn):
        raw = _answer(bodies[(n - 1) % 2], header_length=14 if n % 2 else 7)
        cut = [0, 20, 45, 46, len(raw) // 2, len(raw)]  # the header block itself arrives split
        for a, b in zip(cut, cut[1:], strict=False):
            conn.sendall(raw[a:b])
            time.sleep(0.002)

    server, client = serve(script)
    for n in range(4):
        answer = client.exchange(REQUEST)
        assert answer.status == 200
        assert bytes(answer.body) == bodies[n % 2]
        assert answer.header_length == (14 if n % 2 == 0 else 7)
    assert server.connections == 1  # kept alive throughout


def test_an_idle_connection_the_server_closed_is_retried_once_on_a_new_one(serve) -> None:
    def script(n, conn):
        conn.sendall(_answer(b"ok"))
        return "close" if n == 1 else None  # closes after its answer, without saying so

    server, client = serve(script)
    assert bytes(client.exchange(REQUEST).body) == b"ok"
    time.sleep(0.05)
    assert bytes(client.exchange(REQUEST).body) == b"ok"
    assert server.connections == 2 and server.requests == 2


def test_connection_close_is_honoured(serve) -> None:
    def script(n, conn):
        conn.sendall(_answer(b"ok", extra="Connection: close\r\n"))
        return "close"

    server, client = serve(script)
    for _ in range(2):
        assert bytes(client.exchange(REQUEST).body) == b"ok"
    assert server.connections == 2 and client.idle == []


def test_a_truncated_answer_fails_and_is_not_resent(serve) -> None:
    def script(n, conn):
        conn.sendall(_answer(b"0123456789")[:-4])
        return "close"

    server, client = serve(script)
    with pytest.raises(ConnectionError, match="truncated answer"):
        client.exchange(REQUEST)
    assert server.requests == 1 and client.idle == []


def test_a_first_request_refused_by_a_closing_server_is_not_resent(serve) -> None:
    server, client = serve(lambda n, conn: "close")
    with pytest.raises(ConnectionError, match="closed the connection"):
        client.exchange(REQUEST)
    assert server.requests == 1


def test_an_answer_without_content_length_is_an_error(serve) -> None:
    server, client = serve(lambda n, conn: conn.sendall(b"HTTP/1.1 200 OK\r\nX: y\r\n\r\nbody"))
    with pytest.raises(ConnectionError, match="without Content-Length"):
        client.exchange(REQUEST)


def test_a_silent_server_times_out(serve) -> None:
    server, _ = serve(lambda n, conn: time.sleep(1.0))
    client = HttpClient(f"127.0.0.1:{server.port}", timeout_s=0.2)
    with pytest.raises(TimeoutError):
        client.exchange(REQUEST)
