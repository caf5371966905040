"""`accelbench models card`: guesses from the graph, --shape handling, and a card that loads as written."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbench.errors import BadInputError
from accelbench.models.card_writer import card_from_graph, write_card
from accelbench.models.cards import load_card, parse_shape
from accelbench.models.inputs import make_inputs
from tests.conftest import ACCELBENCH
from tests.test_intake import paddle_like


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def _one_op(op: str, inputs, outputs, initializers=(), **attrs) -> onnx.ModelProto:
    names_in = [i.name for i in inputs] + [t.name for t in initializers]
    node = helper.make_node(op, names_in, [o.name for o in outputs], **attrs)
    graph = helper.make_graph([node], "g", list(inputs), list(outputs), initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_paddle_like_classifier(tmp_path):
    card = card_from_graph(_save(paddle_like(), tmp_path / "cls.onnx"), ["x:1,3,48,192"], card_dir=tmp_path)
    assert card.inputs[0].shape == (-1, 3, 48, 192) and card.inputs[0].dtype == "float32"
    assert card.generator.kind == "image"
    assert (card.accuracy.metric, card.accuracy.output, card.task) == ("top1", "prob", "classification")
    assert card.source == "onnx:cls.onnx" and card.name == "cls"
    assert "opset 12" in card.description


def test_missing_dynamic_size_says_which_shape_to_give(tmp_path):
    path = _save(paddle_like(), tmp_path / "cls.onnx")
    with pytest.raises(BadInputError, match=r"input 'x' has a dynamic dimension 2 \(h\); give its size with "
                       r"--shape x:1,3,N,N"):  # fmt: skip
        card_from_graph(path)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ("x", "expected NAME:D1,D2"),
        ("x:1,a", "expected NAME:D1,D2"),
        ("x:1,0,4,4", "expected NAME:D1,D2"),
        ("y:1,3,4,4", "--shape names no input of cls.onnx: y; inputs: x"),
        ("x:1,3,4", "--shape x: 3 sizes for a 4-D input"),
    ],
)
def test_bad_shapes(tmp_path, shape, message):
    with pytest.raises(BadInputError, match=message.replace("(", r"\(")):
        card_from_graph(_save(paddle_like(), tmp_path / "cls.onnx"), [shape])


def test_parse_shape_takes_the_last_colon():
    assert parse_shape("input:ids:1,128") == ("input:ids", (1, 128))


def test_tokens_generator_and_vocab_from_the_embedding_table(tmp_path):
    table = numpy_helper.from_array(np.zeros((1000, 8), np.float32), "emb")
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", 8])
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["g"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axes"], ["mu"]),
        helper.make_node("Mul", ["g", "mu"], ["gm"]),
        helper.make_node("ReduceMean", ["gm"], ["sentence_embedding"], axes=[1], keepdims=0),
    ]
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    graph = helper.make_graph(nodes, "enc", [ids, mask], [out], initializer=[table, axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    card = card_from_graph(_save(model, tmp_path / "enc.onnx"))
    assert (
        card.generator.kind == "tokens"
        and card.generator.vocab_size == 1000
        and card.generator.seq_len == 128
    )
    assert [s.shape for s in card.inputs] == [(-1, -1), (-1, -1)]
    assert (card.accuracy.metric, card.task) == ("cosine", "embedding")
    feeds = make_inputs(card, batch_size=2, count=1, seed=0)[0]
    assert feeds["input_ids"].shape == (2, 128) and feeds["input_ids"].max() < 1000


def test_integer_inputs_get_byte_values_and_probability_maps_get_max_abs(tmp_path):
    x = helper.make_tensor_value_info("bytes", TensorProto.INT32, ["n", 64])
    y = helper.make_tensor_value_info("y", TensorProto.INT32, ["n", 64])
    card = card_from_graph(_save(_one_op("Identity", [x], [y]), tmp_path / "a.onnx"))
    assert (card.generator.kind, card.generator.low, card.generator.high) == ("uniform", 0.0, 256.0)
    img = helper.make_tensor_value_info("img", TensorProto.FLOAT, ["n", 1, 32, 32])
    prob = helper.make_tensor_value_info("p", TensorProto.FLOAT, ["n", 1, 32, 32])
    card = card_from_graph(_save(_one_op("Sigmoid", [img], [prob]), tmp_path / "b.onnx"))
    assert (card.accuracy.metric, card.accuracy.tolerance, card.task) == ("max_abs", 0.05, "segmentation")


def test_detection_head(tmp_path):
    img = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["n", 3, 64, 64])
    head = helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["n", 3, 4096])
    shape = numpy_helper.from_array(np.array([0, 3, 4096], np.int64), "s")
    card = card_from_graph(_save(_one_op("Reshape", [img], [head], [shape]), tmp_path / "d.onnx"))
    assert (card.accuracy.metric, card.task) == ("cosine", "detection")
    assert card.outputs[0].shape == (-1, 3, 4096)


def test_unsupported_dtype_is_one_line(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["n", 4])
    with pytest.raises(BadInputError, match="tensor 'x' has dtype float64, which cards do not support"):
        card_from_graph(_save(_one_op("Identity", [x], [y]), tmp_path / "f64.onnx"))


def test_written_card_loads_unchanged(tmp_path):
    card = card_from_graph(_save(paddle_like(), tmp_path / "m.onnx"), ["x:1,3,16,16"], card_dir=tmp_path)
    write_card(card, tmp_path / "m.toml")
    loaded = load_card(tmp_path / "m.toml")
    assert loaded == card  # card_path is not compared
    assert loaded.resolve_path(loaded.source_value) == tmp_path / "m.onnx"


@pytest.mark.slow
def test_cli_writes_a_card_quantize_reads(tmp_path):
    model = _save(paddle_like(), tmp_path / "m.onnx")
    sub = tmp_path / "cards"
    sub.mkdir()
    run = subprocess.run([ACCELBENCH, "models", "card", model, "--shape", "x:1,3,16,16", "--out",
                          str(sub / "m.toml"), "--task", "other"], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip() == f"card: {sub / 'm.toml'}"
    card = load_card(sub / "m.toml")
    assert card.source == "onnx:../m.onnx" and card.task == "other"
    shown = subprocess.run([ACCELBENCH, "models", "card", model, "--shape", "x:1,3,16,16"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert "shape = [-1, 3, 16, 16]" in shown.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.onnx"], "accelbench: error: file not found: missing.onnx"),
        (["{model}", "--shape", "x:1,b"], "accelbench: error: --shape 'x:1,b': expected NAME:D1,D2"),
        (["{model}"], "accelbench: error: input 'x' has a dynamic dimension 2"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path, args, message):
    model = _save(paddle_like(), tmp_path / "m.onnx")
    run = subprocess.run([ACCELBENCH, "models", "card", *(a.format(model=model) for a in args)],
                         capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.startswith(message) and len(run.stderr.strip().splitlines()) == 1
