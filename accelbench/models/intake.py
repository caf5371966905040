"""Graph intake: normalise what exporters write before accelbench counts, quantizes or serves a graph.

Exporters disagree on the basics. paddle2onnx stores every weight as a ``Constant`` node (no initializers),
writes opset 11 or 12 and leaves batch and spatial dimensions dynamic; PyTorch and tf2onnx write
initializers; models over the 2 GB protobuf limit keep their tensors in external data files. Here:

- ``promote_constants``: main-graph ``Constant`` nodes become initializers, so they count as weights and the
  quantizer sees them as weights (ORT quantizes only initializer weights);
- ``upgrade_opset``: ``onnx.version_converter`` to the opset a recipe needs (per-channel QDQ needs 13);
- ``load_full`` / ``save_model``: load with external data, save with external data when the model needs it;
- ``weight_elements``: the parameter count convention of the graph cost (initializers and Constant tensors,
  index types int32/int64 excluded);
- ``quantized_ops``: the ops that say a graph is already quantized (QLinear*, *Integer, DynamicQuantize*,
  QuantizeLinear → DequantizeLinear pairs), so quantize keeps it as the INT8 variant instead of again.

- ``check_onnx_file``: the file is a readable ONNX model that passes the ONNX checker (the first check on
  every graph a user gives).

Every failure is a BadInputError of one line.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path

import onnx
from onnx import helper

from accelbench.errors import BadInputError

INDEX_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
# protobuf refuses to serialise a message over 2 GiB; stay clear of it
EXTERNAL_DATA_THRESHOLD_BYTES = 1_800_000_000
PER_CHANNEL_MIN_OPSET = 13  # DequantizeLinear/QuantizeLinear gained ``axis`` in opset 13


# where in ORT's C++ source an error was raised: "/onnxruntime_src/…/model.cc:256 onnxruntime::Model::Model(…) "
_CPP_LOCATION = re.compile(r"/\S+\.(?:cc|cpp|h):\d+ (?:[\w:<>*&]+ )*[\w:~<>]+\([^)]*\)\s*")


def one_line(err: BaseException) -> str:
    """The first non-empty line of an exception's message (ORT and ONNX errors span many), capped."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else type(err).__name__
    if text.startswith("[ONNXRuntimeError]"):  # "[ONNXRuntimeError] : 1 : FAIL : …": keep what follows
        text = _CPP_LOCATION.sub("", text.split(" : ", 3)[-1])
    return text[:300]


def constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor a ``Constant`` node produces (any of its value attributes), None for a sparse value."""
    for attr in node.attribute:
        name = attr.name
        if name == "value":
            tensor = onnx.TensorProto()
            tensor.CopyFrom(attr.t)
        elif name == "value_float":
            tensor = helper.make_tensor("", onnx.TensorProto.FLOAT, [], [attr.f])
        elif name == "value_floats":
            tensor = helper.make_tensor("", onnx.TensorProto.FLOAT, [len(attr.floats)], list(attr.floats))
        elif name == "value_int":
            tensor = helper.make_tensor("", onnx.TensorProto.INT64, [], [attr.i])
        elif name == "value_ints":
            tensor = helper.make_tensor("", onnx.TensorProto.INT64, [len(attr.ints)], list(attr.ints))
        else:  # sparse_value, value_string(s): not weights
            continue
        tensor.name = node.output[0]
        return tensor
    return None


def promote_constants(model: onnx.ModelProto) -> int:
    """Turn main-graph Constant nodes into initializers, in place; returns how many were promoted."""
    outputs = {o.name for o in model.graph.output}  # a graph output fed by a Constant stays a node
    keep, promoted = [], []
    for node in model.graph.node:
        is_constant = node.op_type == "Constant" and not node.domain and node.output[0] not in outputs
        tensor = constant_tensor(node) if is_constant else None
        if tensor is None:
            keep.append(node)
        else:
            promoted.append(tensor)
    if not promoted:
        return 0
    del model.graph.node[:]
    model.graph.node.extend(keep)
    model.graph.initializer.extend(promoted)
    if model.ir_version < 4:  # before IR 4 every initializer also had to be a graph input
        model.ir_version = 4
    return len(promoted)


def weight_elements(model: onnx.ModelProto) -> int:
    """Parameters: elements of initializers and main-graph Constant tensors, int32/int64 excluded."""
    total = 0
    tensors = list(model.graph.initializer)
    tensors += [t for n in model.graph.node if n.op_type == "Constant" and (t := constant_tensor(n))]
    for tensor in tensors:
        if tensor.data_type not in INDEX_TYPES:
            count = 1
            for d in tensor.dims:
                count *= d
            total += count
    return total


_QUANTIZED_PREFIXES = ("QLinear", "DynamicQuantize")
_QUANTIZED_SUFFIXES = ("Integer", "IntegerToFloat")  # ConvInteger, MatMulInteger, MatMulIntegerToFloat
QUANTIZED_EXACT = ("QGemm", "QAttention", "QOrderedMatMul")


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for body in attr.graphs:
                    yield from _all_nodes(body)


def quantized_ops(model: onnx.ModelProto) -> list[str]:
    """The op types (sorted) that mark ``model`` as already quantized; empty for a float graph.

    A QuantizeLinear whose output feeds a DequantizeLinear (a QDQ pair) counts as ``QDQ``; a lone
    QuantizeLinear/DequantizeLinear at the graph's edge (int8 inputs) does not."""
    found = set()
    readers: dict[str, set[str]] = {}
    nodes = list(_all_nodes(model.graph))  # If/Loop branches too
    for node in nodes:
        for name in node.input:
            readers.setdefault(name, set()).add(node.op_type)
    for node in nodes:
        op = node.op_type
        if op.startswith(_QUANTIZED_PREFIXES) or op.endswith(_QUANTIZED_SUFFIXES) or op in QUANTIZED_EXACT:
            found.add(op)
        elif op == "QuantizeLinear" and any("DequantizeLinear" in readers.get(o, ()) for o in node.output):
            found.add("QDQ")
    return sorted(found)


def subgraph_weight_elements(graph: onnx.GraphProto) -> int:
    """Parameters inside the control-flow branches (If/Loop/Scan bodies) of ``graph``, at any depth: their
    initializers and Constant tensors, int32/int64 excluded (silero-vad keeps all its weights there)."""
    total = 0
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                bodies = [attr.g]
            else:
                bodies = list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []
            for body in bodies:
                tensors = list(body.initializer)
                tensors += [t for n in body.node if n.op_type == "Constant" and (t := constant_tensor(n))]
                total += sum(math.prod(t.dims) for t in tensors if t.data_type not in INDEX_TYPES)
                total += subgraph_weight_elements(body)
    return total


def opset(model: onnx.ModelProto) -> int:
    """The default-domain opset the model imports (1 when it imports none)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def upgrade_opset(model: onnx.ModelProto, version: int) -> onnx.ModelProto:
    """The model converted to ``version`` with onnx.version_converter (unchanged when already there)."""
    current = opset(model)
    if current >= version:
        return model
    try:
        converted = onnx.version_converter.convert_version(model, version)
    except Exception as err:  # the converter raises RuntimeError/ConvertError with C++ messages
        raise BadInputError(f"opset {current} → {version} upgrade failed: {one_line(err)}") from None
    return converted


def fix_input_dims(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> int:
    """Give dynamic input dimensions the card's fixed sizes, in place; returns how many were set.

    A dynamic batch is -1 in the card's shape and stays dynamic so the variant still serves any batch size;
    with the rest fixed, plain ONNX shape inference resolves the graph (symbolic inference on a paddle2onnx
    detector took 25 s for what this does in milliseconds).
    """
    fixed = 0
    weights = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        wanted = shapes.get(value.name)
        if value.name in weights or not wanted:
            continue
        for i, dim in enumerate(value.type.tensor_type.shape.dim):
            if i < len(wanted) and wanted[i] > 0 and not dim.HasField("dim_value"):
                dim.dim_value = int(wanted[i])
                fixed += 1
    if fixed:
        del model.graph.value_info[:]  # stale shapes computed for the dynamic sizes
    return fixed


def check_onnx_file(path: Path) -> None:
    """BadInputError unless ``path`` is a readable ONNX model that passes the ONNX checker."""
    if not path.is_file():
        raise BadInputError(f"file not found: {path}")
    try:
        # The path form of the checker also handles models with external data and >2 GB models.
        onnx.checker.check_model(str(path))
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf DecodeError, ValidationError, truncated files: all mean "not ONNX"
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BadInputError(f"not a valid ONNX model: {path} ({reason[:200]})") from None
    if not model.graph.node or not model.graph.output:
        raise BadInputError(f"not a valid ONNX model: {path} (the graph has no nodes or no outputs)")


def has_external_data(model: onnx.ModelProto) -> bool:
    # exporters put only initializers in external data
    return any(onnx.external_data_helper.uses_external_data(t) for t in model.graph.initializer)


def load_full(path: str | os.PathLike) -> onnx.ModelProto:
    """The model with its external data (from files beside it), as a BadInputError on failure."""
    try:
        return onnx.load(str(path), load_external_data=True)
    except Exception as err:
        raise BadInputError(f"cannot load {path}: {one_line(err)}") from None


def save_model(model: onnx.ModelProto, path: str | os.PathLike, external: bool | None = None) -> Path:
    """Save ``model``; its tensors go to ``<name>.data`` beside it when it is too big for one protobuf
    (or when ``external`` says so)."""
    dst = Path(path)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if external is None:
        external = model.ByteSize() > EXTERNAL_DATA_THRESHOLD_BYTES
    if external:
        data = dst.with_name(dst.name + ".data")
        data.unlink(missing_ok=True)  # onnx appends to an existing data file
        onnx.save_model(
            model, str(dst), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name
        )
    else:
        onnx.save_model(model, str(dst))
    return dst


def copy_model(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Copy an ONNX file; a model with external data is re-saved so its data file travels beside it."""
    header = onnx.load(str(src), load_external_data=False)
    if not has_external_data(header):
        shutil.copyfile(src, dst)
        return Path(dst)
    return save_model(load_full(src), dst, external=True)
