"""Which MatMuls of a transformer to quantize for symmetric QDQ INT8, and SmoothQuant for the FFN inputs.

Measured on the real all-MiniLM-L6-v2 weights (docs/quantization.md; symmetric S8 activations and weights,
per-channel weights, MinMax, 32 real sentences, cosine on 64 held-out ones):

- ORT's ``MatMulConstBOnly`` does not stop the QDQ quantizer from quantizing attention's activation×activation
  MatMuls, so the selection is by name. Softmax·V stays float: symmetric S8 wastes half the range of the
  softmax output in [0, 1] (quantizing it too: worst sentence 0.988). Q·Kᵀ is quantized: it cost 0.0001.
- The FFN-output MatMuls (fed by GELU) cost 0.95-0.99 each even with SmoothQuant: their input outliers are
  per token, which no per-tensor scale absorbs. They stay float.
- The FFN-input MatMuls (fed by a LayerNorm whose output also feeds the residual) cost ~0.002 each; a
  SmoothQuant rescale (an explicit ``Mul`` by 1/s before the MatMul, s folded into the weight rows) makes
  them nearly free. The ``Mul`` cannot be folded into the LayerNorm: the residual branch reads the same tensor.
- Q, K, V and attention-output projections are cheap to quantize (~0.9999 each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

SMOOTHQUANT_ALPHA = 0.5  # migration strength: 0.5 and 0.75 measured within 0.0003 of each other
REASON_CONTEXT = "attention softmax·V MatMul: symmetric INT8 wastes half the softmax range, kept float"
REASON_FFN_OUT = "FFN-output MatMul fed by GELU: per-token input outliers, kept float"
# ops a GELU (exact erf form, tanh approximation, or fused) is made of; walking back through these from a
# MatMul's activation input finds the FFN-output MatMuls and, behind the GELU, the FFN-input ones
GELU_MARKERS = {"Erf", "Tanh", "Gelu", "FastGelu", "BiasGelu", "QuickGelu"}
GELU_PATH_OPS = {"Mul", "Add", "Div", "Pow", "Cast", "Identity", "Sqrt"} | GELU_MARKERS


def weight_matmuls(model: Any) -> list[str]:
    """Names of MatMul/Gemm nodes whose second input is a constant (initializer): the layers with weights."""
    constants = {init.name for init in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type in ("MatMul", "Gemm") and n.input[1] in constants]


def attention_matmuls(model: Any) -> list[str]:
    """MatMuls with no constant input: attention's scores and context products."""
    weights = set(weight_matmuls(model))
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and n.name not in weights]


def context_matmuls(model: Any) -> list[str]:
    """Attention MatMuls with a softmax output (through casts) as an input: softmax·V."""
    producer = {out: n for n in model.graph.node for out in n.output}

    def from_softmax(tensor: str) -> bool:
        node = producer.get(tensor)
        while node is not None and node.op_type in ("Cast", "Identity") and node.input:
            node = producer.get(node.input[0])
        return node is not None and node.op_type == "Softmax"

    attention = set(attention_matmuls(model))
    return [n.name for n in model.graph.node if n.name in attention and any(map(from_softmax, n.input))]


def _gelu_path(model: Any, node: Any, max_depth: int) -> tuple[bool, list[Any]]:
    """(whether a GELU lies within ``max_depth`` ops behind ``node``'s activation input, the nodes walked)."""
    producer = {out: n for n in model.graph.node for out in n.output}
    frontier, walked, found = [node.input[0]], [], False
    for _ in range(max_depth):
        nxt = []
        for tensor in frontier:
            parent = producer.get(tensor)
            if parent is None or parent in walked:
                continue
            walked.append(parent)
            found = found or parent.op_type in GELU_MARKERS
            if parent.op_type in GELU_PATH_OPS:
                nxt.extend(parent.input)
        frontier = nxt
    return found, walked


def gelu_fed_matmuls(model: Any, max_depth: int = 6) -> list[str]:
    """Weight MatMuls whose activation input comes (within a few ops) from a GELU: the FFN-output ones."""
    wanted = set(weight_matmuls(model))
    return [n.name for n in model.graph.node if n.name in wanted and _gelu_path(model, n, max_depth)[0]]


def ffn_in_matmuls(model: Any, max_depth: int = 8) -> list[str]:
    """The weight MatMuls that feed a GELU (the FFN-input ones), found behind each FFN-output MatMul."""
    wanted, ffn_out = set(weight_matmuls(model)), set(gelu_fed_matmuls(model))
    found: list[str] = []
    for node in model.graph.node:
        if node.name in ffn_out:
            _, walked = _gelu_path(model, node, max_depth)
            found += [n.name for n in walked if n.name in wanted and n.name not in found]
    return found


def exclusions(model: Any) -> dict[str, str]:
    """Node name → why it stays float, for the transformer QDQ recipes."""
    excluded = {name: REASON_CONTEXT for name in context_matmuls(model)}
    excluded.update({name: REASON_FFN_OUT for name in gelu_fed_matmuls(model)})
    return excluded


def smooth_quant(
    src: Path, dst: Path, nodes: list[str], feeds: list[dict[str, Any]], alpha: float = SMOOTHQUANT_ALPHA
) -> list[str]:
    """Write ``dst``: each MatMul in ``nodes`` gets ``x·W = (x/s)·(s·W)`` with s = max|x|^α / max|W|^(1-α).

    ``x/s`` is an explicit ``Mul`` (TensorRT fuses it into the following Quantize); ``s·W`` replaces the weight.
    Returns the names of the MatMuls that were smoothed (2-D MatMul weights only)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    targets = [
        n
        for n in graph.node
        if n.name in set(nodes) and n.op_type == "MatMul" and len(inits[n.input[1]].dims) == 2
    ]
    absmax = _activation_absmax(src, sorted({n.input[0] for n in targets}), feeds)
    for i, node in enumerate(targets):
        weight = numpy_helper.to_array(inits[node.input[1]])
        act = np.maximum(absmax[node.input[0]], 1e-5)
        scale = (act**alpha / np.maximum(np.abs(weight).max(axis=1), 1e-5) ** (1 - alpha)).astype(np.float32)
        new_weight = numpy_helper.from_array(weight * scale[:, None], f"{node.input[1]}_smoothquant{i}")
        inverse = numpy_helper.from_array((1.0 / scale).astype(np.float32), f"{node.name}_smoothquant_inv")
        graph.initializer.extend([new_weight, inverse])
        scaled = f"{node.input[0]}_smoothquant{i}"
        mul = helper.make_node(
            "Mul", [node.input[0], inverse.name], [scaled], name=f"{node.name}_SmoothQuant"
        )
        graph.node.insert(list(graph.node).index(node), mul)
        node.input[0], node.input[1] = scaled, new_weight.name
    used = {t for n in graph.node for t in n.input}
    for init in [i for i in graph.initializer if i.name not in used]:
        graph.initializer.remove(init)  # the unscaled weights, now dead
    onnx.save(model, str(dst))
    return [n.name for n in targets]


def _activation_absmax(src: Path, tensors: list[str], feeds: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per-channel (last axis) max |value| of float tensors over the calibration feeds."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(src))
    known = {o.name for o in model.graph.output}
    for name in tensors:
        if name not in known:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    absmax: dict[str, np.ndarray] = {}
    for feed in feeds:
        for name, value in zip(tensors, session.run(tensors, feed), strict=True):
            batch_max = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            absmax[name] = np.maximum(absmax[name], batch_max) if name in absmax else batch_max
    return absmax
