"""What a load sweep tells its caller while it runs: typed events, the sink of finished steps, the cancel token.

Events are frozen dataclasses, one per kind; a Locust child process writes them one per line as JSON
(``to_wire``) and the caller reads them back (``from_wire``), so no caller ever reads an event dict. The kinds:

=====================  ======================================================================================
``StepProgress``       a measured window of the running step (child → sweep → display)
``StepMeasured``       a step's raw totals from the child (a ``MeasuredStep``); the sweep turns them into a
                       ``documents.Step``
``StepFinished``       a step as recorded in the result document (sweep → caller; ``StepSink.step``)
``RepeatStarted``      ``loadtest --repeats N``: the next of N sweeps starts
``WorkersWaiting``     a master waits for workers on other hosts
``WorkersJoined``      ... and every worker connected and took the configuration
``WorkerConnected``    a ``loadtest-worker`` process reached its master
``WorkerConfigured``   ... and took the master's configuration
``LoadFailed``         the load generator cannot go on (one line)
``LoadTimedOut``       the child ran past its time budget (made by the caller, never sent)
``StepsDone``          the child measured the steps it was given and waits for more (the sweep's retries)
``LoadDone``           the child finished every step (a worker: its run ended)
=====================  ======================================================================================

``WorkerEvent`` wraps an event of one of ``run_workers``' processes with that process's number.

``StepSink`` is where finished steps and results go (``accelbench run --push`` pushes each result, the agent
each step and each result); ``Cancel`` is how a caller stops a sweep: the sweep checks it between steps (the
running step finishes and is recorded), the pipeline between stages.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from accelbench.loadtests.jsonwire import EngineBlock, EventWire, RecordWire, TritonJson

if TYPE_CHECKING:  # the Locust child imports this module; it never builds documents
    from accelbench.documents import ResultDocument, Step, VariantManifest


@dataclass(frozen=True)
class StepProgress:
    wire: ClassVar[str] = "progress"
    index: int
    offered: dict[str, float]
    elapsed_s: float
    rps: float
    p99_us: float


@dataclass(frozen=True)
class ProcessShare:
    """One load process's part of a measured step: its CPU and wall time, its requests, who it was."""

    cpu_s: float
    wall_s: float
    requests: int = 0
    index: int | None = None
    host: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class MeasuredStep:
    """A step's raw totals as the child measured them (``sweep.build_step`` makes the document's step).

    ``aborted``: why the step was cut short (``aborted_by`` "loadgen" when a load process failed, else the
    server); ``histogram`` / ``samples``: the merged exact latencies (histogram.encode, samples.encode);
    ``windows``: (requests/s, p99 µs) per window; ``generative``: the merged token records (genstats.combine);
    ``server_stats`` / ``metrics``: Triton's statistics and metrics deltas (None when not read);
    ``engine_metrics``: a generative step's engine /metrics block (documents.EngineMetrics; None: not polled)."""

    index: int
    offered: dict[str, float]
    aborted: str | None = None
    aborted_by: str | None = None
    started_at: str | None = None
    duration_s: float = 0.0
    requests: int = 0
    inferences: int = 0
    successes: int = 0
    errors: dict[str, int] | None = None
    drops: int = 0
    histogram: str | None = None
    loadgen: tuple[ProcessShare, ...] = ()
    processes_reported: int = 0
    processes_expected: int = 0
    last_error: str | None = None
    loop_lag_us: dict[str, float | int | None] | None = None
    samples: str | None = None
    generative: RecordWire | None = None
    windows: tuple[tuple[float, float], ...] = ()
    server_stats: TritonJson | None = None
    metrics: TritonJson | None = None
    engine_metrics: EngineBlock | None = None  # the engine's /metrics (serving/engine_metrics)
    extra: EventWire = field(default_factory=dict)  # keys a newer child sent that this one does not know

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> MeasuredStep:
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names and k != "extra"}
        values["loadgen"] = tuple(ProcessShare(**p) for p in values.get("loadgen") or ())
        values["windows"] = tuple((float(w[0]), float(w[1])) for w in values.get("windows") or ())
        values["extra"] = {k: v for k, v in data.items() if k not in names}
        return cls(**values)

    def to_wire(self) -> EventWire:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StepMeasured:
    wire: ClassVar[str] = "step"
    step: MeasuredStep  # the child's raw totals (histograms, samples, counts): sweep.build_step's input


@dataclass(frozen=True)
class StepFinished:
    step: Step
    document: ResultDocument  # as it stands with this step recorded (the file at ``path`` holds the same)
    path: Path


@dataclass(frozen=True)
class RepeatStarted:
    repeat: int
    repeats: int


@dataclass(frozen=True)
class WorkersWaiting:
    wire: ClassVar[str] = "waiting"
    master: str
    expect_workers: int
    timeout_s: float


@dataclass(frozen=True)
class WorkerInfo:
    index: int
    host: str
    pid: int


@dataclass(frozen=True)
class WorkersJoined:
    wire: ClassVar[str] = "workers"
    master: str
    workers: tuple[WorkerInfo, ...]


@dataclass(frozen=True)
class WorkerConnected:
    wire: ClassVar[str] = "connected"
    master: str


@dataclass(frozen=True)
class WorkerConfigured:
    wire: ClassVar[str] = "configured"
    index: int
    host: str
    pid: int
    model: str
    url: str
    protocol: str
    kind: str


@dataclass(frozen=True)
class LoadFailed:
    wire: ClassVar[str] = "fatal"
    message: str


@dataclass(frozen=True)
class LoadTimedOut:
    after_s: float


@dataclass(frozen=True)
class StepsDone:
    """The planned steps are measured; the child keeps its load processes (and remote workers) and reads the
    next steps to measure from its stdin (``runner.Controller.run``), or ends at an empty line or EOF."""

    wire: ClassVar[str] = "steps-done"


@dataclass(frozen=True)
class LoadDone:
    wire: ClassVar[str] = "done"
    worker: WorkerInfo | None = None  # a worker process: which one it was


# what a Locust child writes on its stdout (``to_wire``), and every event a caller may see
WireEvent = (
    StepProgress
    | StepMeasured
    | WorkersWaiting
    | WorkersJoined
    | WorkerConnected
    | WorkerConfigured
    | LoadFailed
    | StepsDone
    | LoadDone
)
Event = WireEvent | StepFinished | RepeatStarted | LoadTimedOut


@dataclass(frozen=True)
class WorkerEvent:
    """An event of worker process ``process`` of ``run_workers``."""

    process: int
    event: Event


_WIRE: dict[str, type[WireEvent]] = {
    cls.wire: cls
    for cls in (
        StepProgress,
        StepMeasured,
        WorkersWaiting,
        WorkersJoined,
        WorkerConnected,
        WorkerConfigured,
        LoadFailed,
        StepsDone,
        LoadDone,
    )
}


def to_wire(event: WireEvent) -> EventWire:
    """The JSON object a child writes for ``event`` (``{"event": KIND, **fields}``)."""
    return {"event": event.wire, **dataclasses.asdict(event)}


def from_wire(data: Any) -> WireEvent | None:
    """The event a child wrote, or None for anything else (a line some library printed, an unknown kind)."""
    if not isinstance(data, dict) or data.get("event") not in _WIRE:
        return None
    cls = _WIRE[data["event"]]
    fields: EventWire = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
    try:
        if cls is WorkersJoined:
            fields["workers"] = tuple(WorkerInfo(**w) for w in fields["workers"] or ())
        elif cls is StepMeasured:
            fields["step"] = MeasuredStep.from_wire(fields["step"] or {})
        elif cls is LoadDone and fields["worker"] is not None:
            fields["worker"] = WorkerInfo(**fields["worker"])
        return cls(**fields)
    except (TypeError, KeyError, IndexError, ValueError):
        return None


def parse_line(line: str) -> WireEvent | None:
    try:
        return from_wire(json.loads(line))
    except ValueError:
        return None


class StepSink(Protocol):
    """Where a run hands what it measured: every recorded step (``step``, with the document as it stands)
    and every finished result (``result``, measured now or reused from disk, with its variant manifest).
    Called on the pipeline's thread; it must not raise (the files on disk are the record)."""

    def step(self, done: StepFinished) -> None: ...

    def result(self, path: Path, document: ResultDocument, manifest: VariantManifest | None) -> None: ...


@dataclass
class Cancel:
    """A request to stop, checked between steps and between stages (thread-safe; may be set from a signal
    handler). A child token is requested when its parent is, e.g. one job's token under the agent's."""

    parent: Cancel | None = None
    reason: str = ""
    _set: threading.Event = field(default_factory=threading.Event, repr=False)

    def request(self, reason: str = "stop requested") -> None:
        if not self._set.is_set():
            self.reason = reason
            self._set.set()

    @property
    def requested(self) -> bool:
        return self._set.is_set() or (self.parent is not None and self.parent.requested)

    def why(self) -> str:
        if self._set.is_set():
            return self.reason
        return self.parent.why() if self.parent is not None else ""

    def child(self) -> Cancel:
        return Cancel(parent=self)
