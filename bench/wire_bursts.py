"""Whether a streaming server's answers were bursts on the wire: a packet capture on loopback (an AF_PACKET
socket, root or CAP_NET_RAW; each packet stamped by the kernel, packets never merged), read as SSE events
per connection, judged with genstats' rule (an answer arrived in one burst when >= 90 % of its tokens came
less than 1 ms apart). Run it beside ``accelbench loadtest`` against the same server to settle whether the
bursts the load generator counts were the server's or its own.

    python bench/wire_bursts.py --port 8000 --seconds 30      (prints one JSON line)
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import time

from accelbench.loadtests.genstats import arrived_in_one_burst

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35


def capture(port: int, seconds: float) -> dict[int, list[tuple[int, bytes]]]:
    """Per client port: (kernel stamp ns, TCP payload) of each packet the server (``port``) sent."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(0.5)
    flows: dict[int, list[tuple[int, bytes]]] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            frame, ancillary, _flags, addr = sock.recvmsg(262144, socket.CMSG_SPACE(16))
        except TimeoutError:
            continue
        if addr[2] == socket.PACKET_OUTGOING:  # loopback shows each packet twice
            continue
        stamp = next((struct.unpack("ll", d[:16]) for lvl, k, d in ancillary if k == SO_TIMESTAMPNS), None)
        ip = frame[14:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        tcp = ip[ihl:]
        sport, dport = struct.unpack("!HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if sport == port and payload and stamp is not None:
            flows.setdefault(dport, []).append((stamp[0] * 1_000_000_000 + stamp[1], bytes(payload)))
    return flows


def answers(packets: list[tuple[int, bytes]]) -> list[tuple[list[int], list[int]]]:
    """Per answer on one connection: its token events' arrival times and one token each."""
    out: list[tuple[list[int], list[int]]] = []
    times: list[int] = []
    for stamp, payload in packets:
        for event in payload.split(b"\n\n"):
            carries = b'"text":' in event or b'"content":' in event
            if carries and b'"text":""' not in event and b'"content":""' not in event:
                times.append(stamp)
            if b"[DONE]" in event and times:
                out.append((times, [1] * len(times)))
                times = []
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=30.0)
    a = p.parse_args()
    found = [x for packets in capture(a.port, a.seconds).values() for x in answers(packets)]
    bursts = sum(arrived_in_one_burst(t, c) for t, c in found)
    gaps = sorted(g for t, _ in found for g in (b - a for a, b in zip(t, t[1:], strict=False)))
    p50 = gaps[len(gaps) // 2] / 1000 if gaps else None
    print(json.dumps({"answers": len(found), "burst_answers_on_the_wire": int(bursts), "gap_p50_us": p50}))


if __name__ == "__main__":
    main()
