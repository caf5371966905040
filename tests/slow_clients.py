"""Slow clients (slowloris) against a results server, and the health endpoint's latency meanwhile.

Each slow client opens a connection and sends its request head one byte every ``trickle_s`` seconds, never
finishing it; meanwhile health probes (a fresh connection each, ``Connection: close``) are timed one after the
other. Also a script, to measure a server started by hand (the figures in docs/multihost.md):

    python tests/slow_clients.py 127.0.0.1 8080 --clients 1000 --probes 200
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from dataclasses import dataclass, field

HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: "


@dataclass
class Measure:
    latencies_s: list[float] = field(default_factory=list)  # of the answered probes
    failed: int = 0  # probes not answered 200 within their time-out
    opened: int = 0  # slow clients connected
    held_during_probes: int = 0  # slow clients still open when the probes ended
    closed_by_server: int = 0  # slow clients the server closed (EOF or reset) before the end

    def p99_ms(self) -> float:
        ordered = sorted(self.latencies_s)
        return 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else float("inf")


def allow_descriptors(n: int) -> None:
    """Raise this process's soft descriptor limit to at least ``n`` (as far as the hard limit allows)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (n if hard == resource.RLIM_INFINITY else min(n, hard), hard)
        )


async def _slow_client(
    host: str, port: int, trickle_s: float, m: Measure, alive: set[asyncio.StreamWriter]
) -> None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
    except (OSError, asyncio.TimeoutError):
        return
    m.opened += 1
    alive.add(writer)
    try:
        for i in range(1 << 30):
            writer.write(HEAD[i : i + 1] if i < len(HEAD) else b"a")
            try:
                await asyncio.wait_for(reader.read(1024), trickle_s)
            except asyncio.TimeoutError:
                continue
            break  # EOF, or an answer to a head never finished: the server let go of it
        m.closed_by_server += 1
    except OSError:
        m.closed_by_server += 1
    finally:
        alive.discard(writer)
        writer.close()


async def _probe(host: str, port: int, timeout_s: float) -> float | None:
    start = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        writer.write(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), timeout_s)
        writer.close()
    except (OSError, asyncio.TimeoutError):
        return None
    return time.perf_counter() - start if answer.startswith(b"HTTP/1.1 200") else None


async def measure(host: str, port: int, clients: int, probes: int, trickle_s: float = 1.0,
                  gap_s: float = 0.02, hold_s: float = 0.0, probe_timeout_s: float = 5.0) -> Measure:  # fmt: skip
    """Connect ``clients`` slow clients, time ``probes`` health probes, then keep the slow clients ``hold_s``
    longer (to see the server close them) before closing what is left."""
    allow_descriptors(clients + 256)
    m, alive = Measure(), set[asyncio.StreamWriter]()
    tasks = []
    for _ in range(clients):
        tasks.append(asyncio.create_task(_slow_client(host, port, trickle_s, m, alive)))
        await asyncio.sleep(0.0005)  # under the listen backlog
    deadline = time.monotonic() + 30
    while m.opened < clients and time.monotonic() < deadline and not all(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    for _ in range(probes):
        took = await _probe(host, port, probe_timeout_s)
        if took is None:
            m.failed += 1
        else:
            m.latencies_s.append(took)
        await asyncio.sleep(gap_s)
    m.held_during_probes = len(alive)
    deadline = time.monotonic() + hold_s
    while alive and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--trickle-s", type=float, default=5.0)
    parser.add_argument("--hold-s", type=float, default=0.0)
    args = parser.parse_args()
    m = asyncio.run(
        measure(args.host, args.port, args.clients, args.probes, args.trickle_s, hold_s=args.hold_s)
    )
    print(f"slow clients connected {m.opened}, still open after the probes {m.held_during_probes}, closed by the "
          f"server {m.closed_by_server}; health probes answered {len(m.latencies_s)} of {args.probes}, "
          f"p99 {m.p99_ms():.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
