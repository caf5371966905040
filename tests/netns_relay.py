"""A user-space link between network namespaces, with delay, jitter, loss and cuts (this kernel has no netem).

Each namespace holds a TUN device (``tun0``, its host's address on a private /24); this one process opens every
TUN (entering each namespace with setns(2) to do so), reads the IPv4 packets each host sends, and writes each
into its destination's TUN after the rules of both ends: the packet waits the sum of their delays (each
``delay_ms`` ± uniform ``jitter_ms``), is dropped with each end's ``loss`` probability, and is dropped whenever
either end is cut, also if it was already in flight when the cut began.

Run by ``netns_harness.Relay``: ``python netns_relay.py NAMESPACE=ADDRESS ...``; rules come on stdin, one JSON
object a line (``{"host": ADDRESS, "delay_ms": 50, "jitter_ms": 10, "loss": 0.02, "cut": false}``), each
answered ``ok`` on stdout once in force. It exits at end of input or on SIGTERM. Needs root.
"""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass

from netns_harness import inside

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000


@dataclass
class Rule:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    cut: bool = False

    def wait_s(self, rng: random.Random) -> float:
        return max(0.0, self.delay_ms + rng.uniform(-self.jitter_ms, self.jitter_ms)) / 1000


def open_tun(namespace: str, device: str = "tun0") -> int:
    """An fd of ``device`` in ``namespace`` (a persistent TUN made by ``ip tuntap add``)."""
    with inside(namespace):
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", device.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


def relay(ends: dict[bytes, int], seed: int = 50) -> None:
    rng = random.Random(seed)
    rules = {address: Rule() for address in ends}
    by_fd = {fd: address for address, fd in ends.items()}
    queue: list[tuple[float, int, bytes, bytes, bytes]] = []  # due, order, source, destination, packet
    order = 0
    pending = b""
    while True:
        now = time.monotonic()
        timeout = max(0.0, queue[0][0] - now) if queue else None
        ready, _, _ = select.select([0, *by_fd], [], [], timeout)
        for fd in ready:
            if fd == 0:
                chunk = os.read(0, 65536)
                if not chunk:
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    change = json.loads(line)
                    host = socket.inet_aton(change.pop("host"))
                    rules[host] = Rule(**{**rules[host].__dict__, **change})
                    print("ok", flush=True)
                continue
            for _ in range(64):  # drain what is there, a bounded batch per wake-up
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(packet) < 20 or packet[0] >> 4 != 4:
                    continue  # IPv4 only (the kernel's IPv6 chatter goes nowhere)
                source, destination = by_fd[fd], packet[16:20]
                if destination not in ends:
                    continue
                a, b = rules[source], rules[destination]
                if a.cut or b.cut or rng.random() < a.loss or rng.random() < b.loss:
                    continue
                order += 1
                due = time.monotonic() + a.wait_s(rng) + b.wait_s(rng)
                heapq.heappush(queue, (due, order, source, destination, packet))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, source, destination, packet = heapq.heappop(queue)
            if rules[source].cut or rules[destination].cut:
                continue  # cut while in flight
            with contextlib.suppress(OSError):  # the device's queue is full: a lost packet, as on a wire
                os.write(ends[destination], packet)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ends = {}
    for arg in sys.argv[1:]:
        namespace, address = arg.split("=")
        ends[socket.inet_aton(address)] = open_tun(namespace)
    print("ready", flush=True)
    relay(ends)


if __name__ == "__main__":
    main()
