"""A load sweep from the caller's side: plan the steps, run Locust in a child process, judge and record.

The caller's process never imports Locust or gevent. The child (``accelbench.loadtests.runner``) runs in
its own process group, which is ended afterwards so no worker outlives the sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from accelbench.documents import (
    Loadgen,
    ResultDocument,
    Step,
    StepStatistics,
    VariantManifest,
    Window,
    to_dict,
)
from accelbench.errors import BadInputError, MeasurementError, ServerError
from accelbench.loadtests import histogram, results, samples, search_run
from accelbench.loadtests.child import EventStream, end_group, last_line, send_steps, start_runner
from accelbench.loadtests.distributed import MasterBind
from accelbench.loadtests.events import (
    Cancel,
    Event,
    LoadDone,
    LoadFailed,
    LoadTimedOut,
    StepFinished,
    StepMeasured,
    StepsDone,
)
from accelbench.loadtests.profiles import LoadProfile, offered_label
from accelbench.loadtests.verdict import DEFAULT_LIMITS, Limits, analyse, judge, worth_retrying
from accelbench.serving.server import free_port

PAYLOAD_COUNT = 64  # distinct pre-built requests rotated per process


@dataclass(frozen=True)
class Server:
    """Where to send load: a client URL for the protocol, plus the HTTP URL used for statistics."""

    http_url: str
    grpc_url: str | None = None
    metrics_url: str | None = None
    version: str = ""

    def client_url(self, protocol: str) -> str:
        if protocol == "grpc":
            if not self.grpc_url:
                raise ServerError("--protocol grpc needs the server's gRPC address")
            return self.grpc_url
        return self.http_url


def build_step(raw: dict[str, Any], kind: str, batch_size: int, limits: Limits) -> Step:
    """The result document's step from the child's raw totals (pure)."""
    duration = raw.get("duration_s") or 0.0
    requests = int(raw.get("requests", 0))
    errors = raw.get("errors") or {"connection": 0, "timeout": 0, "server": 0, "wrong_output": 0}
    n_errors = sum(errors.values())
    hist = histogram.decode(raw["histogram"]) if raw.get("histogram") else histogram.new_histogram()
    successes = hist.get_total_count()
    loadgen = raw.get("loadgen") or []
    cpu = [p["cpu_s"] / p["wall_s"] for p in loadgen if p.get("wall_s")]
    total_cpu_s = sum(p["cpu_s"] for p in loadgen)
    error_rate = n_errors / requests if requests else (1.0 if raw.get("aborted") else 0.0)
    rps = successes / duration if duration else 0.0
    offered = raw["offered"]
    achieved = requests / duration if duration else 0.0
    done_s, latency_us = samples.decode(raw.get("samples"))
    statistics: StepStatistics | None = None
    invalid: list[str] = []
    low: list[str] = []
    if len(latency_us) and not raw.get("aborted"):
        statistics, invalid, low = analyse(done_s, latency_us, duration, limits)
        if statistics.throughput_rps is not None and statistics.throughput_rps.value is not None:
            rps = statistics.throughput_rps.value
    generative = None
    if raw.get("generative") and not raw.get("aborted"):  # token-level figures (genstats.py)
        from accelbench.loadtests import genstats

        generative, more_invalid, more_low = genstats.step(
            raw["generative"],
            offered,
            duration,
            total_cpu_s,
            n_errors,
            limits.sample_floor,
            limits.ci_batches,
        )
        invalid, low = [*invalid, *more_invalid], [*low, *more_low]
    verdict, reasons = judge(
        requests=requests,
        error_rate=error_rate,
        loadgen_cpu=cpu,
        invalid=invalid,
        low_precision=low,
        offered_rps=offered.get("rate_rps") if kind == "open" else None,
        achieved_rps=achieved if kind == "open" else None,
        aborted=raw.get("aborted"),
        limits=limits,
    )
    return Step(
        index=raw["index"],
        offered=offered,
        started_at=raw.get("started_at"),
        duration_s=duration,
        requests=requests,
        inferences=int(raw.get("inferences", 0)),
        errors=errors,
        error_rate=round(error_rate, 6),
        dropped=int(raw.get("drops", 0)),
        throughput_rps=round(rps, 3),
        throughput_ips=round(rps * batch_size, 3),
        # after the warm-up cut, from the exact samples (the histogram keeps the whole window, 3 digits)
        latency_us=_latency_summary(statistics, hist),
        latency_from="intended send time" if kind == "open" else "actual send time",
        histogram=raw.get("histogram"),
        server_stats=raw.get("server_stats"),
        metrics=raw.get("metrics"),
        energy_per_request_j=_energy_per_request_j(raw.get("metrics"), successes),
        loadgen=Loadgen(
            processes=len(loadgen),
            # each process: its index, host, pid and request count (several hosts when distributed)
            per_process=[{k: p.get(k) for k in ("index", "host", "pid", "requests")} for p in loadgen],
            cpu_fraction=[round(c, 3) for c in cpu],
            cpu_us_per_request=round(total_cpu_s * 1e6 / requests, 1) if requests else None,
            event_loop_lag_us=raw.get("loop_lag_us"),
        ),
        windows=[Window(throughput_rps=w[0], p99_us=w[1]) for w in raw.get("windows") or []],
        statistics=statistics,
        generative=generative,
        aborted=raw.get("aborted"),
        last_error=raw.get("last_error"),
        verdict=verdict,
        reasons=reasons,
    )


def _latency_summary(statistics: StepStatistics | None, hist: HdrHistogram) -> dict[str, Any]:
    summary = histogram.summary_us(hist)
    for key, interval in ((statistics.latency_us if statistics else None) or {}).items():
        if interval.value is not None:
            summary[key] = int(interval.value)
    return summary


def _energy_per_request_j(metrics: dict | None, successes: int) -> float | None:
    energy = (metrics or {}).get("energy_j")
    return energy / successes if energy is not None and successes else None


def write_payloads(payloads: list[dict[str, np.ndarray]], path: Path) -> None:
    """An .npz the load processes read back (runner's load_payloads); BYTES tensors as their Triton
    serialization plus their shape, so no process ever unpickles what it was sent."""
    from accelbench.loadtests.wire import serialize_bytes

    arrays = {}
    for i, payload in enumerate(payloads):
        for name, arr in payload.items():
            if arr.dtype == object:
                arrays[f"{i}/{name}"] = np.frombuffer(serialize_bytes(arr), dtype=np.uint8)
                arrays[f"{i}#shape/{name}"] = np.array(arr.shape, dtype=np.int64)
            else:
                arrays[f"{i}/{name}"] = arr
    np.savez(path, allow_pickle=True, **arrays)  # the default, named: numpy 2 stubs read **arrays as it


def result_path(out_dir: str | os.PathLike, variant: str, profile: LoadProfile) -> Path:
    """Where the sweep of ``variant`` under ``profile`` keeps its result document."""
    return Path(out_dir) / f"{results.run_id(variant, profile.label(), profile.repeat)}.json"


def _kept_steps(path: Path, manifest_hash: str, profile: LoadProfile) -> tuple[list[Step], bool]:
    """Resume: the finished steps a rerun keeps (same variant hash and load profile), and whether that
    document was complete. A changed variant or profile keeps nothing."""
    old = results.load_document(path)
    if old is None or not results.resumable(old, manifest_hash, profile):
        return [], False
    return results.finished_steps(old), old.complete


def is_complete(path: str | os.PathLike, manifest_hash: str, profile: LoadProfile) -> bool:
    """True when a sweep to ``path`` would measure nothing: every step kept and the document complete
    (the pipeline then need not even start a server)."""
    kept, complete = _kept_steps(Path(path), manifest_hash, profile)
    return complete and {s.index for s in kept} >= {s["index"] for s in profile.steps()}


def run_sweep(
    *,
    server: Server,
    model: str,
    variant: str,
    payloads: list[dict[str, np.ndarray]],
    expected_outputs: list[dict[str, Any]],
    profile: LoadProfile,
    out_dir: str | os.PathLike,
    manifest: VariantManifest | None = None,
    repository_config: str = "",
    command: str = "",
    limits: Limits = DEFAULT_LIMITS,
    on_event: Callable[[Event], None] | None = None,
    master_bind: MasterBind | None = None,
    target: str | None = None,
    precision: str | None = None,
    cancel: Cancel | None = None,
) -> tuple[ResultDocument, Path]:
    """Measure every step not already on disk; returns the result document and its path.

    ``on_event`` sees each ``StepProgress`` and each ``StepFinished`` (after the file is written). Once
    ``cancel`` is requested the running step finishes and is recorded, no other starts, and the document is
    returned without ``complete``: a rerun measures the rest.

    With ``master_bind`` the load comes from ``expect_workers`` worker processes started elsewhere
    (``accelbench loadtest-worker``) instead of local ones; ``profile.processes`` must equal that count.

    Raises ServerError when the server stops answering mid-sweep (finished steps stay on disk, the
    running one is recorded INVALID) and MeasurementError when the load generator itself fails.
    """
    if master_bind is not None and profile.processes != master_bind.expect_workers:
        raise BadInputError("with --expect-workers N the load processes are the N workers (drop --processes)")
    path = result_path(out_dir, variant, profile)
    doc = results.new_document(
        model=model, variant=variant, manifest=manifest, profile=profile,
        server={"url": server.client_url(profile.protocol), "version": server.version},
        repository_config=repository_config, command=command,
        target=target, precision=precision,
    )  # fmt: skip
    doc.steps, was_complete = _kept_steps(path, manifest.manifest_hash if manifest else "", profile)
    done = {s.index for s in doc.steps}
    todo = [s for s in profile.steps() if s["index"] not in done]
    results.save(doc, path)
    load = _Load(doc, path, server, model, payloads, expected_outputs, profile, limits, on_event, master_bind,
                 cancel)  # fmt: skip
    # a finished document is not measured again by a rerun; an unfinished one may still have retries left
    if profile.search is not None:
        old = results.load_document(path) if doc.steps else None  # the kept steps' phases
        doc.search = old.search if old is not None else None
        search_run.drive(load, was_complete, lambda: _stopped(load.cancel))
    elif todo:
        load.measure(todo, retry_rounds=limits.retries)
    elif not was_complete:
        load.measure(to_retry(doc, profile, limits.retries), retry_rounds=limits.retries - 1)
    if _stopped(cancel):
        return doc, path
    doc.complete = True
    results.save(doc, path)
    return doc, path


def to_retry(doc: ResultDocument, profile: LoadProfile, retries: int) -> list[dict[str, Any]]:
    """The planned steps to measure again: INVALID only for drift or no steady state, with attempts left
    (``retries`` more than the first). The new attempt replaces the step; the old one is kept inside it."""
    steps = {s.index: s for s in doc.steps}
    return [
        plan for plan in profile.steps()
        if (s := steps.get(plan["index"])) is not None and not s.aborted
        and worth_retrying(s.verdict, s.reasons) and (s.attempt or 1) <= retries
    ]  # fmt: skip


def _stopped(cancel: Cancel | None) -> bool:
    return cancel is not None and cancel.requested


@dataclass
class _Load:
    """One Locust child measures a sweep's steps and then its retries: the steps INVALID only for drift or no
    steady state go back to the same child (``child.send_steps``), so the same load processes, and with
    ``bind`` the same workers on other hosts, measure them (workers started elsewhere cannot be asked back)."""

    doc: ResultDocument
    path: Path
    server: Server
    model: str
    payloads: list[dict[str, np.ndarray]]
    expected: list[dict[str, Any]]
    profile: LoadProfile
    limits: Limits
    on_event: Callable[[Event], None] | None
    bind: MasterBind | None
    cancel: Cancel | None

    def measure(self, plans: list[dict[str, Any]], retry_rounds: int,
                more: Callable[[], list[dict[str, Any]]] | None = None) -> None:  # fmt: skip
        """Measure ``plans``, then up to ``retry_rounds`` rounds of retries (or, given ``more``, the steps it
        gives each time the child has measured those before, until none); raises what stopped the load."""
        if not plans or _stopped(self.cancel):
            return
        with tempfile.TemporaryDirectory(prefix="accelbench-load-") as tmp:
            config = self._write_config(Path(tmp), plans)
            failure = self._drive(config, Path(tmp) / "locust.log", plans, retry_rounds, more)
        if failure:
            raise failure

    def _write_config(self, tmp: Path, plans: list[dict[str, Any]]) -> Path:
        write_payloads(self.payloads, tmp / "payloads.npz")
        cfg = {
            **self.profile.to_dict(),
            "steps": plans,
            "model": self.model,
            "url": self.server.client_url(self.profile.protocol),
            "http_url": self.server.http_url,
            "metrics_url": self.server.metrics_url,
            "payloads_file": str(tmp / "payloads.npz"),
            "expected_outputs": self.expected,
            "master_port": free_port(),
            "sample_floor": self.limits.sample_floor,
            **(self.bind.config() if self.bind else {}),
        }  # fmt: skip
        (tmp / "config.json").write_text(json.dumps(cfg))
        return tmp / "config.json"

    def _retries(self, rounds_left: int) -> list[dict[str, Any]]:
        if rounds_left <= 0 or _stopped(self.cancel):
            return []
        return to_retry(self.doc, self.profile, self.limits.retries)

    def _drive(self, config_path: Path, log_path: Path, plans: list[dict[str, Any]], retry_rounds: int,
               more: Callable[[], list[dict[str, Any]]] | None = None) -> Exception | None:  # fmt: skip
        """Run the child, recording each step as it arrives and handing it the retries; the first problem,
        if any, is returned. A requested ``cancel`` ends the child after the step that finishes next (the
        rest stay unmeasured)."""
        pending = {plan["index"]: plan for plan in plans}  # sent to the child, not measured yet
        problem: Exception | None = None
        with open(log_path, "w") as log:
            child = start_runner([str(config_path)], log, steps_on_stdin=True)
            try:
                stream = EventStream(child, _budget_s(self.profile, len(plans)) + cfg_wait_s(config_path))
                for event in stream:
                    if isinstance(event, LoadDone):
                        break
                    if isinstance(event, LoadTimedOut):
                        problem = MeasurementError(
                            f"load generator did not finish within {event.after_s:.0f} s"
                        )
                        break
                    if isinstance(event, StepsDone):
                        again = more() if more is not None and not problem else self._retries(retry_rounds)
                        retry_rounds -= 1
                        pending.update((plan["index"], plan) for plan in again)
                        stream.extend(_budget_s(self.profile, len(again)) if again else 0.0)
                        send_steps(child, again)  # none: the child ends
                        continue
                    shown: Event = event
                    if isinstance(event, StepMeasured):
                        step, cut_short = self._record(event.step)
                        problem = problem or cut_short
                        pending.pop(step.index, None)
                        shown = StepFinished(step, self.doc, Path(self.path))
                    elif isinstance(event, LoadFailed):
                        problem = MeasurementError(f"load generator failed: {event.message}")
                    if self.on_event:
                        self.on_event(shown)
                    if isinstance(shown, StepFinished) and _stopped(self.cancel):
                        break
                if not _stopped(self.cancel):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        child.wait(timeout=15)
            finally:
                if child.stdin is not None:
                    with contextlib.suppress(OSError):
                        child.stdin.close()
                end_group(child)
        return self._missing(list(pending.values()), problem, child.returncode, log_path)

    def _record(self, raw: dict[str, Any]) -> tuple[Step, Exception | None]:
        """The step the child measured, recorded; and the error a step cut short is."""
        step = results.put_step(self.doc, build_step(raw, self.profile.kind, self.profile.batch_size,
                                                     self.limits), self.path)  # fmt: skip
        if not step.aborted:
            return step, None
        error = MeasurementError if raw.get("aborted_by") == "loadgen" else ServerError
        return step, error(
            f"step {step.index} ({offered_label(to_dict(step.offered))}) did not finish: {step.aborted}; "
            f"finished steps kept in {self.path}"
        )

    def _missing(self, missing: list[dict[str, Any]], problem: Exception | None, returncode: int | None,
                 log_path: Path) -> Exception | None:  # fmt: skip
        """What to report when steps sent to the child were never measured (the first is recorded cut short
        with the reason); nothing when a cancel stopped the child between steps."""
        if problem is None and missing and _stopped(self.cancel):
            return None  # stopped on request between steps: nothing failed, the rest is measured on a rerun
        if problem is None and missing:
            problem = MeasurementError(f"load generator exited with code {returncode}: {last_line(log_path)}")
        if missing and not any(s.aborted for s in self.doc.steps):
            aborted = _aborted_step(missing[0], str(problem))
            results.put_step(self.doc, build_step(aborted, self.profile.kind, self.profile.batch_size,
                                                  self.limits), self.path)  # fmt: skip
        return problem


def cfg_wait_s(config_path: Path) -> float:
    """How long the master may wait for workers elsewhere (none with local processes)."""
    return float(json.loads(Path(config_path).read_text()).get("worker_timeout_s") or 0.0)


def _budget_s(profile: LoadProfile, steps: int) -> float:
    """The longest a healthy child can take: start-up, then per step spawn, warm-up, window, two drains."""
    window = max(profile.duration_s or 0.0, profile.max_duration_s)
    return 90.0 + steps * (20.0 + profile.warmup_s + window + 2 * (profile.timeout_s + 15.0))


def _aborted_step(plan: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"index": plan["index"], "offered": plan["offered"], "aborted": reason, "duration_s": 0.0}
