"""One slow client host cannot take the results server down (issue 50, item 3): with 1,000 clients trickling
their request heads a byte a second, the health endpoint still answers every probe, under the descriptor limit
this shell hands down and under a service manager's 1,024; every slow connection is closed once its head is
``--head-timeout`` old, and the start line names the connection cap and the descriptor limit.

On 7bbfba2 the slow connections were held for as long as they trickled, and under 1,024 descriptors 1,500 of them
left 0 of 30 probes answered. The p99 is printed, not asserted tightly: this machine's two cores are shared (the
figures measured alone are in docs/multihost.md)."""

from __future__ import annotations

import asyncio
import re
import time
from urllib.parse import urlsplit

import pytest
from service_fixtures import running_server
from slow_clients import measure

pytestmark = pytest.mark.slow
HEAD_TIMEOUT_S = 6.0
CLIENTS = 1000


@pytest.mark.parametrize("descriptors", [None, 1024], ids=["inherited-limit", "1024-descriptors"])
def test_health_answers_while_a_thousand_slow_clients_trickle_their_heads(descriptors, tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    with running_server(
        db, tmp_path, "--head-timeout", str(HEAD_TIMEOUT_S), descriptors=descriptors
    ) as server:
        start = re.search(r"at most (\d+) connections, descriptor limit (\d+)", server.log.read_text())
        assert start, server.log.read_text()
        cap, limit = int(start[1]), int(start[2])
        assert cap < limit
        if descriptors:
            assert limit == descriptors  # the hard limit is 1,024 too: nothing to raise it to
        url = urlsplit(server.base_url)
        m = asyncio.run(measure(url.hostname, url.port, CLIENTS, probes=100, trickle_s=1.0,
                                hold_s=HEAD_TIMEOUT_S + 6))  # fmt: skip
        print(f"descriptors {limit}, cap {cap}: {m.opened} slow clients, {m.held_during_probes} held during "
              f"the probes; health p99 {m.p99_ms():.0f} ms over {len(m.latencies_s)} probes")  # fmt: skip
        assert m.failed == 0, f"{m.failed} of 100 health probes unanswered"
        assert m.held_during_probes >= min(CLIENTS, cap) - 110  # they were there (each probe may evict one)
        assert m.closed_by_server == m.opened, "a slow client was held past --head-timeout"
        assert m.p99_ms() < 2000  # loose: shared cores; measured alone it is ~10 ms (docs/multihost.md)
        assert server.proc.poll() is None


async def _closed_after(host: str, port: int, send: bytes, limit_s: float) -> float | None:
    """Seconds until the server closes a connection that sent ``send`` and then nothing; None: still open after
    ``limit_s`` (an answer read on the way does not count as closing)."""
    reader, writer = await asyncio.open_connection(host, port)
    start = time.monotonic()
    writer.write(send)
    try:
        while time.monotonic() - start < limit_s:
            chunk = await asyncio.wait_for(reader.read(65536), limit_s)
            if not chunk:
                return time.monotonic() - start
    except (asyncio.TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()
    return None


def test_every_connection_phase_is_timed_out(tmp_path):
    """Nothing sent, half a head, a body that stops, an idle kept-alive connection: each is closed by the
    server within its limit (--head-timeout 2, --body-timeout 1, keep-alive 5 s), none held for ever."""
    db = f"sqlite:///{tmp_path / 'results.db'}"
    with running_server(db, tmp_path, "--head-timeout", "2", "--body-timeout", "1") as server:
        url = urlsplit(server.base_url)
        body = b"POST /api/v1/results HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        idle = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n"

        async def all_phases() -> list[float | None]:
            sends = (b"", b"GET /api/v1/health HTTP/1.1\r\nHost:", body, idle)
            return await asyncio.gather(*(_closed_after(url.hostname, url.port, s, 20) for s in sends))

        nothing, half_head, stalled_body, kept_alive = asyncio.run(all_phases())
        assert nothing is not None and half_head is not None, (nothing, half_head)
        assert stalled_body is not None and kept_alive is not None, (stalled_body, kept_alive)
        print(f"closed after: nothing {nothing:.1f} s, half a head {half_head:.1f} s, a stalled body "
              f"{stalled_body:.1f} s, idle keep-alive {kept_alive:.1f} s")  # fmt: skip
