"""Load profiles: a closed-loop concurrency sweep or an open-loop Poisson rate sweep, as step plans."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from accelbench.errors import BadInputError

KINDS = ("closed", "open")
PROTOCOLS = ("http", "grpc")


@dataclass(frozen=True)
class LoadProfile:
    """How load is offered. ``levels`` are concurrencies (closed) or requests/s (open).

    ``duration_s`` set: each step measures for exactly that long. ``duration_s`` None: each step runs until
    the last three windows agree (throughput and p99 within 10 %), at most ``max_duration_s``.
    """

    kind: str
    protocol: str
    levels: tuple[float, ...]
    duration_s: float | None = 10.0
    warmup_s: float = 2.0
    processes: int = 1
    seed: int = 0
    batch_size: int = 1
    window_s: float = 1.0
    max_duration_s: float = 60.0
    max_in_flight: int = 256  # open loop: arrivals beyond this many outstanding requests are dropped, counted
    timeout_s: float = 30.0
    # every answer gets the lean check (status, names, dtypes, shapes, sizes); every Nth and every failed
    # one also the full check (each tensor decoded)
    check_every: int = 100
    # payloads from the server's model metadata (served.py): zero | random | a perf_analyzer JSON data file;
    # None: from the model card when there is one. ``shapes``: NAME:D1,D2 for dynamic dimensions
    input_data: str | None = None
    shapes: tuple[str, ...] = ()
    # which of ``--repeats N`` independent runs this is (1..N); repeat 1 is recorded as before (no key)
    repeat: int = 1
    # generative sweeps (workloads.GenWorkload.to_dict()): streamed requests, token-level figures
    workload: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise BadInputError(f"load kind {self.kind!r}: use one of {', '.join(KINDS)}")
        if self.protocol not in PROTOCOLS:
            raise BadInputError(f"protocol {self.protocol!r}: use one of {', '.join(PROTOCOLS)}")
        if not self.levels or any(v <= 0 for v in self.levels):
            raise BadInputError(f"load levels must be positive numbers, got {list(self.levels)}")
        if self.kind == "closed" and any(int(v) != v for v in self.levels):
            raise BadInputError(f"concurrency levels must be whole numbers, got {list(self.levels)}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise BadInputError(f"--duration must be positive, got {self.duration_s}")
        if self.warmup_s < 0 or self.processes < 1 or self.batch_size < 1:
            raise BadInputError("--warmup must be >= 0, --processes and --batch >= 1")
        if self.check_every < 1:
            raise BadInputError(f"--check-every must be >= 1, got {self.check_every}")
        if not isinstance(self.repeat, int) or isinstance(self.repeat, bool) or self.repeat < 1:
            raise BadInputError(f"repeat must be a whole number >= 1, got {self.repeat!r}")
        if self.window_s <= 0 or self.max_duration_s <= 0 or self.max_in_flight < 1:
            raise BadInputError("window, max duration and max in-flight must be positive")

    def to_dict(self) -> dict[str, Any]:
        """The ``load_profile`` of the result document; equal dicts mean a rerun may resume."""
        out = asdict(self)
        out["levels"] = [int(v) if self.kind == "closed" else float(v) for v in self.levels]
        out["shapes"] = list(self.shapes)  # as JSON reads it back, so a rerun compares equal
        if self.repeat == 1:  # documents written before repeats existed stay resumable and unchanged
            del out["repeat"]
        if self.workload is None:  # classic documents stay unchanged and resumable
            del out["workload"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadProfile:
        return cls(**{**data, "levels": tuple(data["levels"]), "shapes": tuple(data.get("shapes") or ())})

    def steps(self) -> list[dict[str, Any]]:
        """One plan per level: ``{"index", "offered": {"concurrency": n} | {"rate_rps": r}}``."""
        key = "concurrency" if self.kind == "closed" else "rate_rps"
        return [
            {"index": i, "offered": {key: int(v) if self.kind == "closed" else float(v)}}
            for i, v in enumerate(self.levels)
        ]

    def label(self) -> str:
        if self.workload:
            w = self.workload
            return f"{self.kind}-{w['api']}-i{w['isl']}-o{w['osl']}"
        return f"{self.kind}-{self.protocol}-b{self.batch_size}"


def offered_label(offered: dict[str, Any]) -> str:
    """A step's offered load for people: ``concurrency 4`` or ``200 requests/s``."""
    if "concurrency" in offered:
        return f"concurrency {offered['concurrency']}"
    return f"{offered['rate_rps']:g} requests/s"


def parse_levels(text: str) -> tuple[float, ...]:
    """``"1,2,4"`` → (1.0, 2.0, 4.0); a clear error for anything else."""
    try:
        levels = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise BadInputError(f"load levels {text!r}: expected comma-separated numbers like 1,2,4") from None
    if not levels:
        raise BadInputError(f"load levels {text!r}: expected comma-separated numbers like 1,2,4")
    return levels
