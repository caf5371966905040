"""`accelbench agent`: a runner that long-polls a results server for its target's jobs and runs each one.

A job is one measured target of a campaign. The agent runs the existing pipeline for it (what
``accelbench run SPEC --target ID`` does: quantize with the target's toolchain, serve, sweep) in a work folder
of its own, with ``job.JobSink`` as the pipeline's sink: every recorded step's document is pushed (the
resume point: a job that is requeued because this host died resumes on another host after the steps already
pushed, whose documents come back with the claim and are put where the pipeline's own resume finds them),
every finished result stored once (by content hash), and a heartbeat keeps the lease. A job that cannot run
here (a toolchain missing) fails with the pipeline's one-line reason.

``stop`` (a ``Cancel``, requested on SIGTERM): the running step finishes, the partial documents are pushed,
the job is released. The agent only ever calls out (HTTP to the server), so it runs behind NAT.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.answers import ClaimedJob, RunnerRegistered
from accelbench.client.http import RETRY_S, Conflict, ServerClient, read_answer
from accelbench.client.job import run_job
from accelbench.errors import BadInputError
from accelbench.loadtests.events import Cancel
from accelbench.processes import record_children_in

CLAIM_WAIT_S = 10.0  # one long poll; short enough that a stopped agent exits promptly
IDENTITY_FILE = "runner.json"  # in the work folder: {name, id, secret}, mode 600


def parse_labels(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``k=v`` strings (the agent's and submit's ``--label``) as a dict; ValueError names a malformed one."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--label {pair!r}: write KEY=VALUE")
        labels[key.strip()] = value.strip()
    return labels


@dataclass(frozen=True)
class AgentConfig:
    server: str
    target: str
    token: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    once: bool = False
    work_dir: Path = Path("accelbench-agent")
    name: str = ""
    catalog_path: str | None = None
    retry_s: float = RETRY_S
    quiet: bool = False
    idle_exit_s: float | None = None  # exit when no job came for this long (a rented host with nothing to do)
    secrets: dict[int, str] = field(
        default_factory=dict, repr=False
    )  # runner id → secret (register fills it)

    def secret_for(self, runner_id: int) -> str:
        return self.secrets.get(runner_id, "")

    @property
    def runner_name(self) -> str:
        """--name, else HOST-TARGET, with the device when one is pinned (CUDA_VISIBLE_DEVICES or
        NEURON_RT_VISIBLE_CORES): one runner per (host, target, device), so two agents on one host for one
        target each have a row of their own."""
        if self.name:
            return self.name
        device = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("NEURON_RT_VISIBLE_CORES") or ""
        device = "".join(c if c.isalnum() else "_" for c in device.strip())
        return f"{platform.node()}-{self.target}" + (f"-dev{device}" if device else "")


def _identity(cfg: AgentConfig) -> dict[str, Any]:
    try:
        data = json.loads((cfg.work_dir / IDENTITY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("name") == cfg.runner_name else {}


def _keep_identity(cfg: AgentConfig, identity: dict[str, Any]) -> None:
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    path = cfg.work_dir / IDENTITY_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(identity, out)
    os.replace(tmp, path)


def register(client: ServerClient, cfg: AgentConfig) -> int:
    """Register (or re-register with the secret kept in the work folder); returns the runner id. The runner
    secret the server issues is kept in WORK/runner.json (mode 600) and sent with every job call."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.hardware.probe import probe_host

    catalog = load_catalog(cfg.catalog_path)
    catalog.get(cfg.target)  # an unknown --target is one line before anything is sent
    probe = probe_host(known_ids=list(catalog.targets))
    known = _identity(cfg)
    body = {
        "name": cfg.runner_name,
        "target": cfg.target,
        "labels": cfg.labels,
        "probe": probe,
        "version": __version__,
        "secret": known.get("secret"),
    }
    try:
        answer = client.answer(RunnerRegistered, "POST", "/runners", body)
    except Conflict as err:  # the name belongs to another runner
        raise BadInputError(f"{client.url}: {err}") from None
    secret = answer.secret or known.get("secret") or ""
    if answer.secret:
        _keep_identity(cfg, {"name": cfg.runner_name, "id": answer.id, "secret": secret})
    cfg.secrets[answer.id] = secret
    return answer.id


def run_agent(
    cfg: AgentConfig, stop: Cancel | None = None, say: Callable[[str], None] | None = None
) -> dict[str, int]:
    """Register, then claim and run jobs until ``stop`` (or one job with ``once``); counts per outcome."""
    stop = stop or Cancel()
    say = say or (lambda line: print(f"accelbench agent: {line}", file=sys.stderr, flush=True))
    client = ServerClient(cfg.server, cfg.token, retry_s=cfg.retry_s, scope="runner")
    left = record_children_in(cfg.work_dir)  # what a killed agent on this work folder left running
    if left:
        say(left)
    outcomes: dict[str, int] = {}
    with client:
        runner_id = register(client, cfg)
        say(f"runner {cfg.runner_name} (id {runner_id}) polling {client.url} for {cfg.target} jobs")
        idle_since = time.monotonic()
        while not stop.requested:
            claim = {
                "runner_id": runner_id,
                "runner_secret": cfg.secret_for(runner_id),
                "wait_s": _claim_wait_s(cfg.idle_exit_s, time.monotonic() - idle_since),
            }
            # None: 204, no job came within the wait
            found = client.call("POST", "/jobs/claim", claim, timeout_s=CLAIM_WAIT_S + 30)
            if found is None:
                if cfg.idle_exit_s is not None and time.monotonic() - idle_since >= cfg.idle_exit_s:
                    say(f"no {cfg.target} job for {cfg.idle_exit_s:g} s; exiting")
                    outcomes["idle"] = 1
                    break
                continue
            job = read_answer(ClaimedJob, found, f"{client.url}/api/v1/jobs/claim")
            outcome = run_job(client, cfg, runner_id, job, stop, say)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if cfg.once:
                break
            idle_since = time.monotonic()
    return outcomes


def _claim_wait_s(idle_exit_s: float | None, idle_s: float) -> float:
    """One long poll: CLAIM_WAIT_S, or what is left of ``--idle-exit`` when that is less (so an agent told to
    exit after 3 idle seconds does, rather than after the whole poll)."""
    if idle_exit_s is None:
        return CLAIM_WAIT_S
    return round(min(CLAIM_WAIT_S, max(0.0, idle_exit_s - idle_s)), 3)
