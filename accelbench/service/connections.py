"""Time limits on every phase of a connection, and a cap on how many are open (issue 50, item 3).

uvicorn's h11 protocol times out only an idle keep-alive connection, and only until its first byte: a client that
trickles its request head (slowloris) or its body one byte at a time holds a descriptor for as long as it likes,
and enough of them exhaust the process's descriptors, after which nobody is answered. Here:

- **head**: a request's head must be complete within ``head_timeout_s`` of the connection (or of the previous
  answer on a kept-alive one), however steadily its bytes come; else the connection is closed;
- **body**: a body that stops arriving for ``body_timeout_s`` closes the connection (the whole request, body
  included, is bounded by ``--request-timeout`` in ``limits.py``);
- **idle keep-alive**: uvicorn's ``timeout_keep_alive`` (``keep_alive_s``);
- **how many**: at most ``max_connections`` open at once, below the descriptor limit; a connection past the cap
  evicts the oldest one still waiting for its head (a slow client, or an idle kept-alive one), else it is closed
  at once. A client that sends its request promptly is therefore always served.

``raise_descriptor_limit`` lifts the soft RLIMIT_NOFILE to the hard one at start; ``connection_cap`` keeps a
reserve below it for the database, logs and report builds.
"""

from __future__ import annotations

import asyncio
import resource
import time
from dataclasses import dataclass
from typing import Any

import h11

from accelbench.service.errors import log
from accelbench.service.framing import GuardedH11Protocol

HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
KEEP_ALIVE_S = 5.0
MAX_SOFT_LIMIT = 1 << 20  # what "unlimited" is raised to
RESERVE_FRACTION = 0.1  # of the descriptor limit, kept for everything that is not a client connection
MIN_RESERVE = 64


@dataclass(frozen=True)
class ConnectionPolicy:
    head_timeout_s: float = HEAD_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    keep_alive_s: float = KEEP_ALIVE_S
    max_connections: int = 1000


def raise_descriptor_limit() -> int:
    """Raise the soft descriptor limit as far as the hard one allows; the soft limit in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = MAX_SOFT_LIMIT if hard == resource.RLIM_INFINITY else min(hard, MAX_SOFT_LIMIT)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return MAX_SOFT_LIMIT if soft == resource.RLIM_INFINITY else soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ValueError, OSError):
        return soft
    return want


def connection_cap(descriptors: int) -> int:
    """How many client connections fit below ``descriptors`` with a reserve for the rest of the process."""
    return max(1, descriptors - max(MIN_RESERVE, int(descriptors * RESERVE_FRACTION)))


class TimedH11Protocol(GuardedH11Protocol):
    """uvicorn's h11 protocol (with the framing guard) under a ``ConnectionPolicy``; ``uvicorn.Config(http=...)``
    takes a class, so the policy is bound with ``TimedH11Protocol.bound(policy)``."""

    policy = ConnectionPolicy()

    @classmethod
    def bound(cls, policy: ConnectionPolicy) -> type[TimedH11Protocol]:
        return type("BoundTimedH11Protocol", (cls,), {"policy": policy})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_since = time.monotonic()
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    def waiting_for_head(self) -> bool:
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn declares it
        full = len(self.connections) >= self.policy.max_connections and not self._evict_one()
        super().connection_made(transport)
        if full:  # nobody slow to drop: refuse this one, not everyone
            self._close("refused: the server is at its connection cap")
            return
        self._start_head_phase()

    def _evict_one(self) -> bool:
        slow = [c for c in self.connections if isinstance(c, TimedH11Protocol) and c.waiting_for_head()]
        if not slow:
            return False
        oldest = min(slow, key=lambda c: c._head_since)
        oldest._close("evicted: the server is at its connection cap")
        return True

    def _start_head_phase(self) -> None:
        self._cancel_timers()
        self._head_since = time.monotonic()
        self._head_timer = self.loop.call_later(self.policy.head_timeout_s, self._head_expired)

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def _head_expired(self) -> None:
        if self.waiting_for_head():
            self._close(f"no complete request head within {self.policy.head_timeout_s:g} s")

    def _body_expired(self) -> None:
        if self.conn.their_state is h11.SEND_BODY and not self.flow.read_paused:
            self._close(f"no body bytes for {self.policy.body_timeout_s:g} s")

    def _close(self, why: str) -> None:
        self._cancel_timers()
        # only a client that sent something: a kept-alive connection that is just idle is no news
        if self.conn.their_state is not h11.IDLE or self.conn.trailing_data[0]:
            log.info("closed the connection from %s: %s", self.client, why)
        self.connections.discard(self)  # now: an eviction must free its place before the next accept
        if not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_phase()

    def _follow_phase(self) -> None:
        if self.transport.is_closing() or self.waiting_for_head():
            return  # the head deadline keeps running from the phase's start, however often bytes come
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if self.conn.their_state is h11.SEND_BODY:
            self._body_timer = self.loop.call_later(self.policy.body_timeout_s, self._body_expired)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._start_head_phase()
            self._follow_phase()  # a pipelined request may already be in

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)
