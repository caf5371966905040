"""Pure parts of the load-test stage: µs histograms and exact merging, verdicts, profiles, the result
document and resume. No server, no Locust."""

from __future__ import annotations

import json
import random
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.documents import Step, dump_json, to_dict
from accelbench.errors import BadInputError
from accelbench.loadtests import histogram, results, samples
from accelbench.loadtests.events import MeasuredStep
from accelbench.loadtests.profiles import LoadProfile, StepPlan, parse_levels
from accelbench.loadtests.sweep import build_step
from accelbench.loadtests.verdict import INVALID, LOW_PRECISION, VALID, Limits, judge
from tests.test_manifest import variant_manifest


def test_sub_millisecond_latencies_keep_microseconds():
    hist = histogram.new_histogram()
    for us in (180, 190, 200, 210, 950):
        histogram.record_us(hist, us)
    summary = histogram.summary_us(hist)
    assert summary["p50"] == 200  # Locust would say 0 ms
    assert 949 <= summary["max"] <= 951
    assert summary["p99"] > summary["p50"]


def test_out_of_range_values_are_clamped_not_lost():
    hist = histogram.new_histogram()
    histogram.record_us(hist, 0)
    histogram.record_us(hist, 10**12)
    assert hist.get_total_count() == 2


def test_empty_histogram_summary_is_none():
    assert set(histogram.summary_us(histogram.new_histogram()).values()) == {None}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(1, 5_000_000), min_size=0, max_size=200), min_size=1, max_size=4))
@pytest.mark.slow
def test_merging_encoded_histograms_equals_one_histogram_of_all_samples(parts):
    whole = histogram.new_histogram()
    encoded = []
    for values in parts:
        part = histogram.new_histogram()
        for us in values:
            histogram.record_us(part, us)
            histogram.record_us(whole, us)
        encoded.append(histogram.encode(part))
    merged = histogram.merge(encoded)
    assert merged.get_total_count() == whole.get_total_count()
    assert histogram.summary_us(merged) == histogram.summary_us(whole)


def test_merge_is_not_an_average_of_percentiles():
    fast, slow = histogram.new_histogram(), histogram.new_histogram()
    for _ in range(99):
        histogram.record_us(fast, 100)
    histogram.record_us(slow, 10_000)
    merged = histogram.summary_us(histogram.merge([histogram.encode(fast), histogram.encode(slow)]))
    assert merged["p50"] == 100  # an average of the two p50s would be ~5000
    assert merged["max"] >= 9_990


def test_samples_round_trip_and_merge_in_completion_order():
    a = samples.encode(array("q", [3_000, 1_000_000]), array("q", [30, 10]))
    b = samples.encode(array("q", [500_000]), array("q", [20]))
    done, lat = samples.merge([a, None, b])
    assert done.tolist() == [0.003, 0.5, 1.0] and lat.tolist() == [30, 20, 10]
    assert samples.decode(samples.merge_encoded([a, b]))[1].tolist() == [30, 20, 10]
    assert samples.merge_encoded([None]) is None


def _judge(**kw):
    args = {"requests": 1000, "error_rate": 0.0, "loadgen_cpu": [0.3]}
    args.update(kw)
    return judge(**args)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"requests": 10}, "too few requests"),
        ({"error_rate": 0.05}, "error rate"),
        ({"invalid": ["drift: mean latency changed +30%"]}, "drift"),
        ({"loadgen_cpu": [0.2, 0.97]}, "load generator saturated"),
        ({"offered_rps": 400.0, "achieved_rps": 300.0}, "open-loop rate not achieved"),
        ({"aborted": "server gone"}, "did not finish: server gone"),
    ],
)
def test_each_invalid_reason(change, reason):
    verdict, reasons = _judge(**change)
    assert verdict == INVALID
    assert len(reasons) == 1 and reason in reasons[0]


def test_valid_step_has_no_reasons():
    assert _judge(offered_rps=400.0, achieved_rps=380.0) == (VALID, [])


def test_profile_validation_and_plans():
    closed = LoadProfile(kind="closed", protocol="http", levels=(1, 2, 4))
    assert [s.offered for s in closed.steps()] == [
        {"concurrency": 1},
        {"concurrency": 2},
        {"concurrency": 4},
    ]
    opened = LoadProfile(kind="open", protocol="grpc", levels=(100.0,), processes=2)
    assert opened.steps() == [StepPlan(0, rate_rps=100.0)]
    assert [StepPlan.from_wire(json.loads(json.dumps(s.to_wire()))) for s in closed.steps()] == closed.steps()
    assert LoadProfile.from_dict(json.loads(json.dumps(closed.to_dict()))) == closed
    for bad in ({"kind": "ramp"}, {"protocol": "udp"}, {"levels": (1.5,)}, {"levels": ()}, {"duration_s": -1},
                {"shapes": ("x",)}, {"check_every": 0}, {"batch_size": True}):  # fmt: skip
        with pytest.raises(BadInputError):
            LoadProfile(**{"kind": "closed", "protocol": "http", "levels": (1,), **bad})
    # 0, as a spec writes it, means no least duration: the same profile (and resume key) as none
    assert LoadProfile(kind="closed", levels=(1,), duration_s=0) == LoadProfile(kind="closed", levels=(1,))
    assert parse_levels("1, 2,4") == (1.0, 2.0, 4.0)
    with pytest.raises(BadInputError, match="comma-separated"):
        parse_levels("1,two")


def _raw(index: int, latencies: list[int], errors: int = 0, **extra) -> MeasuredStep:
    hist = histogram.new_histogram()
    for us in latencies:
        histogram.record_us(hist, us)
    raw = {
        "index": index, "offered": {"concurrency": 2}, "duration_s": 2.0, "started_at": "t",
        "requests": len(latencies) + errors, "inferences": len(latencies) * 4, "drops": 0,
        "errors": {"connection": errors, "timeout": 0, "server": 0, "wrong_output": 0},
        "histogram": histogram.encode(hist), "loadgen": [{"cpu_s": 0.5, "wall_s": 2.0}],
        "windows": [(100.0, 900.0)] * 3, "aborted": None,
        "samples": samples.encode(array("q", [int(i * 2e6 / len(latencies)) for i in range(len(latencies))]),
                                  array("q", latencies)),
        "server_stats": {"success_count": len(latencies)}, "metrics": None,
    }  # fmt: skip
    raw.update(extra)
    return MeasuredStep.from_wire(json.loads(json.dumps(raw)))  # as it crosses the process edge


def test_build_step_fills_the_documented_fields():
    rng = random.Random(0)
    typed = build_step(_raw(0, [rng.randint(300, 900) for _ in range(400)], errors=2), "closed", 4, Limits())
    assert isinstance(typed, Step)
    step = to_dict(typed)  # as the result file has it
    assert "samples" not in step  # the per-request arrays are summarised, never stored
    for key in ("index", "offered", "started_at", "duration_s", "requests", "inferences", "errors", "error_rate",
                "throughput_rps", "throughput_ips", "latency_us", "histogram", "server_stats", "metrics",
                "energy_per_request_j", "verdict", "reasons"):  # fmt: skip
        assert key in step
    assert step["throughput_rps"] == 200.0 and step["throughput_ips"] == 800.0
    assert 300 <= step["latency_us"]["p50"] <= 900
    assert step["error_rate"] == pytest.approx(2 / 402, abs=1e-6)
    assert step["loadgen"]["cpu_fraction"] == [0.25]
    stats = step["statistics"]
    assert stats["n"] == 400 and stats["sample_floor"] == 662 and stats["throughput_rps"]["df"] == 9
    p50 = stats["latency_us"]["p50"]
    assert p50["low"] <= p50["value"] == step["latency_us"]["p50"] <= p50["high"]
    # 400 requests are fewer than p99 needs: shown and used, but LOW-PRECISION, saying why
    assert step["verdict"] == LOW_PRECISION and "below the 662 that p99 needs" in step["reasons"][0]
    more = build_step(_raw(0, [rng.randint(300, 900) for _ in range(2000)]), "closed", 1, Limits())
    assert more.verdict == VALID and more.reasons == []


def _doc(tmp_path, profile):
    return results.new_document(
        model="identity", variant="identity__cpu-local__fp32", manifest=variant_manifest("abc", model="identity"),
        profile=profile, server={"url": "u", "version": "2.51"},
    )  # fmt: skip


def test_result_document_resume_rules(tmp_path):
    profile = LoadProfile(kind="closed", protocol="http", levels=(1, 2, 4))
    path = tmp_path / "r.json"
    doc = _doc(tmp_path, profile)
    results.put_step(doc, build_step(_raw(0, [500] * 100), "closed", 1, Limits()), path)
    results.put_step(
        doc, build_step(_raw(1, [], aborted="server gone", duration_s=0.0), "closed", 1, Limits()), path
    )
    on_disk = results.load_document(path)
    assert json.loads(path.read_text())["schema"] == "accelbench.result/1"
    assert dump_json(on_disk) == path.read_text()
    assert [s.verdict for s in on_disk.steps] == [LOW_PRECISION, INVALID]
    assert results.resumable(on_disk, "abc", profile)
    assert [s.index for s in results.finished_steps(on_disk)] == [0]  # the aborted step runs again
    assert not results.resumable(on_disk, "other-hash", profile)
    longer = LoadProfile(kind="closed", protocol="http", levels=(1, 2, 4), duration_s=20)
    assert not results.resumable(on_disk, "abc", longer)


def test_foreign_file_is_bad_input(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"schema": "something-else"}')
    with pytest.raises(BadInputError, match="schema"):
        results.load_document(path)
    path.write_text("{not json")
    with pytest.raises(BadInputError, match="not a readable"):
        results.load_document(path)


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["--concurrency", "1", "--rate", "10"], 2, "exactly one of --concurrency or --rate"),
        (["--concurrency", "1,x"], 2, "comma-separated"),
        (["--concurrency", "1"], 2, "no models"),
        (["--concurrency", "1", "--shape", "X"], 2, "expected NAME:D1,D2"),
        (["--concurrency", "1", "--input-data", "missing.json"], 2, "no such file (or use zero / random)"),
        (["--concurrency", "1", "--check-every", "0"], 2, "--check-every: 0 must be a whole number >= 1"),
        (["--concurrency", "1.5"], 2, "--concurrency: closed-loop concurrency must be whole numbers"),
        (["--rate", "10", "--duration", "-1"], 2, "--duration: -1.0 must be a number >= 0"),
        (["--concurrency", "1", "--isl-range", "1.5"], 2, "--isl-range: 1.5 must be in (0, 1]"),
        (
            ["--concurrency", "1", "--card", "builtin:identity", "--url", "http://127.0.0.1:9"],
            4,
            "unreachable",
        ),
    ],
)
@pytest.mark.slow
def test_cli_bad_input_is_one_line(tmp_path, args, code, text):
    import subprocess
    import sys
    from pathlib import Path

    cli = str(Path(sys.executable).parent / "accelbench")
    if "--url" not in args:
        args = [str(tmp_path), *args]
    run = subprocess.run([cli, "loadtest", "--model", "m", "--out", str(tmp_path), *args],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode == code, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], run.stderr


def test_a_hung_load_child_is_noticed_and_its_group_ended():
    import subprocess
    import sys

    from accelbench.loadtests.child import EventStream, end_group
    from accelbench.loadtests.events import LoadTimedOut, StepProgress, to_wire

    line = json.dumps(to_wire(StepProgress(0, {"concurrency": 1}, 1.0, 5.0, 900)))
    code = f"import time; print('a line a library printed'); print({line!r}, flush=True); time.sleep(60)"
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        seen = list(EventStream(child, budget_s=3.0))
    finally:
        end_group(child)
    assert seen == [StepProgress(0, {"concurrency": 1}, 1.0, 5.0, 900), LoadTimedOut(3.0)]
    assert child.poll() is not None


def test_master_bind_parsing_and_loopback_target_guard():
    from accelbench.errors import BadInputError
    from accelbench.loadtests.distributed import MasterBind, check_reachable_target, parse_host_port

    assert parse_host_port("10.0.0.5:5557", "--master") == ("10.0.0.5", 5557)
    assert parse_host_port("[::1]:5557", "--master") == ("::1", 5557)
    for bad in ("10.0.0.5", ":5557", "host:0", "host:port", "host:70000"):
        with pytest.raises(BadInputError, match="expected HOST:PORT"):
            parse_host_port(bad, "--master")
    with pytest.raises(BadInputError, match="expect-workers"):
        MasterBind("127.0.0.1", 5557, 0)
    # loopback master with a loopback target: fine; a master open to other hosts must not hand them loopback
    check_reachable_target(MasterBind("127.0.0.1", 5557, 2), "http://127.0.0.1:8000")
    check_reachable_target(MasterBind("10.0.0.5", 5557, 2), "http://10.0.0.9:8000")
    with pytest.raises(BadInputError, match="loopback"):
        check_reachable_target(MasterBind("0.0.0.0", 5557, 2), "http://localhost:8000")
    with pytest.raises(BadInputError, match="loopback"):
        check_reachable_target(MasterBind("10.0.0.5", 5557, 2), "127.0.0.1:8001")


def test_progress_lines_name_the_offered_load_in_words():
    from accelbench.commands.loadtests import _step_line
    from accelbench.experiment.progress import step_note
    from accelbench.loadtests.profiles import offered_label

    assert offered_label({"concurrency": 1}) == "concurrency 1"
    assert offered_label({"rate_rps": 200.0}) == "200 requests/s"
    from accelbench.documents import Step

    step = Step.model_validate({"index": 0, "offered": {"concurrency": 1}, "throughput_rps": 10.0, "verdict": "VALID",
                                "reasons": [], "latency_us": {"p50": 5, "p99": 9}, "errors": {"connection": 0}})  # fmt: skip
    assert step_note(step).startswith("  concurrency 1: 10.0 req/s") and "{" not in step_note(step)
    assert _step_line(step).startswith("step 0 concurrency 1:")
