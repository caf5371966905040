"""Request framing (issue 40, HIGH 3): every request whose body length a proxy and this server could read two
ways is 400 and the connection closed, so a request smuggled behind it is never answered. The pure check on
a table of heads, then each case over a raw socket against a real ``accelbench server`` (framing comes before
any database: SQLite only)."""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

import pytest
from service_fixtures import new_database, running_server

from accelbench.service.framing import faulty_framing, request_head

SMUGGLED = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
POST = b"POST /login HTTP/1.1\r\nHost: x\r\n"
# (case, request); each head is refused whatever follows it
FAULTY = [
    ("length and chunked", POST + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("chunked and length", POST + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"),
    ("identical lengths", POST + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
    ("differing lengths", POST + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
    ("length list", POST + b"Content-Length: 5, 5\r\n\r\nhello"),
    ("plus length", POST + b"Content-Length: +5\r\n\r\nhello"),
    ("minus length", POST + b"Content-Length: -5\r\n\r\nhello"),
    ("hex length", POST + b"Content-Length: 0x5\r\n\r\nhello"),
    ("two numbers", POST + b"Content-Length: 5 0\r\n\r\nhello"),
    ("xchunked", POST + b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n"),
    ("chunked, identity", POST + b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"),
    ("two codings", POST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("obs-fold coding", POST + b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n"),
    ("obs-fold header", POST + b"X-Note: a\r\n\tb\r\nContent-Length: 5\r\n\r\nhello"),
    ("bare LF", b"POST /login HTTP/1.1\nHost: x\nContent-Length: 5\n\nhello"),
    ("space before colon", POST + b"Content-Length : 5\r\n\r\nhello"),
    ("NUL in a header", POST + b"X-Note: a\x00b\r\nContent-Length: 5\r\n\r\nhello"),
    ("HTTP/1.0 chunked", b"POST /login HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
]
BAD_CHUNKS = [  # a sound head, a chunk size h11 refuses
    ("hex chunk size", POST + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n"),
    ("plus chunk size", POST + b"Transfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n"),
]
SOUND = [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    POST + b"Content-Length: 5\r\n\r\n",
    POST + b"Transfer-Encoding: Chunked\r\n\r\n",
    POST + b"Content-Length:5\r\nX-Note: a\tb\r\n\r\n",
    b"GET / HTTP/1.0\r\nHost: x\r\n\r\n",
]


def _head(request: bytes) -> bytes:
    head = request_head(request)
    assert head is not None
    return head


@pytest.mark.parametrize(("case", "request_bytes"), FAULTY, ids=[c for c, _ in FAULTY])
def test_each_faulty_head_is_named(case, request_bytes):
    why = faulty_framing(_head(request_bytes))
    assert why and why.isascii() and "\n" not in why, case


@pytest.mark.parametrize("head", SOUND)
def test_sound_heads_pass(head):
    assert faulty_framing(_head(b"\r\n" + head + b"hello")) is None


def test_an_incomplete_head_waits():
    assert request_head(POST + b"Content-Length: 5\r\n") is None
    assert request_head(b"") is None


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("framing")
    with running_server(new_database("sqlite", request, tmp), tmp) as running:
        yield running


def _exchange(server, data: bytes) -> bytes:
    """Send ``data`` on one connection and read everything until the server closes it (or 10 s pass)."""
    parts = urlsplit(server.base_url)
    answer = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(data)
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
    return answer


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "request_bytes"), FAULTY + BAD_CHUNKS, ids=[c for c, _ in FAULTY + BAD_CHUNKS]
)
def test_faulty_framing_is_400_and_what_follows_is_never_answered(server, case, request_bytes):
    answer = _exchange(server, request_bytes + SMUGGLED)
    assert answer.startswith(b"HTTP/1.1 400 "), (case, answer[:200])
    assert answer.count(b"HTTP/1.1 ") == 1 and b'"ok"' not in answer, (case, answer)
    assert b"connection: close" in answer.lower()


@pytest.mark.slow
def test_pipelined_sound_requests_are_all_answered_and_a_faulty_one_among_them_ends_the_connection(server):
    health = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    sound = _exchange(server, health + last)
    assert sound.count(b"HTTP/1.1 200 ") == 2, sound
    faulty = _exchange(server, health + FAULTY[0][1] + SMUGGLED)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", faulty)
    assert statuses == [b"200", b"400"], faulty
