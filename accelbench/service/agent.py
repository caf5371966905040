"""`accelbench agent`: a runner that long-polls a results server for its target's jobs and runs each one.

A job is one measured target of a campaign. The agent runs the existing pipeline for it (what
``accelbench run SPEC --target ID`` does: quantize with the target's toolchain, serve, sweep) in a work folder
of its own; a thread sends a heartbeat every lease/3 seconds with the tail of the log and pushes each result
document as it stands after every step, so a job that is requeued (this host died, its lease expired) resumes
on another host after the steps already pushed: the partial documents come back with the claim and are put
where the pipeline's own resume finds them. Each finished sweep is pushed once (the server stores it by
content hash). A job that cannot run here (a toolchain missing) fails with the pipeline's one-line reason.

``stop`` (set on SIGTERM): the running step finishes, the partial documents are pushed, the job is released.
The agent only ever calls out (HTTP to the server), so it runs behind NAT.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.errors import AccelbenchError, BadInputError, ServerError
from accelbench.experiment.progress import Progress
from accelbench.processes import record_children_in

RETRY_S = 300.0  # how long a call keeps retrying a server that is restarting before giving up
CLAIM_WAIT_S = 10.0  # one long poll; short enough that a stopped agent exits promptly
LOG_LINES = 40


class StopRequested(BaseException):  # noqa: N818 - like KeyboardInterrupt: nothing in the pipeline catches it
    """Raised inside the pipeline at the next step boundary once the agent must stop or lost its job."""


class JobLost(Exception):
    """The server says the job is not ours any more (409)."""


class Unreachable(ServerError):
    """The results server did not answer for RETRY_S seconds."""


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
    idle_exit_s: float | None = (
        None  # exit when no job came for this long (a rented host that has nothing to do)
    )
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
        import os

        device = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("NEURON_RT_VISIBLE_CORES") or ""
        device = "".join(c if c.isalnum() else "_" for c in device.strip())
        return f"{platform.node()}-{self.target}" + (f"-dev{device}" if device else "")


class Api:
    """The server's job API over httpx; retries while the server is down, maps statuses to exceptions."""

    def __init__(self, server: str, token: str | None, retry_s: float = RETRY_S) -> None:
        import httpx

        if not server.startswith(("http://", "https://")):
            raise BadInputError(f"--server {server!r}: give the server's URL, e.g. http://127.0.0.1:8080")
        self.url, self.retry_s = server.rstrip("/"), retry_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=self.url + "/api/v1", headers=headers, timeout=30.0)

    def close(self) -> None:
        self.client.close()

    def call(self, method: str, path: str, body: dict[str, Any], timeout_s: float = 30.0) -> Any:
        import httpx

        deadline, delay = time.monotonic() + self.retry_s, 0.5
        while True:
            try:
                response = self.client.request(method, path, json=body, timeout=timeout_s)
                if response.status_code not in (502, 503, 504):
                    return self._answer(response, path)
                why = f"HTTP {response.status_code}"
            except httpx.TransportError as err:
                why = f"{type(err).__name__}: {err}"
            if time.monotonic() + delay > deadline:
                raise Unreachable(
                    f"results server {self.url} did not answer for {self.retry_s:.0f} s ({why})"
                )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _answer(self, response: Any, path: str) -> Any:
        if response.status_code == 204:
            return None
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": response.text[:200]}
        if response.status_code < 400:
            return payload
        message = payload.get("error") if isinstance(payload, dict) else str(payload)
        if response.status_code == 409:
            raise JobLost(message)
        if response.status_code in (401, 403):
            raise BadInputError(f"{self.url}: {message} (give a runner token: --token or ACCELBENCH_TOKEN)")
        raise ServerError(f"{self.url}{path}: the server answered {response.status_code}: {message}")


@dataclass
class AgentProgress(Progress):
    """The pipeline's progress, also kept as a log tail; raises StopRequested at step boundaries when asked."""

    stop: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    changed: threading.Event = field(default_factory=threading.Event)
    tail: deque = field(default_factory=lambda: deque(maxlen=LOG_LINES))

    def _emit(self, text: str, style: str = "") -> None:
        self.tail.append(text)
        super()._emit(text, style)

    def check(self) -> None:
        if self.stop.is_set() or self.lost.is_set():
            raise StopRequested("lost the job" if self.lost.is_set() else "stop requested")

    def stage(self, name: str, detail: str = "") -> None:
        self.check()
        super().stage(name, detail)

    def note(self, stage: str, message: str) -> None:
        super().note(stage, message)
        if stage == "load":  # a step was just written to disk: push it now, then honour a stop
            self.changed.set()
            self.check()

    @contextlib.contextmanager
    def step(self, stage: str, item: str) -> Iterator[list[str]]:
        self.check()
        with super().step(stage, item) as notes:
            yield notes


class Heartbeat(threading.Thread):
    """Extends the lease every ``interval_s`` and pushes each result document whose bytes changed."""

    def __init__(self, api: Api, job_id: int, call: dict[str, Any], progress: AgentProgress, results: Path,
                 interval_s: float) -> None:  # fmt: skip
        super().__init__(daemon=True, name=f"heartbeat-job-{job_id}")
        self.api, self.job_id, self.call, self.progress, self.results = api, job_id, call, progress, results
        self.interval_s, self.halt, self.sent = interval_s, threading.Event(), _hashes(results)
        self.lock = threading.Lock()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.sync()
                log_tail = "\n".join(self.progress.tail)
                self.api.call("POST", f"/jobs/{self.job_id}/heartbeat", {**self.call, "log_tail": log_tail})
            except JobLost:
                self.progress.lost.set()
                return
            except (ServerError, OSError, ValueError):
                pass  # a restarting server: try again at the next beat; the lease has slack for it
            self.progress.changed.wait(self.interval_s)
            self.progress.changed.clear()

    def sync(self) -> None:
        """Push every result document that changed on disk since it was last pushed."""
        with self.lock:
            for path in sorted(self.results.glob("*.json")):
                data = path.read_bytes()
                digest = hashlib.sha256(data).hexdigest()
                if self.sent.get(path.name) != digest:
                    doc = json.loads(data)
                    self.api.call("PUT", f"/jobs/{self.job_id}/documents", {**self.call, "document": doc})
                    self.sent[path.name] = digest

    def end(self) -> None:
        self.halt.set()
        self.progress.changed.set()
        self.join(timeout=self.api.retry_s + 35)


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.json")}


def prepare_work_dir(work: Path, documents: list[dict[str, Any]]) -> Path:
    """The job's folder with the server's partial documents where the pipeline resumes from (server wins)."""
    from accelbench.util import atomic_write_json

    results = work / "results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    for doc in documents:
        atomic_write_json(results / f"{Path(str(doc['run_id'])).name}.json", doc)
    return results


class ResultPusher:
    """Pushes each finished sweep once (the pipeline's ``on_result``), and at the end whatever is left."""

    def __init__(
        self, api: Api, job_id: int, call: dict[str, Any], work: Path, progress: AgentProgress
    ) -> None:
        self.api, self.job_id, self.call, self.work, self.progress = api, job_id, call, work, progress
        self.pushed: set[str] = set()

    def push(self, path: Path) -> None:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest in self.pushed:
            return
        doc = json.loads(data)
        body: dict[str, Any] = {**self.call, "result": doc, "source": path.name}
        manifest = self.work / "variants" / str(doc.get("variant")) / "manifest.json"
        if manifest.is_file():
            body["variant"] = json.loads(manifest.read_text())
        self.api.call("POST", f"/jobs/{self.job_id}/results", body)
        self.pushed.add(digest)

    def __call__(self, path: Path, _doc: dict[str, Any]) -> None:
        # the pipeline's sink must not raise: a failed push is retried by ``rest`` when the job ends
        try:
            self.push(Path(path))
        except JobLost:
            self.progress.lost.set()
        except (ServerError, OSError, ValueError):
            pass

    def rest(self) -> int:
        """Push every finished sweep not pushed yet; returns how many sweeps the job has in all."""
        done = [
            p
            for p in sorted((self.work / "results").glob("*.json"))
            if json.loads(p.read_text()).get("complete")
        ]
        for path in done:
            self.push(path)
        return len(done)


def run_job(api: Api, cfg: AgentConfig, runner_id: int, job: dict[str, Any], stop: threading.Event,
            say: Callable[[str], None]) -> str:  # fmt: skip
    """Run one claimed job to its end; returns done, failed, released, lost or unreachable."""
    from accelbench.experiment.engines import prepare as prepare_engines
    from accelbench.experiment.pipeline import run_experiment
    from accelbench.experiment.spec import parse_spec

    job_id = job["id"]
    call = {"runner_id": runner_id, "runner_secret": cfg.secret_for(runner_id), "attempt": job["attempt"],
            "lease_secret": job.get("lease_secret") or ""}  # fmt: skip
    work = cfg.work_dir / f"job-{job_id}"
    results = prepare_work_dir(work, job.get("documents") or [])
    progress = AgentProgress(quiet=cfg.quiet, stop=stop)
    pusher = ResultPusher(api, job_id, call, work, progress)
    beat = Heartbeat(api, job_id, call, progress, results, max(0.5, float(job["lease_s"]) / 3))
    beat.start()
    say(f"job {job_id}: {job['campaign']} on {job['target']}, attempt {job['attempt']} "
        f"({sum(len(d.get('steps') or []) for d in job.get('documents') or [])} step(s) already pushed)")  # fmt: skip
    try:
        spec = parse_spec(job["spec"], f"campaign {job['campaign_id']}").only_target(job["target"])
        # engine = "trtllm" | "vllm": run the recipe's build_engine.sh here; no toolchain fails in one line
        spec = prepare_engines(spec, work, cfg.catalog_path, lambda line: progress.note("engine", line))
        run_experiment(spec, out_dir=work, catalog_path=cfg.catalog_path, progress=progress, on_result=pusher,
                       command=f"accelbench agent --target {cfg.target} (campaign {job['campaign_id']}, job {job_id})")  # fmt: skip
        progress.check()  # the job was lost while the last sweep ran
        beat.sync()
        pushed = pusher.rest()
        api.call("POST", f"/jobs/{job_id}/done", call)
        say(f"job {job_id}: done, {pushed} result(s) pushed")
        return "done"
    except StopRequested:
        beat.end()
        if progress.lost.is_set():
            say(f"job {job_id}: the server gave it to another runner (lease expired); dropped")
            return "lost"
        with contextlib.suppress(JobLost):
            beat.sync()
            api.call("POST", f"/jobs/{job_id}/release", call)
        say(f"job {job_id}: stopped after the running step and released")
        return "released"
    except JobLost:
        say(f"job {job_id}: the server gave it to another runner (lease expired); dropped")
        return "lost"
    except Unreachable as err:
        say(f"job {job_id}: {err}; the results stay in {work}, the job is requeued when its lease expires")
        return "unreachable"
    except Exception as err:  # noqa: BLE001 - any failure is the job's, not the agent's
        reason = " ".join(str(err).split()) or type(err).__name__
        if not isinstance(err, AccelbenchError):
            reason = f"{type(err).__name__}: {reason}"
        with contextlib.suppress(JobLost):
            api.call("POST", f"/jobs/{job_id}/fail", {**call, "reason": reason})
        say(f"job {job_id}: failed: {reason}")
        return "failed"
    finally:
        beat.end()


IDENTITY_FILE = "runner.json"  # in the work folder: {name, id, secret}, mode 600


def _identity(cfg: AgentConfig) -> dict[str, Any]:
    try:
        data = json.loads((cfg.work_dir / IDENTITY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("name") == cfg.runner_name else {}


def _keep_identity(cfg: AgentConfig, identity: dict[str, Any]) -> None:
    import os

    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    path = cfg.work_dir / IDENTITY_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(identity, out)
    os.replace(tmp, path)


def register(api: Api, cfg: AgentConfig) -> int:
    """Register (or re-register with the secret kept in the work folder); returns the runner id. The runner
    secret the server issues is kept in WORK/runner.json (mode 600) and sent with every job call."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.hardware.probe import probe_host

    catalog = load_catalog(cfg.catalog_path)
    catalog.get(cfg.target)  # an unknown --target is one line before anything is sent
    probe = probe_host(known_ids=list(catalog.targets))
    known = _identity(cfg)
    body = {"name": cfg.runner_name, "target": cfg.target, "labels": cfg.labels, "probe": probe,
            "version": __version__, "secret": known.get("secret")}  # fmt: skip
    try:
        answer = api.call("POST", "/runners", body)
    except JobLost as err:  # 409: the name belongs to another runner
        raise BadInputError(f"{api.url}: {err}") from None
    secret = answer.get("secret") or known.get("secret") or ""
    if answer.get("secret"):
        _keep_identity(cfg, {"name": cfg.runner_name, "id": answer["id"], "secret": secret})
    cfg.secrets[answer["id"]] = secret
    return answer["id"]


def run_agent(cfg: AgentConfig, stop: threading.Event | None = None,
              say: Callable[[str], None] | None = None) -> dict[str, int]:  # fmt: skip
    """Register, then claim and run jobs until ``stop`` (or one job with ``once``); counts per outcome."""
    stop = stop or threading.Event()
    say = say or (lambda line: print(f"accelbench agent: {line}", file=sys.stderr, flush=True))
    api = Api(cfg.server, cfg.token, cfg.retry_s)
    left = record_children_in(cfg.work_dir)  # what a killed agent on this work folder left running
    if left:
        say(left)
    outcomes: dict[str, int] = {}
    try:
        runner_id = register(api, cfg)
        say(f"runner {cfg.runner_name} (id {runner_id}) polling {api.url} for {cfg.target} jobs")
        idle_since = time.monotonic()
        while not stop.is_set():
            claim = {
                "runner_id": runner_id,
                "runner_secret": cfg.secret_for(runner_id),
                "wait_s": CLAIM_WAIT_S,
            }
            job = api.call("POST", "/jobs/claim", claim, timeout_s=CLAIM_WAIT_S + 30)
            if job is None:
                if cfg.idle_exit_s is not None and time.monotonic() - idle_since >= cfg.idle_exit_s:
                    say(f"no {cfg.target} job for {cfg.idle_exit_s:g} s; exiting")
                    outcomes["idle"] = 1
                    break
                continue
            outcome = run_job(api, cfg, runner_id, job, stop, say)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if cfg.once:
                break
            idle_since = time.monotonic()
    finally:
        api.close()
    return outcomes
