"""How far the streaming client's arrival times (streams.SseConnection: the kernel's SO_TIMESTAMPNS receive
stamps) are from when the server sent each chunk, on loopback, with a reader that is on time and one that
is late before every read (a blocking callback once the data is there, as a busy event loop is).

A server thread writes ``--events`` SSE chunks ``--gap-ms`` apart on one keep-alive chunked answer and notes
``time.time_ns()`` just before each ``sendall``; the client reads them with SseConnection, late by a random
0..``--late-ms`` before each read. Per chunk: kernel time - send time (the stamp's error, loopback latency
included) and the loop's time (when the read returned) - send time, both on CLOCK_REALTIME, and each
gap's error against the server's own gap between its two sends. Prints one JSON line (µs percentiles).
The server thread shares the interpreter (and its GIL) with the reader, so its sends are late at times too;
only what reached the client is judged.

    python bench/kernel_timestamps.py --events 400 --gap-ms 10 --late-ms 8
"""

from __future__ import annotations

import argparse
import json
import random
import select
import socket
import threading
import time

import numpy as np

from accelbench.loadtests.streams import SseConnection


def serve(listener: socket.socket, n: int, gap_s: float, sent: list[int]) -> None:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    start = time.monotonic()
    for i in range(n):
        time.sleep(max(0.0, start + (i + 1) * gap_s - time.monotonic()))
        data = b'data: {"choices": [{"index": 0, "text": " w%d", "finish_reason": %s}]}\n\n' % (
            i,
            b'"length"' if i == n - 1 else b"null",
        )
        sent.append(time.time_ns())
        conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
    conn.sendall(b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n"))
    time.sleep(0.2)
    conn.close()


class LateConnection(SseConnection):
    """SseConnection late by a random 0..late_s before each read; notes the read's realtime on return."""

    def __init__(self, host: str, port: int, late_s: float) -> None:
        super().__init__(host, port, 10.0)
        self.late_s = late_s
        self.returned: dict[int, int] = {}  # a read's arrival time -> when it returned (perf_counter_ns)

    def _recv(self) -> memoryview:
        select.select([self.sock], [], [])  # the data is there; the loop gets to it late
        time.sleep(random.uniform(0, self.late_s))
        view = super()._recv()
        self.returned[self.arrived_ns] = time.perf_counter_ns()
        return view


def measure(events: int, gap_ms: float, late_ms: float) -> dict[str, object]:
    listener = socket.create_server(("127.0.0.1", 0))
    sent: list[int] = []
    server = threading.Thread(target=serve, args=(listener, events, gap_ms / 1000, sent), daemon=True)
    server.start()
    conn = LateConnection("127.0.0.1", listener.getsockname()[1], late_ms / 1000)
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    answer = conn.stream(request, "openai-completions")
    server.join()
    conn.close()
    offset = time.time_ns() - time.perf_counter_ns()  # perf_counter -> CLOCK_REALTIME (sub-µs error)
    times = np.array(answer.times_ns)
    kernel = times + offset - np.array(sent)
    returned = np.array([conn.returned[t] for t in answer.times_ns]) + offset
    loop = returned - np.array(sent)
    sent_gaps = np.diff(np.array(sent))
    gap_error = {
        "kernel": np.abs(np.diff(times) - sent_gaps) / 1000,
        "loop": np.abs(np.diff(returned) - sent_gaps) / 1000,
    }

    def pct(x: np.ndarray) -> dict[str, float]:
        return {f"p{q}": round(float(np.percentile(x, q)), 1) for q in (50, 90, 99)} | {
            "max": round(float(x.max()), 1)
        }

    return {
        "events": events,
        "tokens_read": len(answer.times_ns),
        "gap_ms": gap_ms,
        "late_ms": late_ms,
        "kernel_times": answer.kernel_times,
        "kernel_minus_send_us": pct(kernel / 1000),
        "loop_minus_send_us": pct(loop / 1000),
        # |measured gap - the server's own gap between its two sends|
        "gap_error_us": {k: pct(v) for k, v in gap_error.items()},
        "merged_events": int((np.diff(times) == 0).sum()),  # one read carried both (coalesced)
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=400)
    p.add_argument("--gap-ms", type=float, default=10.0)
    p.add_argument("--late-ms", type=float, default=8.0)
    a = p.parse_args()
    print(json.dumps(measure(a.events, a.gap_ms, a.late_ms)))


if __name__ == "__main__":
    main()
