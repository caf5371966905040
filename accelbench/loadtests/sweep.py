"""A load sweep from the caller's side: plan the steps, run Locust in a child process, judge and record.

The caller's process never imports Locust or gevent. The child (``accelbench.loadtests.runner``) runs in
its own process group, which is ended afterwards so no worker outlives the sweep.
"""

from __future__ import annotations

import contextlib
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
from accelbench.loadtests.edge import ChildConfig, LoadConfig
from accelbench.loadtests.events import (
    Cancel,
    Event,
    LoadDone,
    LoadFailed,
    LoadTimedOut,
    MeasuredStep,
    StepFinished,
    StepMeasured,
    StepsDone,
)
from accelbench.loadtests.profiles import LoadProfile, StepPlan, offered_label
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


@dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs and is recorded, beyond what it measures: passed whole through ``api.measure``,
    ``generative.generative_loadtest`` and ``run_sweep``. ``manifest``, ``repository_config``, ``command``,
    ``target`` and ``precision`` go into the document; ``limits`` judge each step; ``on_event`` sees each
    event; ``master_bind`` takes the load from workers elsewhere; ``cancel`` stops the sweep between steps."""

    out_dir: str | os.PathLike[str]
    manifest: VariantManifest | None = None
    repository_config: str = ""
    command: str = ""
    limits: Limits = DEFAULT_LIMITS
    on_event: Callable[[Event], None] | None = None
    master_bind: MasterBind | None = None
    target: str | None = None
    precision: str | None = None
    cancel: Cancel | None = None


def build_step(raw: MeasuredStep, kind: str, batch_size: int, limits: Limits) -> Step:
    """The result document's step from the child's raw totals (pure)."""
    duration = raw.duration_s or 0.0
    requests = raw.requests
    errors = raw.errors or {"connection": 0, "timeout": 0, "server": 0, "wrong_output": 0}
    n_errors = sum(errors.values())
    hist = histogram.decode(raw.histogram) if raw.histogram else histogram.new_histogram()
    successes = hist.get_total_count()
    cpu = [p.cpu_s / p.wall_s for p in raw.loadgen if p.wall_s]
    total_cpu_s = sum(p.cpu_s for p in raw.loadgen)
    error_rate = n_errors / requests if requests else (1.0 if raw.aborted else 0.0)
    rps = successes / duration if duration else 0.0
    offered = raw.offered
    achieved = requests / duration if duration else 0.0
    done_s, latency_us = samples.decode(raw.samples)
    statistics: StepStatistics | None = None
    invalid: list[str] = []
    low: list[str] = []
    if len(latency_us) and not raw.aborted:
        statistics, invalid, low = analyse(done_s, latency_us, duration, limits)
        if statistics.throughput_rps is not None and statistics.throughput_rps.value is not None:
            rps = statistics.throughput_rps.value
    generative = None
    if raw.generative and not raw.aborted:  # token-level figures (genstats.py)
        from accelbench.loadtests import genstats

        generative, more_invalid, more_low = genstats.step(
            raw.generative,
            offered,
            duration,
            total_cpu_s,
            n_errors,
            limits.sample_floor,
            limits.ci_batches,
        )
        invalid, low = [*invalid, *more_invalid], [*low, *more_low]
        if raw.engine_metrics is not None:  # the engine's /metrics during the step (serving/engine_metrics)
            generative["engine_metrics"] = raw.engine_metrics
    verdict, reasons = judge(
        requests=requests,
        error_rate=error_rate,
        loadgen_cpu=cpu,
        invalid=invalid,
        low_precision=low,
        offered_rps=offered.get("rate_rps") if kind == "open" else None,
        achieved_rps=achieved if kind == "open" else None,
        aborted=raw.aborted,
        limits=limits,
    )
    return Step(
        index=raw.index,
        offered=offered,
        started_at=raw.started_at,
        duration_s=duration,
        requests=requests,
        inferences=raw.inferences,
        errors=errors,
        error_rate=round(error_rate, 6),
        dropped=raw.drops,
        throughput_rps=round(rps, 3),
        throughput_ips=round(rps * batch_size, 3),
        # after the warm-up cut, from the exact samples (the histogram keeps the whole window, 3 digits)
        latency_us=_latency_summary(statistics, hist),
        latency_from="intended send time" if kind == "open" else "actual send time",
        histogram=raw.histogram,
        server_stats=raw.server_stats,
        metrics=raw.metrics,
        energy_per_request_j=_energy_per_request_j(raw.metrics, successes),
        loadgen=Loadgen(
            processes=len(raw.loadgen),
            # each process: its index, host, pid and request count (several hosts when distributed)
            per_process=[
                {"index": p.index, "host": p.host, "pid": p.pid, "requests": p.requests} for p in raw.loadgen
            ],
            cpu_fraction=[round(c, 3) for c in cpu],
            cpu_us_per_request=round(total_cpu_s * 1e6 / requests, 1) if requests else None,
            event_loop_lag_us=raw.loop_lag_us,
        ),
        windows=[Window(throughput_rps=w[0], p99_us=w[1]) for w in raw.windows],
        statistics=statistics,
        generative=generative,
        aborted=raw.aborted,
        last_error=raw.last_error,
        verdict=verdict,
        reasons=reasons,
    )


def _latency_summary(statistics: StepStatistics | None, hist: HdrHistogram) -> dict[str, Any]:
    summary = histogram.summary_us(hist)
    for key, interval in ((statistics.latency_us if statistics else None) or {}).items():
        if interval.value is not None:
            summary[key] = int(interval.value)
    return summary


def _energy_per_request_j(metrics: dict[str, Any] | None, successes: int) -> float | None:
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


def result_path(out_dir: str | os.PathLike[str], variant: str, profile: LoadProfile) -> Path:
    """Where the sweep of ``variant`` under ``profile`` keeps its result document."""
    return Path(out_dir) / f"{results.run_id(variant, profile.label(), profile.repeat)}.json"


def _kept_steps(path: Path, manifest_hash: str, profile: LoadProfile) -> tuple[list[Step], bool]:
    """Resume: the finished steps a rerun keeps (same variant hash and load profile), and whether that
    document was complete. A changed variant or profile keeps nothing."""
    old = results.load_document(path)
    if old is None or not results.resumable(old, manifest_hash, profile):
        return [], False
    return results.finished_steps(old), old.complete


def is_complete(path: str | os.PathLike[str], manifest_hash: str, profile: LoadProfile) -> bool:
    """True when a sweep to ``path`` would measure nothing: every step kept and the document complete
    (the pipeline then need not even start a server)."""
    kept, complete = _kept_steps(Path(path), manifest_hash, profile)
    return complete and {s.index for s in kept} >= {s.index for s in profile.steps()}


def run_sweep(
    *,
    server: Server,
    model: str,
    variant: str,
    payloads: list[dict[str, np.ndarray]],
    expected_outputs: list[dict[str, Any]],
    profile: LoadProfile,
    options: SweepOptions,
) -> tuple[ResultDocument, Path]:
    """Measure every step not already on disk (under ``options.out_dir``); returns the result document and
    its path.

    ``options.on_event`` sees each ``StepProgress`` and each ``StepFinished`` (after the file is written). Once
    ``cancel`` is requested the running step finishes and is recorded, no other starts, and the document is
    returned without ``complete``: a rerun measures the rest.

    With ``options.master_bind`` the load comes from ``expect_workers`` worker processes started elsewhere
    (``accelbench loadtest-worker``) instead of local ones; ``profile.processes`` must equal that count.

    Raises ServerError when the server stops answering mid-sweep (finished steps stay on disk, the
    running one is recorded INVALID) and MeasurementError when the load generator itself fails.
    """
    o = options
    if o.master_bind is not None and profile.processes != o.master_bind.expect_workers:
        raise BadInputError("with --expect-workers N the load processes are the N workers (drop --processes)")
    path = result_path(o.out_dir, variant, profile)
    doc = results.new_document(
        model=model,
        variant=variant,
        manifest=o.manifest,
        profile=profile,
        server={"url": server.client_url(profile.protocol), "version": server.version},
        repository_config=o.repository_config,
        command=o.command,
        target=o.target,
        precision=o.precision,
    )
    doc.steps, was_complete = _kept_steps(path, o.manifest.manifest_hash if o.manifest else "", profile)
    done = {s.index for s in doc.steps}
    todo = [s for s in profile.steps() if s.index not in done]
    retries = o.limits.retries
    old = results.load_document(path) if doc.steps else None  # the kept steps' document
    again = to_retry(doc, profile, retries) if not todo and not was_complete else []
    if old is not None and profile.search is None and not todo and not again:
        # nothing left to measure: the document stays the one of the run that measured it (its created_at,
        # server, command), so an attempt that only completes it gives the same result, not a second one
        doc.provenance = old.provenance
    results.save(doc, path)
    load = _Load(doc, path, server, model, payloads, tuple(expected_outputs), profile, o)
    # a finished document is not measured again by a rerun; an unfinished one may still have retries left
    if profile.search is not None:
        doc.search = old.search if old is not None else None  # the kept steps' phases
        search_run.drive(load, was_complete, lambda: _stopped(load.cancel))
    elif todo:
        load.measure(todo, retry_rounds=retries)
    elif again:
        load.measure(again, retry_rounds=retries - 1)
    if _stopped(o.cancel):
        return doc, path
    doc.complete = True
    results.save(doc, path)
    return doc, path


def to_retry(doc: ResultDocument, profile: LoadProfile, retries: int) -> list[StepPlan]:
    """The planned steps to measure again: INVALID only for drift or no steady state, with attempts left
    (``retries`` more than the first). The new attempt replaces the step; the old one is kept inside it."""
    steps = {s.index: s for s in doc.steps}
    return [
        plan
        for plan in profile.steps()
        if (s := steps.get(plan.index)) is not None
        and not s.aborted
        and worth_retrying(s.verdict, s.reasons)
        and (s.attempt or 1) <= retries
    ]


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
    expected: tuple[dict[str, Any], ...]
    profile: LoadProfile
    options: SweepOptions

    @property
    def limits(self) -> Limits:
        return self.options.limits

    @property
    def cancel(self) -> Cancel | None:
        return self.options.cancel

    @property
    def bind(self) -> MasterBind | None:
        return self.options.master_bind

    def measure(
        self, plans: list[StepPlan], retry_rounds: int, more: Callable[[], list[StepPlan]] | None = None
    ) -> None:
        """Measure ``plans``, then up to ``retry_rounds`` rounds of retries (or, given ``more``, the steps it
        gives each time the child has measured those before, until none); raises what stopped the load."""
        if not plans or _stopped(self.cancel):
            return
        with tempfile.TemporaryDirectory(prefix="accelbench-load-") as tmp:
            config = self._config(Path(tmp), plans)
            failure = self._drive(
                config.write(Path(tmp) / "config.json"),
                config,
                Path(tmp) / "locust.log",
                plans,
                retry_rounds,
                more,
            )
        if failure:
            raise failure

    def _config(self, tmp: Path, plans: list[StepPlan]) -> ChildConfig:
        write_payloads(self.payloads, tmp / "payloads.npz")
        load = LoadConfig(
            self.profile, self.model, self.server.client_url(self.profile.protocol), self.expected
        )
        return ChildConfig(
            load=load,
            steps=tuple(plans),
            payloads_file=str(tmp / "payloads.npz"),
            http_url=self.server.http_url,
            metrics_url=self.server.metrics_url,
            master_port=free_port(),
            sample_floor=self.limits.sample_floor,
            bind=self.options.master_bind,
        )

    def _retries(self, rounds_left: int) -> list[StepPlan]:
        if rounds_left <= 0 or _stopped(self.cancel):
            return []
        return to_retry(self.doc, self.profile, self.limits.retries)

    def _drive(
        self,
        config_path: Path,
        config: ChildConfig,
        log_path: Path,
        plans: list[StepPlan],
        retry_rounds: int,
        more: Callable[[], list[StepPlan]] | None = None,
    ) -> Exception | None:
        """Run the child, recording each step as it arrives and handing it the retries; the first problem,
        if any, is returned. A requested ``cancel`` ends the child after the step that finishes next (the
        rest stay unmeasured)."""
        pending = {plan.index: plan for plan in plans}  # sent to the child, not measured yet
        problem: Exception | None = None
        with open(log_path, "w") as log:
            child = start_runner([str(config_path)], log, steps_on_stdin=True)
            try:
                stream = EventStream(child, _budget_s(self.profile, len(plans)) + _wait_s(config))
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
                        pending.update((plan.index, plan) for plan in again)
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
                    if self.options.on_event:
                        self.options.on_event(shown)
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

    def _record(self, raw: MeasuredStep) -> tuple[Step, Exception | None]:
        """The step the child measured, recorded; and the error a step cut short is."""
        step = results.put_step(
            self.doc, build_step(raw, self.profile.kind, self.profile.batch_size, self.limits), self.path
        )
        if not step.aborted:
            return step, None
        error = MeasurementError if raw.aborted_by == "loadgen" else ServerError
        return step, error(
            f"step {step.index} ({offered_label(to_dict(step.offered))}) did not finish: {step.aborted}; "
            f"finished steps kept in {self.path}"
        )

    def _missing(
        self, missing: list[StepPlan], problem: Exception | None, returncode: int | None, log_path: Path
    ) -> Exception | None:
        """What to report when steps sent to the child were never measured (the first is recorded cut short
        with the reason); nothing when a cancel stopped the child between steps."""
        if problem is None and missing and _stopped(self.cancel):
            return None  # stopped on request between steps: nothing failed, the rest is measured on a rerun
        if problem is None and missing:
            problem = MeasurementError(f"load generator exited with code {returncode}: {last_line(log_path)}")
        if missing and not any(s.aborted for s in self.doc.steps):
            aborted = MeasuredStep(missing[0].index, missing[0].offered, aborted=str(problem))
            results.put_step(
                self.doc,
                build_step(aborted, self.profile.kind, self.profile.batch_size, self.limits),
                self.path,
            )
        return problem


def _wait_s(config: ChildConfig) -> float:
    """How long the master may wait for workers elsewhere (none with local processes)."""
    return config.bind.timeout_s if config.bind else 0.0


def _budget_s(profile: LoadProfile, steps: int) -> float:
    """The longest a healthy child can take: start-up, then per step spawn, warm-up, window, two drains."""
    window = max(profile.duration_s or 0.0, profile.max_duration_s)
    return 90.0 + steps * (20.0 + profile.warmup_s + window + 2 * (profile.timeout_s + 15.0))
