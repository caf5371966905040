"""One load process's side of a sweep (a local runner, a worker of a master on this host or elsewhere):
its request payloads, its Agent, and its answers to the controller's phase messages.

Imported only inside Locust processes, after ``accelbench.loadtests.runner`` has monkey-patched the
standard library; runner.py (the controller) and remote.py (workers on other hosts) both build on it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

import gevent
import numpy as np

from accelbench.loadtests import users
from accelbench.loadtests.edge import LoadConfig
from accelbench.loadtests.events import WireEvent, to_wire

if TYPE_CHECKING:  # only the types: the process imports locust where it starts the runner
    from locust.env import Environment
    from locust.rpc import Message
    from locust.runners import Runner


def load_payloads(path: str | os.PathLike[str] | IO[bytes]) -> list[dict[str, np.ndarray]]:
    """Read every array now: a lazily opened .npz shared by several processes gave CRC errors.

    Keys are ``INDEX/NAME``; a BYTES tensor is stored as its Triton serialization under ``INDEX/NAME`` with
    its shape under ``INDEX#shape/NAME`` (see sweep.write_payloads), so no pickle is ever loaded."""
    from accelbench.loadtests.wire import deserialize_bytes

    with np.load(path, allow_pickle=False) as data:
        arrays = {key: np.array(data[key]) for key in data.files}
    out: dict[int, dict[str, np.ndarray]] = {}
    for key, arr in arrays.items():
        index, name = key.split("/", 1)
        if index.endswith("#shape"):
            continue
        shape = arrays.get(f"{index}#shape/{name}")
        if shape is not None:
            items = deserialize_bytes(arr.tobytes(), int(np.prod(shape)))
            arr = np.array(items, dtype=object).reshape(tuple(int(d) for d in shape))
        out.setdefault(int(index), {})[name] = arr
    return [out[i] for i in sorted(out)]


def make_agent(config: LoadConfig, payloads: list[dict[str, np.ndarray]]) -> users.Agent[Any]:
    """This load process's Agent (``config.process_index`` says which it is), sending ``payloads``."""
    if config.workload is not None:  # a generative sweep: streamed requests, timed per token
        from accelbench.loadtests import genagent

        return genagent.make_agent(config, payloads)
    names = [o["name"] for o in config.expected_outputs]
    pool = users.RequestPool(config.profile.protocol, payloads, names, config.model, config.url)
    return users.Agent(config, pool, free_running=False)


def user_class(kind: str, agent: users.Agent[Any] | None = None) -> type:
    """The user class of the sweep's loop (``kind`` closed or open), bound to this process's ``agent`` (a
    master, which runs no users, gives none)."""
    cls = users.ClosedLoopUser if kind == "closed" else users.OpenLoopUser
    return users.bind(cls, agent) if agent is not None else cls


class ProcessSide:
    """Answers the controller's phase messages in one load process (local runner or worker)."""

    def __init__(self, runner: Runner, agent: users.Agent[Any]) -> None:
        self.runner, self.agent = runner, agent
        self.profile = agent.config.profile
        self.windows: gevent.Greenlet | None = None
        runner.register_message("ab_phase", self.on_phase)

    def on_phase(self, environment: Environment, msg: Message, **_kw: Any) -> None:
        data = msg.data
        if data["phase"] == "warmup":
            self.agent.warmup(data["step"], data.get("rate_rps"))
        elif data["phase"] == "measure":
            self.agent.measure()
            self.windows = gevent.spawn(self._report_windows, data["token"])
        elif data["phase"] == "pause":
            if self.windows is not None:
                self.windows.kill()
                self.windows = None
            gevent.spawn(self._drain, data["token"])

    def _drain(self, token: int) -> None:
        totals = self.agent.pause(self.profile.timeout_s + 5)
        self.runner.send_message("ab_drained", {**totals, "token": token})

    def _report_windows(self, token: int) -> None:
        start, k = time.monotonic(), 0
        while True:
            k += 1
            gevent.sleep(max(0.0, start + k * self.profile.window_s - time.monotonic()))
            self.runner.send_message("ab_window", {**self.agent.take_window(), "k": k, "token": token})


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__


def events_writer() -> Callable[[WireEvent], None]:
    """Our JSON lines own the real stdout; anything else printed goes to stderr."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(event: WireEvent) -> None:
        out.write(json.dumps(to_wire(event), default=_default) + "\n")
        out.flush()

    return emit


def _default(obj: Any) -> Any:
    return obj.item() if hasattr(obj, "item") else str(obj)
