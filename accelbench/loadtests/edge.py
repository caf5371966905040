"""The load-test process edge, typed: what a sweep tells its Locust child (the way back, what the child
measured, is ``events.MeasuredStep`` inside ``events.StepMeasured``).

=================  ========================================================================================
``LoadConfig``     what every load process is told: the profile, the model, where to send, what answers
                   carry (the local runner, a worker on this host, a worker elsewhere in ``ab_config``)
``ChildConfig``    the child's ``config.json``: a ``LoadConfig`` plus the steps, the payloads file, the
                   statistics URLs, the master's port and bind, the sample floor (sweep → runner)
``StepPlan``       one step to measure (profiles.py), in the config and in the retries sent on stdin
=================  ========================================================================================

Each is a frozen dataclass serialised once (``to_wire`` → JSON-ready dict, ``from_wire`` back); neither side
reads a key. To pass something new to the child, add a field with a default to ``LoadConfig`` (every load
process needs it; bump ``remote.CONFIG_VERSION``) or to ``ChildConfig`` (only the controller needs it), and
read it by attribute: a field of a plain JSON type needs nothing more, a nested dataclass a line in that
class's ``from_wire``. A new generative knob belongs on ``profiles.Workload``, which travels inside the
profile. Imported by both sides: no Locust, no gevent, no pydantic here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.loadtests.distributed import MasterBind
from accelbench.loadtests.jsonwire import ConfigWire
from accelbench.loadtests.profiles import LoadProfile, StepPlan, Workload


@dataclass(frozen=True)
class LoadConfig:
    """What one load process needs: the profile (kind, protocol, batch, timeouts, seed, workload, ...), the
    Triton model (or served model name), the URL the protocol's client takes, the outputs every answer must
    carry (``{"name", "dtype", "shape"[, "batched"]}``, as wire.output_specs reads them) and which load
    process this is."""

    profile: LoadProfile
    model: str
    url: str
    expected_outputs: tuple[Mapping[str, Any], ...] = ()
    process_index: int = 0

    @property
    def workload(self) -> Workload | None:
        return self.profile.workload

    def to_wire(self) -> ConfigWire:
        return {
            "profile": self.profile.to_dict(),
            "model": self.model,
            "url": self.url,
            "expected_outputs": [dict(o) for o in self.expected_outputs],
            "process_index": self.process_index,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> LoadConfig:
        return cls(
            profile=LoadProfile.from_dict(data["profile"]),
            model=str(data["model"]),
            url=str(data["url"]),
            expected_outputs=tuple(data.get("expected_outputs") or ()),
            process_index=int(data.get("process_index") or 0),
        )


@dataclass(frozen=True)
class ChildConfig:
    """The Locust child's configuration (``python -m accelbench.loadtests.runner CONFIG``), written by the
    sweep (``write``) and read by the child (``read``). ``sample_floor``: requests to wait for after the
    warm-up cut; ``master_port``: where a master on this host meets its local workers; ``bind``: a master
    for workers on other hosts."""

    load: LoadConfig
    steps: tuple[StepPlan, ...]
    payloads_file: str
    http_url: str | None = None
    metrics_url: str | None = None
    master_port: int = 0
    sample_floor: int = 0
    bind: MasterBind | None = None

    @property
    def profile(self) -> LoadProfile:
        return self.load.profile

    def to_wire(self) -> ConfigWire:
        return {
            "load": self.load.to_wire(),
            "steps": [s.to_wire() for s in self.steps],
            "payloads_file": self.payloads_file,
            "http_url": self.http_url,
            "metrics_url": self.metrics_url,
            "master_port": self.master_port,
            "sample_floor": self.sample_floor,
            "bind": dataclasses.asdict(self.bind) if self.bind else None,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ChildConfig:
        return cls(
            load=LoadConfig.from_wire(data["load"]),
            steps=tuple(StepPlan.from_wire(s) for s in data["steps"]),
            payloads_file=str(data["payloads_file"]),
            http_url=data.get("http_url"),
            metrics_url=data.get("metrics_url"),
            master_port=int(data.get("master_port") or 0),
            sample_floor=int(data.get("sample_floor") or 0),
            bind=MasterBind(**data["bind"]) if data.get("bind") else None,
        )

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_wire()))
        return path

    @classmethod
    def read(cls, path: str | Path) -> ChildConfig:
        return cls.from_wire(json.loads(Path(path).read_text()))
