"""One claimed job of a campaign: the pipeline run for its target, with what it measures sent as it comes.

``JobSink`` is the pipeline's ``StepSink`` for the job: each recorded step's document (the resume point of a
job that is requeued) is handed to a heartbeat thread that sends it (``PUT /jobs/ID/documents``) with the
next beat, so a slow or restarting server never holds a load step up; each finished result first
replaces its partial document (so an attempt that resumes after a lost answer finds the sweep complete) and
is then stored (``POST /jobs/ID/results``: by content hash, and once per job and run id: sent twice, stored
once; docs/service.md, "Exactly once"). The job is stopped through its
``Cancel`` token: by the agent's (SIGTERM: the running step finishes, is sent, the job is released) or by
the server (a 409 on any call: the job was cancelled, requeued, or its lease or time limit ran out).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.answers import ClaimedJob, heartbeat_interval_s
from accelbench.client.http import TIMEOUT_S, Conflict, ServerClient, Unreachable
from accelbench.client.push import envelope
from accelbench.documents import ResultDocument, VariantManifest, to_dict
from accelbench.errors import AccelbenchError, ServerError
from accelbench.experiment.progress import Progress
from accelbench.loadtests.events import Cancel, StepFinished

LOG_LINES = 40


@dataclass
class TailProgress(Progress):
    """The pipeline's progress, its last lines kept for the heartbeat (the campaign page shows them)."""

    tail: deque = field(default_factory=lambda: deque(maxlen=LOG_LINES))

    def _emit(self, text: str, style: str = "") -> None:
        self.tail.append(text)
        super()._emit(text, style)


class JobSink:
    """The job's ``StepSink`` and its heartbeat thread (every ``interval_s`` from the send of the beat before,
    not from its answer; and at once after a step)."""

    def __init__(
        self,
        client: ServerClient,
        job_id: int,
        call: dict[str, Any],
        cancel: Cancel,
        tail: deque,
        interval_s: float,
    ) -> None:
        self.client, self.job_id, self.call, self.cancel, self.tail = client, job_id, call, cancel, tail
        self.interval_s = interval_s
        # a beat whose answer is lost is sent again well inside the lease (3 intervals); a slow answer that
        # does arrive is waited for (up to 2 intervals)
        self.beat_timeout_s = min(TIMEOUT_S, max(1.0, 2 * interval_s))
        # one sender of documents at a time (the thread, or ``flush`` at the end); ``lock`` guards ``pending``
        # only and is never held while sending, so a step never waits for the server
        self.sending, self.lock = threading.Lock(), threading.Lock()
        self.pending: dict[str, dict[str, Any]] = {}  # file name → the document as of its latest step
        self.unsent: list[dict[str, Any]] = []  # result bodies the server did not take yet
        self.steps = self.results = 0
        self.lost: str | None = None  # the server's reason, once it took the job back
        self.lost_after = 0  # steps recorded here when it did
        self.wake, self.halt = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat-job-{job_id}")

    # ---- the pipeline's side (its thread) -------------------------------------------------------------
    def step(self, done: StepFinished) -> None:
        snapshot = to_dict(done.document)  # the sweep goes on changing the document; send it as it is now
        with self.lock:
            self.pending[done.path.name] = snapshot
            self.steps += 1
        self.wake.set()

    def result(self, path: Path, document: ResultDocument, manifest: VariantManifest | None) -> None:
        body = {**self.call, **envelope(document, Path(path).name, manifest)}
        with self.lock:  # the finished document replaces the partial one before the result is posted: an
            # attempt that resumes after a lost answer then finds it complete and measures (and stamps) nothing
            self.pending[Path(path).name] = body["result"]
        try:
            self.flush()
            self.client.call("POST", f"/jobs/{self.job_id}/results", body)
            self.results += 1
        except Conflict as err:
            self._lose(str(err))
        except (ServerError, OSError, ValueError):
            self.unsent.append(body)  # sent again when the job ends; the files keep it meanwhile

    # ---- the heartbeat thread ---------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def _beat(self) -> None:
        while not self.halt.is_set():
            self.wake.clear()  # a step recorded from here on wakes the next round at once
            sent = time.monotonic()
            try:
                body = {**self.call, "log_tail": "\n".join(self.tail)}
                self.client.call(
                    "POST", f"/jobs/{self.job_id}/heartbeat", body, timeout_s=self.beat_timeout_s
                )
                self.flush()
            except Conflict as err:
                self._lose(str(err))
                return
            except (ServerError, OSError, ValueError):
                pass  # a restarting server: try again at the next beat; the lease has slack for it
            # the server extended the lease from when this beat arrived, which is after ``sent``: the lease
            # ends after sent + lease_s, and the next beat is due an interval after the send, however long the
            # round trip (and the documents sent after it) took, so a slow link does not push it to the edge
            self.wake.wait(max(0.0, sent + self.interval_s - time.monotonic()))

    def _lose(self, why: str) -> None:
        # cancel first, count after: a step recorded in between is then counted, so the sweep (which checks
        # the token after each step) records at most one step more than ``lost_after``
        self.cancel.request("the server took the job back")
        if self.lost is None:
            self.lost, self.lost_after = why, self.steps

    def end(self) -> None:
        self.halt.set()
        self.wake.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=self.client.retry_s + 35)

    # ---- both -------------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Send every step's document not sent yet (Conflict and Unreachable reach the caller)."""
        with self.sending:
            while True:
                with self.lock:
                    if not self.pending:
                        return
                    name, doc = next(iter(self.pending.items()))
                self.client.call("PUT", f"/jobs/{self.job_id}/documents", {**self.call, "document": doc})
                with self.lock:
                    if self.pending.get(name) is doc:  # else a newer step of it came meanwhile: send that
                        del self.pending[name]

    def send_unsent(self) -> None:
        self.flush()  # the finished documents first (see ``result``)
        while self.unsent:
            self.client.call("POST", f"/jobs/{self.job_id}/results", self.unsent[0])
            self.unsent.pop(0)
            self.results += 1


def prepare_work_dir(work: Path, documents: list[dict[str, Any]]) -> Path:
    """The job's folder with the server's partial documents where the pipeline resumes from (server wins)."""
    from accelbench.util import atomic_write_json

    results = work / "results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    for doc in documents:
        atomic_write_json(results / f"{Path(str(doc['run_id'])).name}.json", doc)
    return results


def run_job(
    client: ServerClient, cfg: Any, runner_id: int, job: ClaimedJob, stop: Cancel, say: Callable[[str], None]
) -> str:
    """Run one claimed job to its end; returns done, failed, released, lost or unreachable."""
    from accelbench.experiment.engines import prepare as prepare_engines
    from accelbench.experiment.pipeline import run_experiment
    from accelbench.experiment.spec import parse_spec

    job_id = job.id
    call = {
        "runner_id": runner_id,
        "runner_secret": cfg.secret_for(runner_id),
        "attempt": job.attempt,
        "lease_secret": job.lease_secret,
    }
    work = cfg.work_dir / f"job-{job_id}"
    prepare_work_dir(work, job.documents)
    progress = TailProgress(quiet=cfg.quiet)
    sink = JobSink(client, job_id, call, stop.child(), progress.tail, heartbeat_interval_s(job.lease_s))
    sink.start()
    say(
        f"job {job_id}: {job.campaign} on {job.target}, attempt {job.attempt} "
        f"({sum(len(d.get('steps') or []) for d in job.documents)} step(s) already pushed)"
    )
    try:
        spec = parse_spec(job.spec, f"campaign {job.campaign_id}").only_target(job.target)
        # engine = "trtllm" | "vllm": run the recipe's build_engine.sh here; no toolchain fails in one line
        spec = prepare_engines(spec, work, cfg.catalog_path, lambda line: progress.note("engine", line))
        outcome = run_experiment(
            spec,
            out_dir=work,
            catalog_path=cfg.catalog_path,
            progress=progress,
            sink=sink,
            cancel=sink.cancel,
            command=f"accelbench agent --target {cfg.target} (campaign {job.campaign_id}, job {job_id})",
        )
        sink.end()
        if sink.lost is None:
            sink.flush()  # the steps the heartbeat thread had not sent yet
        if sink.lost is not None:
            say(
                f"job {job_id}: {sink.lost}; stopped after the step running then ({sink.lost_after} step(s) "
                f"recorded here when told, {sink.steps} in all); dropped"
            )
            return "lost"
        if outcome.cancelled:
            client.call("POST", f"/jobs/{job_id}/release", call)
            say(
                f"job {job_id}: stopped after the running step ({sink.steps} step(s) recorded here) and released"
            )
            return "released"
        sink.send_unsent()
        client.call("POST", f"/jobs/{job_id}/done", call)
        say(f"job {job_id}: done, {sink.results} result(s) pushed")
        return "done"
    except Conflict as err:
        say(f"job {job_id}: {err}; dropped")
        return "lost"
    except Unreachable as err:
        say(f"job {job_id}: {err}; the results stay in {work}, the job is requeued when its lease expires")
        return "unreachable"
    except Exception as err:  # noqa: BLE001 - any failure is the job's, not the agent's
        reason = " ".join(str(err).split()) or type(err).__name__
        if not isinstance(err, AccelbenchError):
            reason = f"{type(err).__name__}: {reason}"
        sink.end()
        with contextlib.suppress(Conflict):
            client.call("POST", f"/jobs/{job_id}/fail", {**call, "reason": reason})
        say(f"job {job_id}: failed: {reason}")
        return "failed"
    finally:
        sink.end()
