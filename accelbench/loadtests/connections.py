"""The load generator's keep-alive HTTP/1.1 sockets: one pool for the request/response clients (clients.py,
``HttpClient``) and the streaming ones (streams.py, ``SseClient``), and the pieces both read answers with.

A pool holds one connection per request in flight (a user sends one request at a time on it). A request
on a kept-alive connection that the server had closed while it sat idle raises ``Stale`` from the
connection; the pool then sends it again, once, on a new connection. Any other failure closes the
connection and is raised: a request is never sent twice after the server may have seen it answered.
Plain sockets: gevent-patched in Locust processes, blocking in the caller's preflight.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Stale(ConnectionError):
    """A kept-alive connection the server had closed while idle, before it read this request."""


class Connection(Protocol):
    """What the pool needs of a connection: whether it may be used again, and how to close it."""

    keep: bool

    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)
T = TypeVar("T")


def open_socket(host: str, port: int, timeout_s: float) -> socket.socket:
    """A connected TCP socket without Nagle's delay (a request is one ``sendall``)."""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def parse_head(head: bytes | bytearray) -> tuple[int, dict[str, str]]:
    """Status and headers (names lower-cased) of an answer's head, without its final blank line."""
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return int(lines[0].split(" ", 2)[1]), headers


class Pool(Generic[C]):
    """Keep-alive connections to one server (``connect`` opens one), one per request in flight."""

    def __init__(self, connect: Callable[[], C]) -> None:
        self.connect = connect
        self.idle: list[C] = []

    def use(self, call: Callable[[C], T]) -> T:
        """``call`` on an idle connection (a new one when none is idle), kept for the next request when
        the answer allows; sent again once on a new connection when the idle one was ``Stale``."""
        conn = self.idle.pop() if self.idle else self.connect()
        try:
            answer = call(conn)
        except Stale:
            conn.close()
            conn = self.connect()
            try:
                answer = call(conn)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            conn.close()
            raise
        if conn.keep:
            self.idle.append(conn)
        else:
            conn.close()
        return answer

    def close(self) -> None:
        for conn in self.idle:
            conn.close()
        self.idle = []
