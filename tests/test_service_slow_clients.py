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
