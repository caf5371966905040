"""The load generator's Triton clients: requests already encoded (wire.py) go out as bytes.

HTTP: keep-alive HTTP/1.1 over plain sockets in connections.py's pool (the one the streaming users take
too; gevent-patched in Locust processes). A request is one
``sendall``; the answer is read as status line, headers and ``Content-Length`` bytes, nothing more. On the
same pre-built request this took about half the client CPU of geventhttpclient (103 vs 191 µs per request
on identity, bench/http_client_cost.py, 2-core VM). gRPC: a raw unary
call on a grpcio channel without serializers, so the pre-serialized ``ModelInferRequest`` bytes are sent
as they are and the answer comes back as bytes for wire.check_grpc.
"""

from __future__ import annotations

from accelbench.loadtests.connections import Pool, Stale, open_socket, parse_head
from accelbench.loadtests.wire import GRPC_INFER_METHOD, HttpAnswer

_RECV = 65536
_MAX_GRPC_MESSAGE = 2**31 - 1  # Triton's own limit (tritonclient sets the same)


class _Connection:
    """One keep-alive connection. Answers are read into one buffer per connection, grown to the largest
    answer seen: no per-answer allocation, zeroing or joining of chunks. An answer's body is a view of
    that buffer, valid until the connection's next exchange (the Agent checks it before sending again)."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = open_socket(host, port, timeout_s)
        self.used = False
        self.keep = True
        self.buf = bytearray(_RECV)

    def exchange(self, request: bytes) -> HttpAnswer:
        self.sock.sendall(request)
        try:
            answer = self._read()
        except _Closed:
            if self.used:  # closed while it sat idle: the pool sends again on a new one
                raise Stale("the server had closed the kept-alive connection") from None
            raise
        self.used = True
        return answer

    def _fill(self, got: int, need: int) -> int:
        """Receive until ``need`` bytes are in the buffer (at least one more when ``need`` is 0)."""
        if len(self.buf) < max(need, got + _RECV):
            # a new buffer, not a resize: a view of the old one may still be held
            bigger = bytearray(max(need, got + _RECV, 2 * len(self.buf)))
            bigger[:got] = memoryview(self.buf)[:got]
            self.buf = bigger
        view = memoryview(self.buf)
        while True:
            n = self.sock.recv_into(view[got:])
            if not n:
                if got:
                    raise ConnectionError("truncated answer")
                raise _Closed("the server closed the connection")
            got += n
            if got >= need:
                return got

    def _read(self) -> HttpAnswer:
        got, end = 0, -1
        while end < 0:
            got = self._fill(got, 0)
            end = self.buf.find(b"\r\n\r\n", 0, got)
        status, headers = parse_head(self.buf[:end])
        if "content-length" not in headers:
            raise ConnectionError(f"answer without Content-Length (headers {sorted(headers)})")
        start = end + 4
        stop = start + int(headers["content-length"])
        if got < stop:
            got = self._fill(got, stop)
        if got > stop:
            raise ConnectionError(
                f"{got - stop} bytes after the answer (one request at a time per connection)"
            )
        self.keep = headers.get("connection", "").lower() != "close"
        length = headers.get("inference-header-content-length")
        return HttpAnswer(
            status, int(length) if length is not None else None, memoryview(self.buf)[start:stop]
        )

    def close(self) -> None:
        self.sock.close()


class _Closed(ConnectionError):
    """The server closed a connection before answering (a kept-alive one may be closed when idle)."""


class HttpClient(Pool[_Connection]):
    """connections.Pool of keep-alive connections to one Triton (``host:port``); one per request in flight."""

    def __init__(self, address: str, timeout_s: float) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host.strip("[]") or "127.0.0.1", int(port or 80)
        self.timeout_s = timeout_s
        super().__init__(lambda: _Connection(self.host, self.port, self.timeout_s))

    def exchange(self, request: bytes) -> HttpAnswer:
        return self.use(lambda conn: conn.exchange(request))


class GrpcClient:
    """One channel (HTTP/2 multiplexes the requests in flight) and a raw ModelInfer call."""

    def __init__(self, target: str, timeout_s: float) -> None:
        import grpc

        self.channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", _MAX_GRPC_MESSAGE),
                ("grpc.max_receive_message_length", _MAX_GRPC_MESSAGE),
            ],
        )
        # no serializers: the request is already bytes and the answer stays bytes
        self.call = self.channel.unary_unary(GRPC_INFER_METHOD)
        self.timeout_s = timeout_s

    def exchange(self, request: bytes) -> bytes:
        reply: bytes = self.call(request, timeout=self.timeout_s)
        return reply

    def close(self) -> None:
        self.channel.close()
