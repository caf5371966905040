"""serving/http_client.py against a real HTTP server on a loopback port that answers as each route says:
Triton's routes, its error bodies, a body that is not JSON, a port that does not speak HTTP, a closed port."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from accelbench.errors import ServerError
from accelbench.serving.http_client import (
    HttpStatus,
    NotJson,
    TritonHttp,
    Unreachable,
    get_json,
    get_text,
    request,
)

ROUTES: dict[tuple[str, str], tuple[int, bytes]] = {
    ("GET", "/v2"): (200, b'{"name": "triton", "version": "2.59.0"}'),
    ("GET", "/v2/health/ready"): (200, b""),
    ("GET", "/v2/models/a%2Fb/ready"): (200, b""),
    ("GET", "/v2/models/a%2Fb/config"): (200, b'{"name": "a/b", "max_batch_size": 8}'),
    ("GET", "/v2/models/gone/ready"): (400, b'{"error": "Request for unknown model"}'),
    ("GET", "/v2/models/gone/config"): (400, b'{"error": "Request for unknown model: \'gone\'"}'),
    ("GET", "/v2/models/list/stats"): (200, b"[1, 2]"),
    ("POST", "/v2/repository/index"): (200, b'[{"name": "a/b", "state": "READY"}, "noise"]'),
    ("GET", "/text"): (200, b"not json"),
    ("GET", "/plain-error"): (500, b"it broke\n"),
}


class _Handler(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def _answer(self, method: str) -> None:
        if method == "POST":
            self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        status, body = ROUTES.get((method, self.path), (404, b'{"error": "no route"}'))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_triton_routes(url):
    triton = TritonHttp(url + "/")
    assert triton.ready() and triton.metadata()["version"] == "2.59.0"
    assert triton.model_ready("a/b") and triton.model_config("a/b")["max_batch_size"] == 8  # name quoted
    assert not triton.model_ready("gone") and triton.model_ready_status("gone") == 400
    assert triton.repository_index() == [{"name": "a/b", "state": "READY"}]
    assert _Handler.bodies[-1] == b"{}"


def test_an_error_answer_says_the_servers_own_message(url):
    with pytest.raises(HttpStatus) as err:
        TritonHttp(url).model_config("gone")
    assert str(err.value) == f"{url}/v2/models/gone/config: HTTP 400: Request for unknown model: 'gone'"
    assert err.value.status == 400 and err.value.reason == "Bad Request"
    with pytest.raises(HttpStatus, match=r"/plain-error: HTTP 500: it broke$"):
        get_text(url + "/plain-error")
    assert request(url + "/plain-error").status == 500  # request itself raises for no status


def test_answers_that_are_not_the_json_asked_for(url):
    assert get_text(url + "/text") == "not json"
    with pytest.raises(NotJson, match=r"/text: answer is not JSON$"):
        get_json(url + "/text")
    with pytest.raises(NotJson, match=r"/stats: answer is not a JSON object$"):
        TritonHttp(url).model_stats("list")


def test_no_server_is_one_line_naming_it():
    base = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(Unreachable) as err:
        get_json(base + "/v2")
    assert str(err.value).startswith(f"{base}/v2: unreachable (") and "\n" not in str(err.value)
    assert isinstance(err.value, ServerError) and err.value.exit_code == 4
    with pytest.raises(Unreachable, match=rf"^{base}: unreachable \("):  # the server, not the route
        TritonHttp(base).model_ready("m")
    with pytest.raises(Unreachable, match="unreachable"):
        TritonHttp("127.0.0.1:8000").ready()  # not a URL


def test_a_port_that_does_not_speak_http_is_unreachable():
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        with pytest.raises(Unreachable, match="unreachable"):
            request(f"http://127.0.0.1:{listener.getsockname()[1]}/v2", timeout_s=5)
    finally:
        listener.close()
