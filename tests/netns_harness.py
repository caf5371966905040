"""Several "hosts" on one machine: Linux network namespaces joined by veth pairs to a bridge.

``Hosts(["server", "agent1", "agent2"])`` makes one namespace per host; the first holds a bridge at
``10.77.<n>.1/24`` and every other host gets ``10.77.<n>.<10+i>`` on a veth pair into it. Each host sees only its
own loopback and that private subnet, so a process started with ``hosts.popen("agent1", cmd)`` reaches the
server only through the link, like a second machine. Everything is created in namespaces this harness owns
(their names carry the pid) and deleted in ``close`` even when a test fails. Needs root (CAP_NET_ADMIN).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SUBNET = 77  # 10.77.x.0/24: private space, unused by the host's own networks


def available() -> str | None:
    """None when namespaces can be made here, else why not (for a skip reason)."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun (the relay's TUN devices)"
    probe = f"abprobe{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"`ip netns add` failed: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


CLONE_NEWNET = 0x40000000
PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))


@contextlib.contextmanager
def inside(namespace: str) -> Iterator[None]:
    """Run the calling thread in ``namespace`` (setns(2)): sockets it opens meanwhile belong there, and keep
    working from anywhere afterwards. Other threads stay where they are."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(there, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {namespace}")
        yield
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(home)
        os.close(there)


def require() -> None:
    """Skip a test when namespaces cannot be made here, except in CI (CI=true or ACCELBENCH_REQUIRE_NETNS, which
    .ci/run sets): there it fails, so a runner without root or iproute2 cannot pass the network tests silently."""
    import pytest

    why = available()
    if why is None:
        return
    if os.environ.get("CI") == "true" or os.environ.get("ACCELBENCH_REQUIRE_NETNS"):
        pytest.fail(f"network namespaces are required here (CI) but cannot be made: {why}")
    pytest.skip(f"no network namespaces here: {why}")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Hosts:
    """Namespaces named after ``names``; ``address(name)`` is that host's address on the private link."""

    def __init__(self, names: list[str], third_octet: int = 0) -> None:
        self.tag = f"ab{os.getpid() % 100000}n{third_octet}"  # two sets at once (module fixtures) stay apart
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

    def inside(self, name: str) -> contextlib.AbstractContextManager[None]:
        """``with hosts.inside("admin"): httpx.get(...)``: this thread's connections made from host ``name``."""
        return inside(self.ns(name))

    def start_postgres(self, name: str, base: Path) -> tuple[str, list[str]]:
        """A throwaway PostgreSQL on host ``name``'s own loopback (run as the postgres user); its URL there and
        the command that stops it."""
        bindir = PG_BIN[-1].parent
        data = base / "pg"
        shutil.chown(base, "postgres")
        as_pg = ["runuser", "-u", "postgres", "--"]
        env = {**os.environ, "LC_ALL": "C.UTF-8"}
        subprocess.run([*as_pg, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                        "--no-sync"], check=True, capture_output=True, env=env)  # fmt: skip
        opts = f"-k {base} -h 127.0.0.1 -p 5432 -c fsync=off"
        self.run(name, [*as_pg, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-l",
                        str(base / "pg.log"), "start"], check=True, capture_output=True, env=env)  # fmt: skip
        self.run(name, [*as_pg, str(bindir / "createdb"), "-h", "127.0.0.1", "-U", "postgres", "results"],
                 check=True, capture_output=True)  # fmt: skip
        stop = [*as_pg, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
        return "postgresql+psycopg://postgres@127.0.0.1:5432/results", stop

    def pids(self) -> dict[str, list[int]]:
        """The processes still running on each host (``ip netns pids``)."""
        found = {}
        for name in self.names:
            out = subprocess.run(
                ["ip", "netns", "pids", self.ns(name)], capture_output=True, text=True
            ).stdout
            found[name] = [int(p) for p in out.split()]
        return found

    def close(self) -> None:
        """Delete every namespace made (their veths and the bridge go with them); safe to call twice."""
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.created.clear()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LinkedHosts(Hosts):
    """Namespaces joined by the user-space relay of ``netns_relay.py`` instead of a bridge: each host has a TUN
    device at ``10.78.<n>.<10+i>``, and ``link(name, delay_ms=..., jitter_ms=..., loss=..., cut=...)`` changes
    what that host's link does to the packets it sends and receives (in force when it returns).
    ``close`` ends the relay and deletes the namespaces, their devices with them."""

    def __init__(self, names: list[str], third_octet: int = 0) -> None:
        self.relay: subprocess.Popen | None = None
        super().__init__(names, third_octet)

    def address(self, name: str) -> str:
        return f"10.{SUBNET + 1}.{self.prefix.split('.')[2]}.{10 + self.names.index(name)}"

    def _build(self) -> None:
        for name in self.names:
            ns = self.ns(name)
            _ip("netns", "add", ns)
            self.created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "tuntap", "add", "dev", "tun0", "mode", "tun")
            _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "tun0")
            _ip("-n", ns, "link", "set", "tun0", "up")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_relay.py")
        ends = [f"{self.ns(name)}={self.address(name)}" for name in self.names]
        self.relay = subprocess.Popen(
            [sys.executable, script, *ends], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.relay.stdout is not None
        if self.relay.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the relay did not start (exit {self.relay.wait(timeout=10)})")

    def link(self, name: str, **rule: float | bool) -> None:
        """Set host ``name``'s link rule (keys of ``netns_relay.Rule``; the others keep their values)."""
        assert self.relay is not None and self.relay.stdin is not None and self.relay.stdout is not None
        self.relay.stdin.write(json.dumps({"host": self.address(name), **rule}) + "\n")
        self.relay.stdin.flush()
        if self.relay.stdout.readline().strip() != "ok":
            raise RuntimeError(f"the relay did not take the rule {rule} (exit {self.relay.poll()})")

    def heal(self) -> None:
        """Every link back to a clean one."""
        for name in self.names:
            self.link(name, delay_ms=0, jitter_ms=0, loss=0, cut=False)

    def close(self) -> None:
        try:
            if self.relay is not None and self.relay.poll() is None:
                self.relay.terminate()
                try:
                    self.relay.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.relay.kill()
                    self.relay.wait(timeout=10)
        finally:
            super().close()
