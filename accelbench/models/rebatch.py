"""``accelbench models rebatch``: make a graph whose batch is fixed (PyTorch's default export) take any batch.

The first dimension of every input that equals the fixed batch N becomes the symbolic ``batch``; every output
size becomes symbolic (a CRNN's batch is not first in its output) and stale intermediate shapes are dropped. A graph can still hard-code N inside (a Reshape to ``[1, -1]``, an
Expand or ConstantOfShape of a constant shape): such a node is named and the graph refused. The result is
proved, not assumed: a run at batch 2 must equal two runs at batch 1, sample for sample.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from accelbench.errors import BadInputError
from accelbench.models.intake import check_onnx_file, constant_tensor, load_full, one_line, save_model

SHAPE_OPS = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0, "Tile": 1}  # op → input that is a shape
BATCH_NAME = "batch"
TOLERANCE = 1e-4  # relative to the largest output value: ORT may pick other kernels at batch 2


@dataclass(frozen=True)
class Rebatched:
    path: Path
    batch: int  # the fixed batch it had
    tensors: tuple[str, ...]  # the inputs and outputs made dynamic
    max_abs_diff: float  # batch-2 run vs two batch-1 runs


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and (tensor := constant_tensor(node)) is not None:
            values[node.output[0]] = numpy_helper.to_array(tensor)
    return values


def hard_coded_batch(graph: onnx.GraphProto, batch: int) -> str | None:
    """The first node whose constant target shape starts with the fixed batch, or None."""
    constants = _constants(graph)
    for node in graph.node:
        index = SHAPE_OPS.get(node.op_type)
        if index is None or len(node.input) <= index or node.input[index] not in constants:
            continue
        shape = np.asarray(constants[node.input[index]]).reshape(-1)
        if shape.size > 1 and int(shape[0]) == batch:
            return f"{node.op_type} node {node.name or node.output[0]!r} (constant shape {shape.tolist()})"
    return None


def _dynamic_first_dims(model: onnx.ModelProto) -> tuple[int, tuple[str, ...]]:
    weights = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in weights]
    first = [v.type.tensor_type.shape.dim[0] for v in inputs if v.type.tensor_type.shape.dim]
    if not first or not all(d.HasField("dim_value") for d in first):
        raise BadInputError(
            "the graph's batch is already dynamic (or it has no batched input): nothing to do"
        )
    batch = first[0].dim_value
    changed = []
    for value in inputs:
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value") and dims[0].dim_value == batch:
            dims[0].dim_param = BATCH_NAME  # clears dim_value (a oneof)
            changed.append(value.name)
    for value in model.graph.output:  # declared output sizes are often wrong (a CRNN's batch is not first)
        for i, dim in enumerate(value.type.tensor_type.shape.dim):
            dim.dim_param = f"{value.name}_{i}"
    del model.graph.value_info[:]
    return batch, tuple(changed)


def _proof(
    path: Path, inputs: list[onnx.ValueInfoProto], batch: int, sizes: dict[str, tuple[int, ...]]
) -> float:
    """max |run(batch 2·N) - [run(N), run(N)]| on normal(0, 1) samples; ``sizes`` fill dynamic sizes."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    feeds: list[dict[str, np.ndarray]] = [{}, {}]
    for value in inputs:
        tt = value.type.tensor_type
        given = sizes.get(value.name, ())
        shape = [
            batch if i == 0 else (d.dim_value or (given[i] if i < len(given) else 0))
            for i, d in enumerate(tt.shape.dim)
        ]
        if 0 in shape:
            example = ",".join(str(d or "N") for d in shape)
            raise BadInputError(
                f"input {value.name!r} has a dynamic size; the proof run needs it: --shape {value.name}:{example}"
            )
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        for feed in feeds:
            feed[value.name] = rng.normal(size=shape).astype(dtype)
    options = ort.SessionOptions()
    options.log_severity_level = 4  # the failure comes back as one line below
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        apart = [session.run(None, f) for f in feeds]
        together = session.run(None, {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]})
    except Exception as err:  # noqa: BLE001 - ORT names the node that refuses the new batch
        raise BadInputError(f"the graph does not run at batch {2 * batch}: {one_line(err)}") from None
    worst, scale = 0.0, 1.0
    for parts, joint in zip(zip(*apart, strict=True), together, strict=True):
        one = parts[0].shape  # the output's batch axis: the one that doubled (a CRNN's is 1: [T, N, C])
        axes = [i for i in range(len(one)) if joint.shape == (*one[:i], 2 * one[i], *one[i + 1 :])]
        if not axes:
            raise BadInputError(f"at batch {2 * batch} an output has shape {joint.shape}; at {batch} {one}")
        expected = np.concatenate(parts, axis=axes[0])
        worst = max(worst, float(np.max(np.abs(expected - joint))) if expected.size else 0.0)
        scale = max(scale, float(np.max(np.abs(expected))) if expected.size else 0.0)
    if worst > TOLERANCE * scale:
        raise BadInputError(
            f"a batch of 2 differs from two batches of 1 by {worst:.3g} (max |output| {scale:.3g}): "
            "the graph mixes samples; keep its batch fixed"
        )
    return worst


def rebatch(src: str | os.PathLike, out: str | os.PathLike, shapes: tuple[str, ...] = ()) -> Rebatched:
    """Write ``out``: ``src`` with a dynamic batch, checked by running it (BadInputError when it cannot);
    ``shapes`` (``NAME:D1,D2,…``) give other dynamic sizes for that run."""
    from accelbench.models.cards import parse_shape

    sizes = dict(parse_shape(s) for s in shapes)
    check_onnx_file(Path(src))
    model = load_full(src)
    batch, changed = _dynamic_first_dims(model)
    if (node := hard_coded_batch(model.graph, batch)) is not None:
        raise BadInputError(f"{Path(src).name} hard-codes its batch of {batch} in {node}: cannot rebatch it")
    weights = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in weights]
    dst = save_model(model, out)
    try:
        diff = _proof(dst, inputs, batch, sizes)
    except BadInputError:
        dst.unlink(missing_ok=True)
        raise
    return Rebatched(dst, batch, changed, diff)
