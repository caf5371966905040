"""Re-measure instead of drop: a step judged INVALID for drift or no steady state is measured again up to
``retries`` times, every attempt kept inside the step, the first usable one used. The bookkeeping on typed
steps (pure), then a real sweep on the real tritonserver with a drift rule so strict every step trips it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from accelbench.documents import Step, dump_json, load_result
from accelbench.loadtests import results
from accelbench.loadtests.profiles import LoadProfile
from accelbench.loadtests.sweep import to_retry
from accelbench.loadtests.verdict import Limits, worth_retrying

DRIFT = "drift: mean latency changed +30% over the step (Mann–Kendall p = 0.001 < 0.01, Sen slope beyond ±5%)"
STEADY = "no steady state: MSER-5 would cut 900 of 1200 requests (more than half)"


def _step(index: int, verdict: str, reasons: list[str], rps: float = 100.0, **extra) -> Step:
    return Step(index=index, offered={"concurrency": index + 1}, throughput_rps=rps, verdict=verdict,
                reasons=reasons, **extra)  # fmt: skip


@pytest.mark.parametrize(("verdict", "reasons", "again"), [
    ("INVALID", [DRIFT], True), ("INVALID", [STEADY], True), ("INVALID", [DRIFT, STEADY], True),
    ("INVALID", [DRIFT, "error rate 5.00% above the limit 1.00%"], False),
    ("INVALID", ["load generator saturated: a load process used 97% of a core (limit 90%)"], False),
    ("INVALID", ["step did not finish: server gone"], False), ("INVALID", [], False),
    ("LOW-PRECISION", ["300 requests after the warm-up cut, below the 662 that p99 needs"], False),
    ("VALID", [], False),
])  # fmt: skip
def test_only_drift_and_no_steady_state_are_measured_again(verdict, reasons, again):
    assert worth_retrying(verdict, reasons) is again


def _doc(steps: list[Step]):
    profile = LoadProfile(
        kind="closed", protocol="http", levels=tuple(float(s.index + 1) for s in steps), duration_s=1.0
    )
    doc = results.new_document(model="m", variant="m", manifest=None, profile=profile,
                               server={"url": "u", "version": ""})  # fmt: skip
    doc.steps = steps
    return doc, profile


def test_a_new_attempt_keeps_the_old_inside_and_the_report_uses_the_first_usable(tmp_path):
    doc, profile = _doc([_step(0, "INVALID", [DRIFT], 90.0), _step(1, "VALID", [])])
    path = tmp_path / "r.json"
    assert [p.index for p in to_retry(doc, profile, retries=2)] == [0]
    results.put_step(doc, _step(0, "INVALID", [STEADY], 95.0), path)
    assert [p.index for p in to_retry(doc, profile, retries=2)] == [0]  # attempt 2 of 3
    results.put_step(doc, _step(0, "LOW-PRECISION", ["few requests"], 99.0), path)
    [step, _] = doc.steps
    assert step.attempt == 3 and step.verdict == "LOW-PRECISION" and step.throughput_rps == 99.0
    assert [(e.attempt, e.verdict, e.reasons, e.throughput_rps) for e in step.earlier_attempts] == [
        (None, "INVALID", [DRIFT], 90.0), (2, "INVALID", [STEADY], 95.0)]  # fmt: skip
    assert all(e.earlier_attempts is None for e in step.earlier_attempts)  # kept once, not nested
    assert to_retry(doc, profile, retries=2) == []
    on_disk = load_result(json.loads(path.read_text()))
    assert on_disk.steps[0].earlier_attempts[1].reasons == [STEADY]
    assert dump_json(on_disk) == path.read_text()  # the document round-trips with its attempts


def test_attempts_stop_at_the_limit_and_an_old_document_loads_unchanged(tmp_path):
    doc, profile = _doc([_step(0, "INVALID", [DRIFT])])
    path = tmp_path / "r.json"
    results.put_step(doc, _step(0, "INVALID", [DRIFT]), path)
    assert to_retry(doc, profile, retries=1) == []  # 1 retry: 2 attempts in all
    assert to_retry(doc, profile, retries=2) != []
    old = (
        Path(__file__).parent
        / "data"
        / "reports"
        / "cpu-local"
        / "resnet50__cpu-local__fp32__closed-http-b1.json"
    )
    assert dump_json(load_result(json.loads(old.read_text()))) == old.read_text()


def test_a_re_measurement_cut_short_gives_back_the_attempt_before_it(tmp_path):
    doc, _ = _doc([_step(0, "INVALID", [DRIFT], 90.0)])
    results.put_step(
        doc, _step(0, "INVALID", ["step did not finish: gone"], 0.0, aborted="gone"), tmp_path / "r.json"
    )
    [kept] = results.finished_steps(doc)
    assert kept.verdict == "INVALID" and kept.reasons == [DRIFT] and kept.throughput_rps == 90.0


@pytest.mark.slow
def test_a_real_sweep_measures_a_drifting_step_again_and_keeps_every_attempt(identity_repo, tmp_path):
    from accelbench.loadtests.api import loadtest
    from accelbench.loadtests.events import StepFinished

    events = []
    strict = Limits(drift_p=1.0, drift_change=0.0, retries=1)  # any trend at all counts as drift
    profile = LoadProfile(
        kind="closed", protocol="http", levels=(1.0,), duration_s=1.0, max_duration_s=3.0, warmup_s=0.5
    )
    doc, path = loadtest(model="identity__cpu-local__fp32", profile=profile, out_dir=tmp_path, repo=identity_repo,
                         limits=strict, on_event=events.append, command=" ".join(sys.argv))  # fmt: skip
    [step] = doc.steps
    assert step.attempt == 2 and len(step.earlier_attempts) == 1
    first = step.earlier_attempts[0]
    assert first.verdict == "INVALID" and any(r.startswith("drift:") for r in first.reasons)
    assert (
        first.statistics.throughput_rps.low is not None
    )  # an INVALID attempt keeps its figures and interval
    assert first.started_at != step.started_at  # measured twice, not copied
    assert [e.step.attempt for e in events if isinstance(e, StepFinished)] == [None, 2]
    on_disk = json.loads(Path(path).read_text())
    assert on_disk["complete"] and on_disk["steps"][0]["earlier_attempts"][0]["verdict"] == "INVALID"
