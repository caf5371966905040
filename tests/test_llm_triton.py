"""The generative Triton model on the embedded tritonserver: streamed tokens equal greedy decoding of the same
ONNX model run directly with onnxruntime, over HTTP generate_stream (SSE) and gRPC ModelStreamInfer."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.llm_helpers import PROMPTS, greedy_reference

pytestmark = [pytest.mark.slow, pytest.mark.hf]
MAX_CONTEXT = 64
DATA = Path(__file__).parent / "data" / "llm"


def sse_events(raw: bytes) -> list[dict]:
    """The JSON of each ``data:`` line of a server-sent-events body."""
    return [json.loads(line[5:]) for line in raw.decode().splitlines() if line.startswith("data:")]


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    pytest.importorskip("optimum")
    from accelbench.models.quantize import QuantizeRequest, quantize

    out = tmp_path_factory.mktemp("variants")
    (manifest,) = quantize(
        QuantizeRequest(model="builtin:llama-tiny", target="cpu-local", precision="fp32", out_dir=out)
    )
    return out / manifest.name


@pytest.fixture(scope="module")
def served(variant, tmp_path_factory):
    from accelbench.serving.repository import write_repository
    from accelbench.serving.server import LocalTriton

    repo = tmp_path_factory.mktemp("repo")
    (model,) = write_repository([variant], repo, "local", {"intra_op_threads": 2, "max_context": MAX_CONTEXT})
    with LocalTriton(repo) as triton:
        yield triton, model.name


def generate(triton, name: str, body: dict) -> tuple[int, list[dict], bytes]:
    url = f"{triton.http_url}/v2/models/{name}/generate_stream"
    with httpx.stream("POST", url, json=body, timeout=120) as response:
        raw = b"".join(response.iter_raw())
    return response.status_code, sse_events(raw), raw


def _ids(event: dict) -> list[int]:
    value = event["output_ids"]  # Triton 2.51 writes a one-element tensor as a scalar
    return value if isinstance(value, list) else [value]


def test_concurrent_streams_match_direct_greedy(served, variant):
    triton, name = served
    results: dict[int, tuple] = {}

    def one(i: int) -> None:
        results[i] = generate(
            triton, name, {"input_ids": PROMPTS[i], "max_tokens": 12 + i, "ignore_eos": True}
        )

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for i, prompt in enumerate(PROMPTS):
        status, events, _ = results[i]
        assert status == 200
        tokens = [t for e in events for t in _ids(e)]
        assert tokens == greedy_reference(variant / "model.onnx", prompt, 12 + i), f"prompt {i}"
        assert all(e["input_tokens"] == len(prompt) and isinstance(e["text_output"], str) for e in events)


def test_prompt_beyond_context_is_an_error_naming_both(served):
    triton, name = served
    status, events, raw = generate(triton, name, {"input_ids": [101] * 60, "max_tokens": 10})
    assert status == 400
    message = events[0]["error"]
    assert "60 tokens" in message and "max_tokens 10" in message and f"max_context {MAX_CONTEXT}" in message
    recorded = sse_events((DATA / "generate_stream_context_error.sse").read_bytes())
    assert recorded[0].keys() == events[0].keys()


def test_text_input_is_tokenized_by_the_models_tokenizer(served, variant):
    from tokenizers import Tokenizer

    triton, name = served
    tokenizer = Tokenizer.from_file(str(variant / "tokenizer" / "tokenizer.json"))
    tokenizer.no_padding()
    want = len(tokenizer.encode("It is a truth universally acknowledged", add_special_tokens=False).ids)
    status, events, _ = generate(
        triton, name, {"text_input": "It is a truth universally acknowledged", "max_tokens": 3}
    )
    assert status == 200 and 1 <= len(events) <= 3
    assert events[0]["input_tokens"] == want
    text = "".join(e["text_output"] for e in events)
    assert text.strip() == tokenizer.decode([t for e in events for t in _ids(e)])


def test_recorded_stream_has_the_live_shape(served):
    triton, name = served
    status, events, _ = generate(
        triton, name, {"input_ids": [101, 2009, 2003], "max_tokens": 4, "ignore_eos": True}
    )
    recorded = sse_events((DATA / "generate_stream_ok.sse").read_bytes())
    assert status == 200 and len(events) == len(recorded) == 4
    assert [sorted(e) for e in events] == [sorted(e) for e in recorded]
    assert [_ids(e) for e in events] == [_ids(e) for e in recorded]  # the same model, greedy: the same tokens


def test_grpc_stream_infer(served, variant):
    import tritonclient.grpc as grpcclient

    triton, name = served
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(triton.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        prompt = np.asarray(PROMPTS[1], np.int64)
        inputs = [
            grpcclient.InferInput("input_ids", [len(prompt)], "INT64"),
            grpcclient.InferInput("max_tokens", [1], "INT32"),
        ]
        inputs[0].set_data_from_numpy(prompt)
        inputs[1].set_data_from_numpy(np.array([6], np.int32))
        client.async_stream_infer(name, inputs, request_id="a", enable_empty_final_response=True)
        tokens, finals = [], []
        while not finals or not finals[-1]:
            result, error = answers.get(timeout=120)
            assert error is None
            tokens += result.as_numpy("output_ids").tolist()
            finals.append(result.get_response().parameters["triton_final_response"].bool_param)
        assert tokens == greedy_reference(variant / "model.onnx", PROMPTS[1], 6)
        assert finals == [False] * 5 + [True]
        inputs[0] = grpcclient.InferInput("input_ids", [60], "INT64")
        inputs[0].set_data_from_numpy(np.full(60, 101, np.int64))
        inputs[1].set_data_from_numpy(np.array([10], np.int32))
        client.async_stream_infer(name, inputs, request_id="b")
        result, error = answers.get(timeout=60)
        assert result is None and "max_context 64" in str(error)
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.skipif(
    __import__("accelbench.serving.embedded", fromlist=["numpy_bridge_ok"]).numpy_bridge_ok(),
    reason="numpy < 2 here: the stub's numpy bridge serves every tensor",
)
def test_beside_numpy_2_without_the_stub_environment_ids_stream_and_text_is_refused(variant, tmp_path):
    """The GPU machine's case (numpy 2, no stub environment): numeric tensors cross by DLPack, so input_ids
    stream exactly; BYTES cannot cross, so text_input gets one clear error and no text_output is sent."""
    from accelbench.serving.repository import write_repository
    from accelbench.serving.server import LocalTriton

    (model,) = write_repository(
        [variant], tmp_path, "local", {"intra_op_threads": 2, "max_context": MAX_CONTEXT}
    )
    with LocalTriton(tmp_path, prefer_stub_env=False) as triton:
        assert triton.stub_env is None
        status, events, _ = generate(
            triton, model.name, {"input_ids": PROMPTS[0], "max_tokens": 6, "ignore_eos": True}
        )
        assert status == 200
        assert [t for e in events for t in _ids(e)] == greedy_reference(variant / "model.onnx", PROMPTS[0], 6)
        assert all(e["input_tokens"] == len(PROMPTS[0]) and "text_output" not in e for e in events)
        status, events, raw = generate(triton, model.name, {"text_input": "It is a truth", "max_tokens": 3})
        assert status == 400 and "send input_ids" in events[0]["error"], raw
        status, events, _ = generate(triton, model.name, {"input_ids": PROMPTS[1], "max_tokens": 2})
        assert status == 200 and len([t for e in events for t in _ids(e)]) == 2  # the stub is still alive
