"""Parameters, FLOPs and minimum bytes moved per inference, counted from an ONNX graph after shape inference.

Conventions (FLOPs are per inference = the count at ``batch_size`` divided by ``batch_size``):

- MatMul, Gemm, Conv (grouped too), ConvTranspose: 2 FLOPs per multiply-accumulate; a Gemm/Conv bias adds
  1 per output element. This is the convention behind the published figures (ResNet-50 4.09 GMACs ≈ 8.2 GFLOPs).
- Elementwise ops (Add, Mul, Relu, Erf, Tanh, Where, …): 1 per output element.
- Softmax 5 per element (max, subtract, exp, sum, divide); LayerNormalization 8 per element (mean, subtract,
  square, variance, normalise, scale, shift, plus the per-row rsqrt folded in); Gelu 8 per element.
- Pooling: 1 per window element read; GlobalAveragePool and Reduce*: 1 per input element (ReduceL2 2).
- Recurrent layers (LSTM, GRU, RNN and ORT's DynamicQuantizeLSTM): per time step, sample and direction
  2 × gates × hidden × (input + hidden) for the gate MatMuls plus 10 × hidden (LSTM; GRU 8, RNN 2) for the
  gate activations and state update.
- Already-quantized ops count as their float forms: ConvInteger and QLinearConv as Conv, MatMulInteger,
  QLinearMatMul, MatMulIntegerToFloat and DynamicQuantizeMatMul as MatMul, QGemm as Gemm;
  DynamicQuantizeLinear 4 per element (min, max, scale, round), QLinearAdd/QLinearMul 1.
- Control flow (If, Loop, Scan): the weights in their branches count as parameters; the FLOPs inside do
  not (``If`` is listed in ``uncounted_op_types``).
- Data movement (Gather, Reshape, Transpose, Cast, Identity, Concat, Slice, Shape, …): 0. Ops not listed
  are reported in ``uncounted_op_types`` and count 0.

Bytes, with ``precision`` setting bytes per element of weights and float activations (fp32 4, fp16/bf16 2,
int8/fp8 1; integer graph inputs keep their own width):

- ``weight_bytes``: every weight (initializer) read once per batch, except embedding tables read by Gather,
  which count the rows gathered as activation bytes. ``params`` counts all non-index initializer elements.
- ``activation_bytes_per_inference``: graph inputs and outputs, plus every tensor read or written by a
  MatMul/Gemm/Conv (other than weights), plus embedding rows gathered. This models an engine that fuses elementwise, normalisation and
  softmax ops into the neighbouring compute kernels (as TensorRT and ORT do), so only the compute ops'
  operands and results go through memory. ``activation_bytes_unfused_per_inference`` is the upper bound in
  which every op reads its inputs and writes its output.
- Bytes moved by a batch of b ≈ ``weight_bytes + b × activation_bytes_per_inference``.

What places the fixed cost of a batch (a launch per kernel: ``reports/fixed_term.py``), counted over the graph's
data edges, i.e. the tensors computed from a graph input:

- ``ops``: the nodes that launch work, every node on data except the shape and metadata ones: ``Shape`` and
  ``Size`` (their output is metadata), the views ``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze``,
  ``Identity`` and ``Dropout`` (an engine aliases them), and ``QuantizeLinear``/``DequantizeLinear`` (folded
  into the neighbouring kernel, so a QDQ graph counts as its float graph). A node none of whose inputs is data
  (``Constant``, ``ConstantOfShape``, a ``Cast``/``Gather``/``Concat`` of shapes, a weight's DequantizeLinear)
  is folded when the engine is built and does not count either.
- ``depth``: the longest chain of those ops from a graph input to a graph output, through the data edges.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from accelbench.errors import BadInputError
from accelbench.hardware.catalog_schema import ELEMENT_BYTES
from accelbench.models.graph_shapes import static_shapes
from accelbench.models.intake import INDEX_TYPES as _INDEX_TYPES
from accelbench.models.intake import subgraph_weight_elements

COMPUTE_OPS = {
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "MatMulInteger",
    "ConvInteger",
    "QLinearMatMul",
    "QLinearConv",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
    "QGemm",
    "LSTM",
    "GRU",
    "RNN",
    "DynamicQuantizeLSTM",
}
_MATMUL_OPS = ("MatMul", "MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat", "DynamicQuantizeMatMul")
# gates per recurrent cell, and elementwise FLOPs per hidden unit (activations, cell and state update)
_RECURRENT = {"LSTM": (4, 10), "DynamicQuantizeLSTM": (4, 10), "GRU": (3, 8), "RNN": (1, 2)}
FLOPS_PER_ELEMENT = {
    **dict.fromkeys(
        (
            "Add",
            "Sub",
            "Mul",
            "Div",
            "Pow",
            "Sqrt",
            "Exp",
            "Log",
            "Erf",
            "Tanh",
            "Sigmoid",
            "Relu",
            "LeakyRelu",
            "Clip",
            "Max",
            "Min",
            "Neg",
            "Abs",
            "Reciprocal",
            "Where",
            "Equal",
            "Less",
            "Greater",
            "Not",
            "And",
            "Or",
            "Sign",
            "Floor",
            "Ceil",
            "Round",
            "HardSigmoid",
            "HardSwish",
            "PRelu",
            "Elu",
            "Selu",
            "Softplus",
            "QuantizeLinear",
            "DequantizeLinear",
            "QLinearAdd",
            "QLinearMul",
            "QLinearSigmoid",
            "QLinearLeakyRelu",
        ),
        1,
    ),
    "DynamicQuantizeLinear": 4,
    "Softmax": 5,
    "LogSoftmax": 5,
    "LayerNormalization": 8,
    "Gelu": 8,
    "BatchNormalization": 2,
    "InstanceNormalization": 8,
    "SkipLayerNormalization": 9,
    "FastGelu": 8,
}
ZERO_FLOP_OPS = {
    "Gather",
    "GatherElements",
    "GatherND",
    "Reshape",
    "Transpose",
    "Cast",
    "Identity",
    "Concat",
    "Slice",
    "Shape",
    "Unsqueeze",
    "Squeeze",
    "Flatten",
    "Constant",
    "ConstantOfShape",
    "Expand",
    "Split",
    "Range",
    "Tile",
    "Pad",
    "Size",
    "NonZero",
    "DepthToSpace",
    "SpaceToDepth",
    "Resize",
    "Dropout",
}
# on data, but launching nothing: metadata out (Shape, Size) or a view / a fused quantization of the input
_METADATA_OPS = {"Shape", "Size"}
_PASS_THROUGH_OPS = {
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Dropout",
    "QuantizeLinear",
    "DequantizeLinear",
}


@dataclass
class OpCost:
    nodes: int = 0
    flops_per_inference: float = 0.0
    weight_bytes: int = 0
    activation_bytes_per_inference: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "flops_per_inference": self.flops_per_inference,
            "weight_bytes": self.weight_bytes,
            "activation_bytes_per_inference": self.activation_bytes_per_inference,
        }


@dataclass
class GraphCost:
    batch_size: int
    precision: str
    params: int
    flops_per_inference: float
    weight_bytes: int
    activation_bytes_per_inference: float
    activation_bytes_unfused_per_inference: float
    by_op_type: dict[str, OpCost] = field(default_factory=dict)
    uncounted_op_types: list[str] = field(default_factory=list)
    ops: int = 0  # nodes that launch work (module docstring)
    depth: int = 0  # the longest chain of them from an input to an output

    @property
    def bytes_per_batch(self) -> float:
        return self.weight_bytes + self.batch_size * self.activation_bytes_per_inference

    @property
    def bytes_per_inference(self) -> float:
        return self.bytes_per_batch / self.batch_size

    def to_dict(self) -> dict[str, Any]:
        """The ``graph_cost`` block of the variant manifest and the result document."""
        return {
            "params": self.params,
            "flops_per_inference": self.flops_per_inference,
            "weight_bytes": self.weight_bytes,
            "activation_bytes_per_inference": self.activation_bytes_per_inference,
            "precision": self.precision,
            "ops": self.ops,
            "depth": self.depth,
        }

    def to_detail_dict(self) -> dict[str, Any]:
        """Everything, for ``accelbench models inspect --json``; op types sorted by FLOPs."""
        ops = sorted(self.by_op_type.items(), key=lambda kv: (-kv[1].flops_per_inference, kv[0]))
        return {
            **self.to_dict(),
            "batch_size": self.batch_size,
            "bytes_per_batch": self.bytes_per_batch,
            "bytes_per_inference": self.bytes_per_inference,
            "activation_bytes_unfused_per_inference": self.activation_bytes_unfused_per_inference,
            "by_op_type": {k: v.to_dict() for k, v in ops},
            "uncounted_op_types": self.uncounted_op_types,
        }


def _node_flops(node: onnx.NodeProto, shapes: Mapping[str, tuple[tuple[int, ...], int]]) -> float | None:
    """FLOPs of one node at the fixed batch; None when the op type is not counted."""
    op = node.op_type
    out = shapes.get(node.output[0], (None, 0))[0] if node.output else None
    if op in ZERO_FLOP_OPS:
        return 0.0
    if out is None:
        raise BadInputError(f"cannot infer the output shape of node {node.name or op!r} ({op})")
    n_out = math.prod(out)
    if op in _MATMUL_OPS:
        a = shapes[node.input[0]][0]
        return 2.0 * n_out * a[-1]
    if op in _RECURRENT:
        return _recurrent_flops(node, shapes)
    if op in ("Gemm", "QGemm"):
        a = shapes[node.input[0]][0]
        trans_a = next((at.i for at in node.attribute if at.name == "transA"), 0)
        k = a[0] if trans_a else a[-1]
        bias = 6 if op == "QGemm" else 2  # QGemm: A, scale, zero point, B, scale, zero point, C
        return 2.0 * n_out * k + (n_out if len(node.input) > bias and node.input[bias] else 0)
    if op in ("Conv", "ConvInteger", "QLinearConv", "ConvTranspose"):
        w_index = 3 if op == "QLinearConv" else 1
        w = shapes[node.input[w_index]][0]  # [C_out, C_in/group, k...]
        if op == "ConvTranspose":  # each input element scatters into C_out/group × kernel outputs
            macs = math.prod(shapes[node.input[0]][0]) * (w[1]) * math.prod(w[2:])
        else:
            macs = n_out * math.prod(w[1:])  # w[1] is C_in/group, so grouped convs count right
        has_bias = len(node.input) > 2 and node.input[2] and op in ("Conv", "ConvTranspose")
        return 2.0 * macs + (n_out if has_bias else 0)
    if op in ("MaxPool", "AveragePool", "LpPool"):
        kernel = next(at.ints for at in node.attribute if at.name == "kernel_shape")
        return float(n_out * math.prod(kernel))
    if op in ("GlobalAveragePool", "GlobalMaxPool") or op.startswith("Reduce"):
        n_in = math.prod(shapes[node.input[0]][0])
        return float(n_in * (2 if op in ("ReduceL2", "ReduceSumSquare", "ReduceLogSumExp") else 1))
    if op in FLOPS_PER_ELEMENT:
        return float(n_out * FLOPS_PER_ELEMENT[op])
    return None


def _recurrent_flops(node: onnx.NodeProto, shapes: Mapping[str, tuple[tuple[int, ...], int]]) -> float:
    """LSTM/GRU/RNN (and DynamicQuantizeLSTM): steps × batch × directions × per-step cell FLOPs."""
    gates, elementwise = _RECURRENT[node.op_type]
    attrs = {a.name: a for a in node.attribute}
    hidden = attrs["hidden_size"].i
    directions = 2 if "direction" in attrs and attrs["direction"].s == b"bidirectional" else 1
    x = shapes[node.input[0]][0]  # [seq, batch, input] (layout 1: [batch, seq, input])
    steps_times_batch = math.prod(x[:-1])
    per_step = 2.0 * gates * hidden * (x[-1] + hidden) + elementwise * hidden
    return steps_times_batch * directions * per_step


def _elem_bytes(elem_type: int, precision_bytes: int) -> int:
    # float tensors take the precision's width; integer inputs (token ids, masks) keep their own
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    return precision_bytes if np.issubdtype(dtype, np.floating) else dtype.itemsize


def _tensor_bytes(name: str, shapes: Mapping[str, tuple[tuple[int, ...], int]], precision_bytes: int) -> int:
    if name not in shapes:
        return 0
    shape, elem_type = shapes[name]
    return math.prod(shape) * _elem_bytes(elem_type, precision_bytes)


def ops_and_depth(graph: onnx.GraphProto, weights: Collection[str]) -> tuple[int, int]:
    """(ops, depth) of ``graph`` (nodes in topological order, as ONNX requires): see the module docstring."""
    depth = {v.name: 0 for v in graph.input if v.name not in weights}  # data tensor → compute ops before it
    ops = 0
    for node in graph.node:
        seen = [depth[n] for n in node.input if n in depth]
        if not seen or node.op_type in _METADATA_OPS:
            continue
        launches = node.op_type not in _PASS_THROUGH_OPS
        ops += launches
        for out in node.output:
            if out:
                depth[out] = max(seen) + launches
    return ops, max((depth.get(v.name, 0) for v in graph.output), default=0)


def graph_cost(
    model: str | os.PathLike | onnx.ModelProto,
    batch_size: int = 1,
    precision: str = "fp32",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    batch_axes: Mapping[str, int | None] | None = None,
    values: Mapping[str, Any] | None = None,
) -> GraphCost:
    """Count parameters, FLOPs and minimum bytes of ``model`` at ``batch_size`` (see module docstring).

    ``input_shapes`` (name → shape, the batch axis ignored) fixes dynamic dims such as sequence length;
    ``batch_axes`` (input → axis or None) says where each input's batch is (default: axis 0 of every input
    and output); ``values`` are inputs' fixed values (a sample rate) for a shape run.
    """
    if batch_size < 1:
        raise BadInputError(f"batch size must be ≥ 1, got {batch_size}")
    if precision not in ELEMENT_BYTES:
        raise BadInputError(f"unknown precision {precision!r}; allowed: {', '.join(ELEMENT_BYTES)}")
    pb = ELEMENT_BYTES[precision]
    proto, weights, shapes = static_shapes(model, batch_size, input_shapes or {}, batch_axes, values)
    graph_io = {v.name for v in list(proto.graph.input) + list(proto.graph.output)} - set(weights)
    by_op: dict[str, OpCost] = {}
    uncounted: set[str] = set()
    weight_seen: set[str] = set()
    unfused = 0
    for node in proto.graph.node:
        cost = by_op.setdefault(node.op_type, OpCost())
        cost.nodes += 1
        flops = _node_flops(node, shapes)
        if flops is None:
            uncounted.add(node.op_type)
        cost.flops_per_inference += (flops or 0.0) / batch_size
        activations = [n for n in list(node.input) + list(node.output) if n and n not in weights]
        unfused += sum(_tensor_bytes(n, shapes, pb) for n in activations)
        if node.op_type in COMPUTE_OPS:
            cost.activation_bytes_per_inference += (
                sum(_tensor_bytes(n, shapes, pb) for n in activations if n not in graph_io) / batch_size
            )
        for name in node.input:
            if name in weights and name not in weight_seen and weights[name].data_type not in _INDEX_TYPES:
                weight_seen.add(name)
                if node.op_type == "Gather":
                    # an embedding lookup reads only the rows it gathers: per-inference traffic, not weights
                    cost.activation_bytes_per_inference += (
                        _tensor_bytes(node.output[0], shapes, pb) / batch_size
                    )
                else:
                    cost.weight_bytes += _tensor_bytes(name, shapes, pb)
    params = sum(math.prod(t.dims) for t in weights.values() if t.data_type not in _INDEX_TYPES)
    params += subgraph_weight_elements(proto.graph)  # If/Loop branches: weights too, their FLOPs not counted
    io_bytes = sum(_tensor_bytes(n, shapes, pb) for n in graph_io) / batch_size
    ops, depth = ops_and_depth(proto.graph, weights)
    return GraphCost(
        batch_size=batch_size,
        precision=precision,
        params=int(params),
        flops_per_inference=sum(c.flops_per_inference for c in by_op.values()),
        weight_bytes=int(sum(c.weight_bytes for c in by_op.values())),
        activation_bytes_per_inference=io_bytes
        + sum(c.activation_bytes_per_inference for c in by_op.values()),
        activation_bytes_unfused_per_inference=io_bytes + unfused / batch_size,
        by_op_type=by_op,
        uncounted_op_types=sorted(uncounted),
        ops=ops,
        depth=depth,
    )
