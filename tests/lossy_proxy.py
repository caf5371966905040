"""An HTTP proxy on 127.0.0.1 in front of a real server that loses or delays the answers of chosen routes.

``LossyProxy(upstream)`` forwards every request to ``upstream`` (the real server: the request is served and
committed there) and then, for a request matching a rule, does what the rule says with the answer:

    drop(METHOD, PATH_REGEX, times=1)   close the connection without a byte of the answer (the client sees
                                        "server disconnected"), for the next ``times`` matching requests
    delay(METHOD, PATH_REGEX, s)        hold every matching answer ``s`` seconds before sending it

``seen`` records (monotonic time the request arrived, method, path) and ``answered`` (monotonic time the
answer left, method, path): what a test checks a schedule against. A lost answer is deterministic this way:
the server did the work, the client never hears of it (issue 50).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


@dataclass
class Rule:
    method: str
    path: re.Pattern[str]
    drop_left: int = 0
    delay_s: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and self.path.search(path) is not None


class LossyProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules: list[Rule] = []
        self.seen: list[tuple[float, str, str]] = []
        self.answered: list[tuple[float, str, str]] = []
        self.dropped = 0
        self.lock = threading.Lock()
        self.http = httpx.Client(timeout=120)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                proxy.handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="lossy-proxy")

    def __enter__(self) -> LossyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.http.close()

    def drop(self, method: str, path: str, times: int = 1) -> None:
        with self.lock:
            self.rules.append(Rule(method, re.compile(path), drop_left=times))

    def delay(self, method: str, path: str, seconds: float) -> None:
        with self.lock:
            self.rules.append(Rule(method, re.compile(path), delay_s=seconds))

    def _verdict(self, method: str, path: str) -> tuple[bool, float]:
        """(drop this answer, delay before sending it)."""
        with self.lock:
            self.seen.append((time.monotonic(), method, path))
            drop, delay = False, 0.0
            for rule in self.rules:
                if not rule.matches(method, path):
                    continue
                if rule.drop_left > 0 and not drop:
                    rule.drop_left -= 1
                    drop = True
                delay = max(delay, rule.delay_s)
            return drop, delay

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        drop, delay = self._verdict(h.command, h.path)
        headers = {
            k: v for k, v in h.headers.items() if k.lower() not in ("host", "content-length", "connection")
        }
        answer = self.http.request(h.command, self.upstream + h.path, content=body, headers=headers)
        if drop:  # the server did it; its answer is lost on the way
            with self.lock:
                self.dropped += 1
            h.close_connection = True
            return
        if delay:
            time.sleep(delay)
        data = answer.content
        h.send_response(answer.status_code)
        for key, value in answer.headers.items():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                h.send_header(key, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()
        with self.lock:
            self.answered.append((time.monotonic(), h.command, h.path))
