"""The engine's ``/metrics``, scraped off the measuring loop: a process of its own beside the Locust child.

vLLM's page is about 55 KB; parsing it took 30-63 ms a scrape on a 2-core VM, and scraped every 0.5 s inside
the load process (a greenlet) it held the event loop that times the tokens: the step's loop lag p99 went
from 90-98 ms to 474-1,041 ms (issue 49). Here serving.engine_metrics.Poller runs in its own interpreter
(its own thread and connection, no gevent, at nice 10 so that on a host with few cores the load process
wins the CPU), so the load process starts it once, before its first step, sends it a line at each measured
window's start (its load paused: the poller reads the counters, then answers ``started``) and end and reads
one JSON line back: the step's ``engine_metrics`` block
with the scrapes' cost (``interval_s``, ``scrape_ms_mean``, ``scrape_ms_max``).

    python -m accelbench.loadtests.metrics_poll URL MODEL INTERVAL_S   (stdin: start | stop, one a line)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from accelbench.loadtests.jsonwire import EngineBlock

STOP_TIMEOUT_S = 10.0
NICE = 10


@dataclass
class ScrapeCost:
    """Wall time of each scrape (GET and parse), in the poller's process."""

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total_s += seconds
        self.max_s = max(self.max_s, seconds)

    def fields(self, interval_s: float) -> EngineBlock:
        mean = self.total_s / self.count if self.count else None
        return {
            "interval_s": interval_s,
            "scrape_ms_mean": None if mean is None else round(mean * 1000, 2),
            "scrape_ms_max": round(self.max_s * 1000, 2) if self.count else None,
        }


class PollerProcess:
    """The poller process of one Locust child (started on first use, one per child): ``start`` at a measured
    window's start, ``stop`` at its end returns the step's block (None when the process gave none)."""

    def __init__(self, url: str, model: str | None, interval_s: float) -> None:
        self.url, self.model, self.interval_s = url, model, interval_s
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> PollerProcess:
        """Start the process (before any measured window: its interpreter's start costs CPU)."""
        if self.proc is None or self.proc.poll() is not None:
            cmd = [sys.executable, "-m", "accelbench.loadtests.metrics_poll", self.url, self.model or ""]
            self.proc = subprocess.Popen(
                [*cmd, str(self.interval_s)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        return self

    def start(self) -> PollerProcess:
        """Begin a window: wait (cooperatively) for the poller's ``started``, sent once it has read the
        counters the window's hit rate starts from; call it while the load is paused."""
        if self.launch()._send(b"start\n"):
            assert self.proc is not None and self.proc.stdout is not None
            self.proc.stdout.readline()  # "started", or nothing from a process that died: stop() says None
        return self

    def _send(self, line: bytes) -> bool:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except OSError:
            return False
        return True

    def stop(self) -> EngineBlock | None:
        if self.proc is None or not self._send(b"stop\n"):
            return None
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # cooperative where gevent patched subprocess (the load child)
        try:
            block = json.loads(line)
        except ValueError:
            return None
        return block if isinstance(block, dict) else None

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # the poller exits at the end of its input
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def main(argv: list[str]) -> int:
    from accelbench.serving.engine_metrics import EngineSample, Poller, scrape

    url, model, interval_s = argv[0], argv[1] or None, float(argv[2])
    os.nice(NICE)  # on a host with few cores, the load process wins the CPU over a scrape
    import prometheus_client.parser  # noqa: F401  (imported now, not in the first measured window)

    cost = ScrapeCost()

    def timed(url: str, model: str | None) -> EngineSample:
        began = time.perf_counter()
        try:
            return scrape(url, model)
        finally:
            cost.add(time.perf_counter() - began)

    poller: Poller | None = None
    for line in sys.stdin:
        command = line.strip()
        if command == "start":
            cost = ScrapeCost()
            poller = Poller(url, model, interval_s, scrape_fn=timed).start()
            sys.stdout.write("started\n")
            sys.stdout.flush()
        elif command == "stop":
            block: EngineBlock = dict(poller.stop()) if poller is not None else {}
            block.update(cost.fields(interval_s))
            sys.stdout.write(json.dumps(block) + "\n")
            sys.stdout.flush()
            poller = None
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
