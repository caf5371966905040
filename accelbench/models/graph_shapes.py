"""Tensor shapes of an ONNX graph at a fixed batch: ONNX shape inference, and when that cannot resolve a
shape (exporters compute shapes through Where/Equal/Expand, which ONNX data propagation does not follow)
a run of the model in onnxruntime on dummy inputs that records every intermediate tensor's shape."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbench.errors import BadInputError
from accelbench.models.intake import has_external_data, one_line, promote_constants

Shapes = dict[str, tuple[tuple[int, ...], int]]  # tensor name -> (shape, ONNX elem_type)


def load_model(model: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the graph (external data not loaded: dims suffice), Constant-node weights promoted to
    initializers so that they count as weights (paddle2onnx stores every weight that way)."""
    if isinstance(model, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
    else:
        path = Path(model)
        if not path.is_file():
            raise BadInputError(f"file not found: {path}")
        try:
            copy = onnx.load(str(path), load_external_data=False)
        except Exception as err:
            raise BadInputError(f"not a valid ONNX model: {path} ({one_line(err)})") from None
    promote_constants(copy)
    return copy


def _strip_weights(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Move large initializers out of the graph (kept by name) so shape inference does not copy them."""
    kept, weights = [], {}
    for init in model.graph.initializer:
        weights[init.name] = init
        # small tensors (Reshape shapes, Resize scales, Gather indices) stay: they drive shape inference
        if math.prod(init.dims) > 64 or init.data_location == onnx.TensorProto.EXTERNAL:
            model.graph.input.append(
                onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
            )
        else:
            kept.append(init)
    stripped = [onnx.TensorProto() for _ in kept]
    for dst, src in zip(stripped, kept, strict=True):
        dst.CopyFrom(src)
    del model.graph.initializer[:]
    model.graph.initializer.extend(stripped)
    return weights


def _fix_input_dims(
    model: onnx.ModelProto,
    batch_size: int,
    input_shapes: Mapping[str, Sequence[int]],
    weights: Collection[str],
    batch_axes: Mapping[str, int | None] | None = None,
) -> None:
    """Fix the batch axis at ``batch_size`` (axis 0 of every input and output, or the inputs' own
    ``batch_axes``, the outputs then left to inference) and the other dynamic sizes from ``input_shapes``."""
    values = list(model.graph.input) + ([] if batch_axes is not None else list(model.graph.output))
    for value in values:
        if value.name in weights:
            continue
        dims = value.type.tensor_type.shape.dim
        wanted = input_shapes.get(value.name)
        axis = 0 if batch_axes is None else batch_axes.get(value.name)
        for i, dim in enumerate(dims):
            if i == axis and batch_axes is not None and dim.HasField("dim_value"):
                if dim.dim_value != batch_size:
                    raise BadInputError(
                        f"input {value.name!r} has its batch fixed at {dim.dim_value}, not {batch_size}"
                    )
            elif i == axis:
                dim.dim_value = batch_size
            elif wanted is not None and i < len(wanted) and wanted[i] > 0:
                dim.dim_value = int(wanted[i])
            elif not dim.HasField("dim_value") and value in model.graph.input:
                raise BadInputError(
                    f"input {value.name!r} has a dynamic dimension {i} ({dim.dim_param or '?'}); "
                    f"give its size with --shape {value.name}:… (models inspect, roofline) or in the model "
                    f"card's input shape (`accelbench models card MODEL.onnx --shape {value.name}:…` writes one)"
                )


def _inferred_shapes(
    model: onnx.ModelProto, weights: Mapping[str, onnx.TensorProto]
) -> dict[str, tuple[tuple[int, ...], int]]:
    """name -> (shape, elem_type) for every tensor whose shape inference resolved."""
    del model.graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as err:
        raise BadInputError(f"ONNX shape inference failed: {str(err).splitlines()[0][:200]}") from None
    g = inferred.graph
    out = {}
    for value in list(g.input) + list(g.value_info) + list(g.output):
        t = value.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            out[value.name] = (tuple(d.dim_value for d in t.shape.dim), t.elem_type)
    for name, init in weights.items():
        out[name] = (tuple(init.dims), init.data_type)
    return out


def static_shapes(
    model: str | os.PathLike | onnx.ModelProto,
    batch_size: int,
    input_shapes: Mapping[str, Sequence[int]],
    batch_axes: Mapping[str, int | None] | None = None,
    values: Mapping[str, Any] | None = None,
) -> tuple[onnx.ModelProto, dict[str, onnx.TensorProto], Shapes]:
    """(graph without its large weights, weights by name, shapes of every tensor) at ``batch_size``.

    ``values`` (input → array) feed inputs whose value matters (a sample rate) when shapes come from a run."""
    proto = load_model(model)
    weights = _strip_weights(proto)
    _fix_input_dims(proto, batch_size, input_shapes, weights, batch_axes)
    shapes = _inferred_shapes(proto, weights)
    if any(out and out not in shapes for node in proto.graph.node for out in node.output[:1]):
        run = _run_shapes(model, batch_size, input_shapes, batch_axes, values or {})
        shapes = {**run, **shapes}
    return proto, weights, shapes


@contextlib.contextmanager
def _session_source(proto: onnx.ModelProto, model: Any) -> Iterator[bytes | str]:
    """What ORT loads: the bytes; for a model with external data, the graph written for the moment beside
    the model (ORT reads external data only from the model's own folder), its data never loaded here."""
    if not has_external_data(proto) or isinstance(model, onnx.ModelProto):
        yield proto.SerializeToString()
        return
    folder = Path(model).resolve().parent
    try:
        handle, name = tempfile.mkstemp(prefix=".accelbench-shapes-", suffix=".onnx", dir=folder)
    except OSError as err:
        raise BadInputError(f"cannot write a graph beside {model} to run it ({err})") from None
    os.close(handle)
    try:
        onnx.save_model(proto, name)
        yield name
    finally:
        os.unlink(name)


def _run_shapes(
    model: str | os.PathLike | onnx.ModelProto,
    batch_size: int,
    input_shapes: Mapping[str, Sequence[int]],
    batch_axes: Mapping[str, int | None] | None = None,
    values: Mapping[str, Any] | None = None,
) -> Shapes:
    """Shapes of every node output from one onnxruntime run on dummy inputs (zeros; masks all ones)."""
    import onnxruntime as ort

    # a copy (we add outputs and fix dims); external data stays on disk: a >2 GB model cannot be serialised
    full = load_model(model)
    weights = {init.name for init in full.graph.initializer}
    _fix_input_dims(full, batch_size, input_shapes, weights, batch_axes)
    present = {o.name for o in full.graph.output}
    for node in full.graph.node:
        full.graph.output.extend(onnx.ValueInfoProto(name=o) for o in node.output if o and o not in present)
    feeds = {}
    for value in full.graph.input:
        if value.name in weights:
            continue
        t = value.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if values is not None and value.name in values:
            feeds[value.name] = np.asarray(values[value.name], dtype)
        else:
            feeds[value.name] = (np.ones if "mask" in value.name.lower() else np.zeros)(shape, dtype)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # exporters' wrong declared output shapes: one warning per run
    try:
        with _session_source(full, model) as source:
            session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
            names = [o.name for o in session.get_outputs()]
            values = session.run(names, feeds)
    except Exception as err:  # onnxruntime raises its own exception types for bad graphs
        raise BadInputError(f"cannot determine tensor shapes: {one_line(err)}") from None
    return {
        name: (tuple(v.shape), onnx.helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype))
        for name, v in zip(names, values, strict=True)
    }
