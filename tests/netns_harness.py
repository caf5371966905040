"""Several "hosts" on one machine: Linux network namespaces joined by veth pairs to a bridge.

``Hosts(["server", "agent1", "agent2"])`` makes one namespace per host; the first holds a bridge at
``10.77.<n>.1/24`` and every other host gets ``10.77.<n>.<10+i>`` on a veth pair into it. Each host sees only its
own loopback and that private subnet, so a process started with ``hosts.popen("agent1", cmd)`` reaches the
server only through the link, like a second machine. Everything is created in namespaces this harness owns
(their names carry the pid) and deleted in ``close`` even when a test fails. Needs root (CAP_NET_ADMIN).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

SUBNET = 77  # 10.77.x.0/24: private space, unused by the host's own networks


def available() -> str | None:
    """None when namespaces can be made here, else why not (for a skip reason)."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"abprobe{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"`ip netns add` failed: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Hosts:
    """Namespaces named after ``names``; ``address(name)`` is that host's address on the private link."""

    def __init__(self, names: list[str], third_octet: int = 0) -> None:
        self.tag = f"ab{os.getpid() % 100000}"
        self.names = names
        self.prefix = f"10.{SUBNET}.{third_octet}"
        self.created: list[str] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def ns(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        i = self.names.index(name)
        return f"{self.prefix}.1" if i == 0 else f"{self.prefix}.{10 + i}"

    def _build(self) -> None:
        hub = self.ns(self.names[0])
        for name in self.names:
            _ip("netns", "add", self.ns(name))
            self.created.append(self.ns(name))
            _ip("-n", self.ns(name), "link", "set", "lo", "up")
        _ip("-n", hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", hub, "addr", "add", f"{self.address(self.names[0])}/24", "dev", "br0")
        _ip("-n", hub, "link", "set", "br0", "up")
        for i, name in enumerate(self.names[1:], start=1):
            inner, outer = f"eth{i}", f"veth{i}"
            _ip(
                "link",
                "add",
                inner,
                "netns",
                self.ns(name),
                "type",
                "veth",
                "peer",
                "name",
                outer,
                "netns",
                hub,
            )
            _ip("-n", self.ns(name), "addr", "add", f"{self.address(name)}/24", "dev", inner)
            _ip("-n", self.ns(name), "link", "set", inner, "up")
            _ip("-n", hub, "link", "set", outer, "master", "br0")
            _ip("-n", hub, "link", "set", outer, "up")

    def command(self, name: str, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(name), *cmd]

    def popen(self, name: str, cmd: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``cmd`` on host ``name`` in its own process group (so the test can end all of it)."""
        return subprocess.Popen(self.command(name, cmd), start_new_session=True, **kwargs)

    def run(self, name: str, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(name, cmd), **kwargs)

    def close(self) -> None:
        """Delete every namespace made (their veths and the bridge go with them); safe to call twice."""
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.created.clear()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
