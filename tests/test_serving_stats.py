"""Statistics and metrics parsing on recorded real Triton outputs (tests/data/serving, see SOURCES)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from accelbench.errors import ServerError
from accelbench.serving.http_client import http_base
from accelbench.serving.metrics import metrics_delta, parse_metrics
from accelbench.serving.stats import normalize_stats, stats_delta

DATA = Path(__file__).parent / "data" / "serving"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def zero_like(snapshot: dict) -> dict:
    """The same model right after start: every counter zero."""
    zero = copy.deepcopy(snapshot)
    zero["inference_count"] = zero["execution_count"] = 0
    zero["inference_stats"] = {k: {"count": 0, "ns": 0} for k in zero["inference_stats"]}
    zero["batch_stats"] = {}
    return zero


def test_dynamic_batching_sample_gives_mean_batch_and_histogram():
    after = normalize_stats(load("triton_model_stats_peoplenet_jetson_dynamic_batching.json"), "peoplenet")
    delta = stats_delta(zero_like(after), after)
    # 6 inferences in 2 executions: one batch of 1, one of 5
    assert delta["mean_batch_size"] == 3.0
    assert delta["batch_histogram"] == {"1": 1, "5": 1}
    assert delta["success_count"] == 6 and delta["fail_count"] == 0
    assert delta["queue_us"] == pytest.approx(49271380 / 6 / 1000)
    assert delta["compute_infer_us"] == pytest.approx(338079193 / 6 / 1000)
    assert delta["request_us"] == pytest.approx(558981051 / 6 / 1000)
    assert delta["compute_infer_us_by_batch"]["1"] == pytest.approx(29917093 / 1000)


def test_ensemble_sample_and_interval_difference():
    after = normalize_stats(load("triton_model_stats_ensemble_http_23.08.json"), "ensemble")
    before = copy.deepcopy(after)
    before["inference_count"] -= 2
    before["execution_count"] -= 2
    before["inference_stats"]["success"] = {"count": 4, "ns": 810771011 - 2_000_000}
    before["batch_stats"]["1"]["count"] -= 2
    delta = stats_delta(before, after)
    assert delta["success_count"] == 2
    assert delta["request_us"] == pytest.approx(1000.0)
    assert delta["mean_batch_size"] == 1.0 and delta["batch_histogram"] == {"1": 2}


def test_no_requests_in_the_interval_gives_none_not_zero():
    snap = normalize_stats(load("triton_model_stats_ensemble_http_23.08.json"), "ensemble")
    delta = stats_delta(snap, snap)
    assert delta["queue_us"] is None and delta["mean_batch_size"] is None and delta["success_count"] == 0


def test_unknown_model_and_string_counters():
    doc = load("triton_model_stats_ensemble_http_23.08.json")
    with pytest.raises(ServerError, match="no statistics for model 'other'"):
        normalize_stats(doc, "other")
    doc["model_stats"][0]["inference_count"] = "6"  # int64 as a JSON string (protobuf JSON mapping)
    assert normalize_stats(doc, "ensemble")["inference_count"] == 6


def test_cpu_metrics_sample():
    metrics = parse_metrics((DATA / "triton_metrics_cpu.txt").read_text())
    assert metrics["cpu_utilization"] == 0.01
    assert metrics["cpu_memory_total_bytes"] == 25276514304
    assert metrics["gpus"] == {} and metrics["gpu_power_w"] is None and metrics["energy_j"] is None
    int8 = metrics["models"]["minilm_int8"]
    assert int8["request_success"] == 2 and int8["inference_count"] == 8 and int8["exec_count"] == 2
    assert int8["compute_infer_duration_us"] == 127329
    assert int8["request_failure"] == 0  # four reasons summed


def test_gpu_metrics_sample():
    metrics = parse_metrics((DATA / "triton_metrics_gpu_p100_triton2.24.txt").read_text())
    [(uuid, gpu)] = metrics["gpus"].items()
    assert uuid.startswith("GPU-a07dfe08")
    assert gpu["power_w"] == pytest.approx(32.768) and gpu["power_limit_w"] == 250
    assert gpu["memory_total_bytes"] == 12884901888
    assert metrics["gpu_power_w"] == pytest.approx(32.768)
    assert metrics["gpu_utilization"] == 0.0 and metrics["energy_j"] == 0.0


def test_metrics_delta_energy_and_counters():
    text = (DATA / "triton_metrics_gpu_p100_triton2.24.txt").read_text()
    before = parse_metrics(text)
    after = copy.deepcopy(before)
    after["energy_j"] = 123.5
    name = next(iter(after["models"]))
    after["models"][name]["request_success"] = before["models"][name].get("request_success", 0) + 10
    delta = metrics_delta(before, after, name)
    assert delta["energy_j"] == 123.5 and delta["model"]["request_success"] == 10
    assert (
        metrics_delta(parse_metrics((DATA / "triton_metrics_cpu.txt").read_text()), after)["energy_j"] is None
    )


def test_unparsable_metrics_is_a_server_error():
    with pytest.raises(ServerError, match="unparsable"):
        parse_metrics("nv_cpu_utilization{bad label} 1\n")


def test_http_base():
    assert http_base("127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert http_base("http://host:8000/v2/models") == "http://host:8000"
