"""The request path's encoding and answer checks (pure): binary tensor extension, BYTES, lean and full checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accelbench.loadtests import wire


def _answer(outputs: list[tuple[str, np.ndarray]], *, declared: dict | None = None) -> wire.HttpAnswer:
    raws = [wire.tensor_bytes(a) for _, a in outputs]
    header = {"outputs": [
        {"name": n, "datatype": wire.triton_dtype(a.dtype), "shape": list(a.shape),
         "parameters": {"binary_data_size": len(r)}, **(declared or {}).get(n, {})}
        for (n, a), r in zip(outputs, raws, strict=True)
    ]}  # fmt: skip
    head = json.dumps(header).encode()
    return wire.HttpAnswer(200, len(head), head + b"".join(raws))


def test_http_request_is_one_binary_body_with_the_header_length():
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    s = np.array([[b"ab", b""]], dtype=object)
    raw = wire.http_request("127.0.0.1:8000", "m/1", {"x": x, "s": s}, ["y"])
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v2/models/m%2F1/infer HTTP/1.1"
    fields = dict(line.split(": ", 1) for line in lines[1:])
    n = int(fields["Inference-Header-Content-Length"])
    assert int(fields["Content-Length"]) == len(body)
    header = json.loads(body[:n])
    assert header["parameters"] == {"binary_data_output": True}
    assert [i["datatype"] for i in header["inputs"]] == ["FP32", "BYTES"]
    assert header["inputs"][1]["parameters"]["binary_data_size"] == 4 + 2 + 4
    assert body[n:] == x.tobytes() + b"\x02\x00\x00\x00ab\x00\x00\x00\x00"


def test_bytes_round_trip_and_truncation():
    arr = np.array([["héllo".encode(), b"\x00x"]], dtype=object)
    raw = wire.serialize_bytes(arr)
    assert list(wire.decode_tensor(raw, "BYTES", [1, 2]).reshape(-1)) == list(arr.reshape(-1))
    with pytest.raises(ValueError, match="ends inside"):
        wire.deserialize_bytes(raw[:-1], 2)
    with pytest.raises(ValueError, match="left after"):
        wire.deserialize_bytes(raw + b"z", 2)


def test_lean_check_passes_and_catches_each_mismatch():
    y = np.zeros((4, 16), dtype=np.float32)
    specs = wire.output_specs([{"name": "y", "dtype": "float32", "shape": [-1, 16]}], batch_size=4)
    wire.check_http(_answer([("y", y)]), specs, full=True)
    with pytest.raises(wire.WrongOutput, match="dtype float32, expected float16"):
        wire.check_http(_answer([("y", y)]), wire.output_specs([{"name": "y", "dtype": "float16",
                                                                   "shape": [-1, 16]}], 4), full=False)  # fmt: skip
    with pytest.raises(wire.WrongOutput, match=r"shape \[2, 16\], expected \[4, 16\]"):
        wire.check_http(_answer([("y", y[:2])]), specs, full=False)
    with pytest.raises(wire.WrongOutput, match="missing"):
        wire.check_http(_answer([("z", y)]), specs, full=False)
    # the header declares more bytes than were sent
    lying = _answer([("y", y)], declared={"y": {"parameters": {"binary_data_size": 9999}}})
    with pytest.raises(wire.WrongOutput, match="declare"):
        wire.check_http(lying, specs, full=False)
    unbatched = wire.output_specs([{"name": "y", "dtype": "float32", "shape": [4, 16], "batched": False}], 1)
    wire.check_http(_answer([("y", y)]), unbatched, full=True)


def test_full_check_decodes_what_the_lean_check_cannot_see():
    s = np.array([[b"a", b"bc"]], dtype=object)
    good = _answer([("s", s)])
    specs = wire.output_specs([{"name": "s", "dtype": "object", "shape": [-1, 2]}], 1)
    wire.check_http(good, specs, full=True)
    broken = wire.HttpAnswer(200, good.header_length, good.body[:-6] + b"\x09" + good.body[-5:])  # bad prefix
    wire.check_http(broken, specs, full=False)  # BYTES sizes are not checked leanly
    with pytest.raises(wire.WrongOutput, match="output s"):
        wire.check_http(broken, specs, full=True)


def test_server_errors_carry_their_status_and_message():
    body = json.dumps({"error": "unexpected shape for input 'x'"}).encode()
    with pytest.raises(wire.ServerAnswer, match="400: unexpected shape"):
        wire.check_http(wire.HttpAnswer(400, None, body), [], full=False)


def test_grpc_request_and_answer_checks():
    from tritonclient.grpc import service_pb2

    x = np.ones((2, 3), dtype=np.int64)
    req = service_pb2.ModelInferRequest.FromString(wire.grpc_request("m", {"x": x}, ["y"]))
    assert req.model_name == "m" and req.inputs[0].datatype == "INT64" and list(req.inputs[0].shape) == [2, 3]
    assert req.raw_input_contents[0] == x.tobytes() and req.outputs[0].name == "y"
    resp = service_pb2.ModelInferResponse(model_name="m")
    resp.outputs.add(name="y", datatype="INT64", shape=[2, 3])
    resp.raw_output_contents.append(x.tobytes())
    specs = wire.output_specs([{"name": "y", "dtype": "int64", "shape": [-1, 3]}], 2)
    wire.check_grpc(resp.SerializeToString(), specs, full=True)
    resp.raw_output_contents[0] = x.tobytes()[:-8]
    with pytest.raises(wire.WrongOutput, match="bytes for shape"):
        wire.check_grpc(resp.SerializeToString(), specs, full=False)


def test_http_checker_remembers_verified_headers_but_never_skips_a_full_check():
    y = np.zeros((4, 16), dtype=np.float32)
    specs = wire.output_specs([{"name": "y", "dtype": "float32", "shape": [-1, 16]}], batch_size=4)
    check = wire.HttpChecker(specs)
    good = _answer([("y", y)])
    check(good, full=False)
    assert len(check.verified) == 1
    check(good, full=False)  # remembered: not parsed again
    # the same header over a truncated body is a different key, so it is checked (and fails)
    with pytest.raises(wire.WrongOutput, match="declare"):
        check(wire.HttpAnswer(200, good.header_length, good.body[:-4]), full=False)
    # a full check decodes even a remembered answer
    check(good, full=True)
    # an error status is never remembered
    with pytest.raises(wire.ServerAnswer):
        check(wire.HttpAnswer(500, None, b'{"error": "x"}'), full=False)
    assert len(check.verified) == 1


def test_a_json_header_that_is_not_an_object_is_a_wrong_output():
    with pytest.raises(wire.WrongOutput, match="does not parse"):
        wire.check_http(wire.HttpAnswer(200, None, b"{not json"), [], full=False)
    with pytest.raises(wire.WrongOutput, match="a list, not an object"):
        wire.check_http(wire.HttpAnswer(200, None, b"[1, 2]"), [], full=False)
