"""The formatting helpers the report and the pages share: tables of cases, and properties of ``num``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelbench.reports import formatting as f

ROOT = Path(__file__).resolve().parents[1]
PROBE = json.loads((ROOT / "bench" / "results" / "h200" / "2026-11-30" / "probe.json").read_text())


@pytest.mark.parametrize(("value", "text"), [
    (1238.0234171603388, "1,238"), (12345.6, "12,350"), (99999.9, "100,000"), (58.1, "58.1"), (1.0, "1"),
    (0.5, "0.5"), (0.012345, "0.01235"), (0.00012346, "0.0001235"), (-1234.5, "-1,235"), (0, "0"),
    (None, "—"), (1e-7, "1e-07"), (9.99999, "10"),
])  # fmt: skip
def test_num_keeps_four_significant_figures(value, text):
    assert f.num(value) == text


@given(st.floats(min_value=1e-4, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_num_is_within_half_a_unit_of_its_last_figure_and_never_longer(value):
    text = f.num(value)
    assert f.significant_figures(text) <= f.DIGITS
    assert math.isclose(float(text.replace(",", "")), value, rel_tol=5.01e-4)


@pytest.mark.parametrize(("args", "kwargs", "text"), [
    ((58.1, 55.0, 61.2), {"unit": "req/s"}, "58.1 [55, 61.2] req/s"),
    ((12_345.0, None, 13_000.0), {}, "12,350 [open, 13,000]"),
    ((1234.5, None, None), {"unit": "ms"}, "1,235 ms"),
    ((100.0, 90.0, 110.0), {"kind": "projected"}, "100 (proj, range 90–110)"),
    ((0.29632, 0.28, 0.31), {"prefix": "$"}, "$0.2963 [$0.28, $0.31]"),
    ((None, 1.0, 2.0), {}, "—"),
])  # fmt: skip
def test_a_figure_is_a_value_its_interval_and_its_unit(args, kwargs, text):
    assert f.with_interval(*args, **kwargs) == text


def test_latency_is_recorded_in_us_and_shown_in_ms():
    assert f.latency_ms(12_345.0, 11_900.0, 12_800.0) == "12.35 [11.9, 12.8] ms"


@pytest.mark.parametrize(("offered", "text"), [
    ({"concurrency": 8}, "concurrency 8"), ({"rate_rps": 100.0}, "100 req/s Poisson"),
    ({"concurrency": 4, "users": 2}, "concurrency 4, users 2"), ({}, "—"), (None, "—"),
])  # fmt: skip
def test_offered_load_reads_as_text(offered, text):
    assert f.offered_text(offered) == text


def test_a_hardware_probe_is_summarised_for_people():
    lines = dict(f.host_summary(PROBE))
    assert lines == {"CPU": "Intel(R) Xeon(R) Processor, 16 cores", "GPUs": "1 × NVIDIA H200 (140.4 GiB each)",
                     "memory": "125.9 GiB", "OS": "Ubuntu 24.04.3 LTS (kernel 6.18.44-fc-v657-gpu)",
                     "NVIDIA driver": "580.159.04, CUDA 13.0"}  # fmt: skip
    assert f.host_label(PROBE) == "1 × NVIDIA H200 (140.4 GiB each); Intel(R) Xeon(R) Processor, 16 cores"


def test_the_load_generators_probe_and_an_import_are_summarised_too():
    short = {
        "hostname": "vm",
        "platform": "Linux-6.1-x86_64",
        "machine": "x86_64",
        "cpu_count": 2,
        "python": "3.11",
    }
    assert dict(f.host_summary(short)) == {"hostname": "vm", "CPU": "x86_64, 2 cores", "GPUs": "none",
                                           "OS": "Linux-6.1-x86_64"}  # fmt: skip
    assert f.host_label(short) == "vm; x86_64, 2 cores"
    assert f.host_label({}) == "not recorded"


def test_the_full_probe_flattens_to_readable_rows():
    rows = dict(f.flatten(PROBE))
    assert rows["gpus[0].memory_total_bytes"] == "140.4 GiB" and rows["nvidia.present"] == "yes"
    assert rows["packages.tensorrt"] == "—" and rows["cpu.cores_logical"] == "16"
    assert not any(v.startswith(("{", "[")) for v in rows.values())


def test_accuracy_provenance_and_attempts_read_as_text():
    assert f.accuracy_rows({"metric": "top1", "value": 0.98765, "verdict": "PASS", "tolerance": 0.01, "worst": 0.97}) == [
        ("top1", "0.9877", "within 0.01 of FP32 (worst sample 0.97)", "PASS")]  # fmt: skip
    assert f.accuracy_rows(None) == []
    items = dict(f.provenance_items({"created_at": "2026-11-30T00:21:33+00:00", "command": "accelbench run",
                                     "packages": {"torch": "2.11.0", "tensorrt": None, "locust": "not installed"},
                                     "server": {"url": "http://h:8000", "version": "2.51.0"}}))  # fmt: skip
    assert items == {"created": "2026-11-30 00:21 UTC", "command": "accelbench run", "packages": "torch 2.11.0",
                     "server": "http://h:8000 (Triton 2.51.0)"}  # fmt: skip


@pytest.mark.parametrize(("text", "rounded"), [
    ("GPU 74.49392 + host 12.266; at 36.60258 (U)", "GPU 74.49 + host 12.27; at 36.6 (U)"),
    ("torch 2.11.0, 2026-11-30 00:21, @006059e0, x@812345.678901, run-12345", None),
    ("35040 requests, 123456 requests", "35040 requests, 123,500 requests"),
])  # fmt: skip
def test_free_text_keeps_words_versions_and_hashes_and_rounds_long_numbers(text, rounded):
    assert f.round_in_text(text) == (rounded or text)


def test_csv_keeps_every_digit():
    assert f.csv_text(["a", "b"], [[1238.0234171603388, None]]) == "a,b\n1238.0234171603388,\n"


def test_csv_writes_numpy_floats_as_numbers():
    import numpy as np

    # numpy 2's repr of its scalars is "np.float64(0.1)"; a CSV cell must stay a number
    assert f.csv_text(["a"], [[np.float64(0.1)]]) == "a\n0.1\n"


def test_attempts_say_how_often_a_step_was_measured():
    from accelbench.documents import Step

    first = Step(index=0, offered={"concurrency": 1}, verdict="INVALID", reasons=["drift: +30%"])
    second = Step(
        index=0, offered={"concurrency": 1}, verdict="INVALID", reasons=["no steady state: …"], attempt=2
    )
    step = Step(
        index=0, offered={"concurrency": 1}, verdict="VALID", attempt=3, earlier_attempts=[first, second]
    )
    assert f.attempts_text(first) == "1"
    assert (
        f.attempts_text(step) == "3 (attempt 1 INVALID: drift: +30%; attempt 2 INVALID: no steady state: …)"
    )
    assert f.attempts_text(step, reasons=False) == "3 (2 INVALID before)"


@pytest.mark.parametrize(("value", "text"), [
    ("2026-11-30T00:21:33+00:00", "2026-11-30 00:21 UTC"), ("2026-11-30T00:21:33Z", "2026-11-30 00:21 UTC"),
    ("2026-11-30T00:21:33.5+02:00", "2026-11-30 00:21 UTC+02:00"), ("2026-11-30T00:21", "2026-11-30 00:21 UTC"),
    ("2026-11-30T00:21:33", "2026-11-30 00:21"), (None, "—"), ("", "—"),
])  # fmt: skip
def test_a_time_reads_to_the_minute_with_its_offset(value, text):
    assert f.when(value) == text
