"""Limits before auth on a real server: a body over its route's limit is 413 before it is read (an anonymous
64 MiB post to /api/v1/runners is refused from its headers), a chunked one is cut off at the limit, deep JSON
and a 5000-digit integer are 400 on every kind of route, and a stalled request is 503 after the time limit.
The database does not matter here (no row is written): SQLite only."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from service_fixtures import new_database, running_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    with running_server(new_database("sqlite", request, tmp), tmp, "--request-timeout", "3") as running:
        yield running


def _raw(server, head: str, body: bytes = b"", wait_s: float = 10.0) -> tuple[str, float]:
    """Send ``head`` (and ``body``) on a socket; the status line and how long the answer took."""
    parts = urlsplit(server.base_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait_s) as sock:
        start = time.monotonic()
        sock.sendall(head.encode() + b"\r\n" + body)
        answer = sock.recv(65536).decode("latin-1")
        return answer.split("\r\n", 1)[0], time.monotonic() - start


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"} and response.text.count("\n") <= 1
    return response.json()["error"]


@pytest.mark.parametrize(
    "method,path,size",
    [("POST", "/api/v1/runners", 64 * 1024 * 1024), ("POST", "/login", 65 * 1024),
     ("POST", "/api/v1/jobs/1/heartbeat", 65 * 1024), ("POST", "/api/v1/results", 9 * 1024 * 1024),
     ("POST", "/api/v1/jobs/claim", 1024 * 1024), ("PUT", "/api/v1/jobs/1/documents", 9 * 1024 * 1024)],
)  # fmt: skip
def test_a_declared_body_over_the_limit_is_413_before_the_body_is_read(server, method, path, size):
    head = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n")  # fmt: skip
    status, took = _raw(server, head)  # not one byte of the body is sent: the answer comes from the headers
    assert status.startswith("HTTP/1.1 413"), status
    assert took < 5


def test_a_chunked_body_over_the_limit_is_cut_off_with_413(server):
    def chunks():
        for _ in range(200):
            yield b"x" * 1024

    r = httpx.post(server.base_url + "/login", content=chunks(), timeout=30)
    assert "over the limit" in _error(r, 413)
    small = httpx.post(server.base_url + "/login", data={"token": "abk_nothing"}, timeout=30)
    assert small.status_code == 401  # under the limit: the login form's own answer


@pytest.mark.parametrize("path", ["/api/v1/results", "/api/v1/jobs/claim", "/api/v1/runners",
                                  "/api/v1/jobs/1/heartbeat", "/api/v1/jobs/1/documents"])  # fmt: skip
def test_deep_json_and_huge_integers_are_400_before_auth(server, path):
    method = "PUT" if path.endswith("/documents") else "POST"
    deep = "[" * 30_000 + "]" * 30_000
    r = httpx.request(method, server.base_url + path, content=deep, timeout=30,
                      headers={"Content-Type": "application/json"})  # fmt: skip
    assert "nests" in _error(r, 400)
    huge = '{"runner_id": ' + "9" * 5000 + ', "attempt": 1, "name": "x", "target": "cpu-local"}'
    r = httpx.request(method, server.base_url + path, content=huge, timeout=30,
                      headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.token}"})  # fmt: skip
    assert r.status_code == 400, r.text
    assert httpx.get(server.base_url + "/api/v1/health").status_code == 200


def test_a_stalled_body_is_503_after_the_request_time_limit(server):
    head = "POST /api/v1/results HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
    status, took = _raw(server, head, b'{"a": ', wait_s=30)
    assert status.startswith("HTTP/1.1 503"), status
    assert 2.5 < took < 20
