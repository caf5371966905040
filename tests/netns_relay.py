"""A user-space link between network namespaces, with delay, jitter, loss and cuts (this kernel has no netem).

Each namespace holds a TUN device (``tun0``, its host's address on a private /24); this one process opens every
TUN (entering each namespace with setns(2) to do so), reads the IPv4 packets each host sends, and writes each
into its destination's TUN after the rules of both ends: the packet waits the sum of their delays (each
``delay_ms`` ± uniform ``jitter_ms``), is dropped with each end's ``loss`` probability, and is dropped whenever
either end is cut, also if it was already in flight when the cut began. ``lose_answer`` (a regex) loses the
answer to one request: the next TCP payload a host sends that matches it marks its connection, and every packet
with a payload coming back on that connection is dropped (the request arrives, its answer never does).

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
import re
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
    lose_answer: str = ""  # a regex: the answer to the next request this host sends that matches it is lost

    def wait_s(self, rng: random.Random) -> float:
        return max(0.0, self.delay_ms + rng.uniform(-self.jitter_ms, self.jitter_ms)) / 1000


def tcp_flow(packet: bytes) -> tuple[bytes, bytes] | None:
    """(source address+port, destination address+port) and nothing else of a TCP packet with a payload."""
    ihl = (packet[0] & 0x0F) * 4
    if packet[9] != socket.IPPROTO_TCP or len(packet) < ihl + 20:
        return None
    total = struct.unpack("!H", packet[2:4])[0]
    if total <= ihl + (packet[ihl + 12] >> 4) * 4:
        return None  # no payload: a handshake or an acknowledgement
    return packet[12:16] + packet[ihl : ihl + 2], packet[16:20] + packet[ihl + 2 : ihl + 4]


def tcp_payload(packet: bytes) -> bytes:
    ihl = (packet[0] & 0x0F) * 4
    return packet[ihl + (packet[ihl + 12] >> 4) * 4 :]


def open_tun(namespace: str, device: str = "tun0") -> int:
    """An fd of ``device`` in ``namespace`` (a persistent TUN made by ``ip tuntap add``)."""
    with inside(namespace):
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", device.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


class Relay:
    """Moves packets between the TUN devices ``ends`` (address -> fd) after each end's ``Rule``."""

    def __init__(self, ends: dict[bytes, int], seed: int = 50) -> None:
        self.ends, self.rng = ends, random.Random(seed)
        self.rules = {address: Rule() for address in ends}
        self.by_fd = {fd: address for address, fd in ends.items()}
        self.queue: list[
            tuple[float, int, bytes, bytes, bytes]
        ] = []  # due, order, source, destination, packet
        self.order = 0
        self.silenced: set[tuple[bytes, bytes]] = (
            set()
        )  # (server end, client end) of flows whose answers are lost
        self.pending = b""

    def command(self) -> bool:
        """Apply the rules that came on stdin; False at its end."""
        chunk = os.read(0, 65536)
        if not chunk:
            return False
        self.pending += chunk
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            change = json.loads(line)
            host = socket.inet_aton(change.pop("host"))
            self.rules[host] = Rule(**{**self.rules[host].__dict__, **change})
            print("ok", flush=True)
        return True

    def take(self, fd: int) -> None:
        for _ in range(64):  # what is there, a bounded batch per wake-up
            try:
                packet = os.read(fd, 65536)
            except BlockingIOError:
                return
            if len(packet) >= 20 and packet[0] >> 4 == 4 and packet[16:20] in self.ends:
                self.route(self.by_fd[fd], packet)  # IPv4 only: the kernel's IPv6 chatter goes nowhere

    def route(self, source: bytes, packet: bytes) -> None:
        destination = packet[16:20]
        a, b = self.rules[source], self.rules[destination]
        if a.cut or b.cut or self.rng.random() < a.loss or self.rng.random() < b.loss:
            return
        flow = tcp_flow(packet)
        if flow and a.lose_answer and re.match(a.lose_answer.encode(), tcp_payload(packet)):
            self.silenced.add((flow[1], flow[0]))
            a.lose_answer = ""  # once
        if flow and flow in self.silenced:
            return  # the answer on a flow whose request the rule matched
        self.order += 1
        due = time.monotonic() + a.wait_s(self.rng) + b.wait_s(self.rng)
        heapq.heappush(self.queue, (due, self.order, source, destination, packet))

    def deliver(self) -> None:
        now = time.monotonic()
        while self.queue and self.queue[0][0] <= now:
            _, _, source, destination, packet = heapq.heappop(self.queue)
            if self.rules[source].cut or self.rules[destination].cut:
                continue  # cut while in flight
            with contextlib.suppress(OSError):  # the device's queue is full: a lost packet, as on a wire
                os.write(self.ends[destination], packet)

    def run(self) -> None:
        while True:
            timeout = max(0.0, self.queue[0][0] - time.monotonic()) if self.queue else None
            ready, _, _ = select.select([0, *self.by_fd], [], [], timeout)
            for fd in ready:
                if fd == 0 and not self.command():
                    return
                if fd != 0:
                    self.take(fd)
            self.deliver()


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ends = {}
    for arg in sys.argv[1:]:
        namespace, address = arg.split("=")
        ends[socket.inet_aton(address)] = open_tun(namespace)
    print("ready", flush=True)
    Relay(ends).run()


if __name__ == "__main__":
    main()
