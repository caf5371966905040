"""Where a graph keeps its batch: dynamic, fixed at N or absent, and which axis of each input it is.

Read from the graph's declared input shapes (what ``accelbench models card`` writes into the card):

- a dynamic first dimension on any input (PyTorch ``dynamic_axes``, tf2onnx, paddle2onnx) → ``dynamic``;
  each input's batch axis is where its dimension carries the same ``dim_param`` (``batch``), else its first
  dynamic dimension (silero-vad: ``input [?, ?]`` axis 0, ``state [2, ?, 128]`` axis 1);
- no dynamic first dimension (``torch.onnx.export`` without ``dynamic_axes``) → ``fixed:N`` with N the
  first dimension of the first input; an input whose first dimension differs has no batch axis;
- only scalars (or no input with a dimension) → ``none``.

Outputs: declared shapes are often wrong in exported graphs (ddddocr's CRNN declares ``[1, seqlen]`` and
returns ``[16, 1, 8210]``), so ``probe`` runs the graph once on zeros (twice for a dynamic batch, at 1 and 2)
and the card takes the real rank, and the batch axis as the one whose size followed the batch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from accelbench.models.cards import TensorSpec


@dataclass(frozen=True)
class GraphBatch:
    batch: str  # dynamic | fixed:N | none
    axes: dict[str, int | None]  # input name → batch axis


def dims(value: onnx.ValueInfoProto) -> list[int | str]:
    """Declared sizes: an int, a dim_param name, or '?' for an unnamed dynamic size."""
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
        for d in value.type.tensor_type.shape.dim
    ]


def _dynamic(d: int | str) -> bool:
    return not (isinstance(d, int) and d > 0)


def graph_batch(inputs: Sequence[onnx.ValueInfoProto], fixed_values: set[str]) -> GraphBatch:
    """The batch of a graph from its (non-weight) inputs; ``fixed_values`` are inputs given a value."""
    shaped = [(v.name, dims(v)) for v in inputs if v.name not in fixed_values and dims(v)]
    axes: dict[str, int | None] = {v.name: None for v in inputs}
    if not shaped:
        return GraphBatch("none", axes)
    first_dynamic = [(name, d) for name, d in shaped if _dynamic(d[0])]
    if first_dynamic:
        param = first_dynamic[0][1][0]
        for name, d in shaped:
            named = [i for i, x in enumerate(d) if isinstance(x, str) and x != "?" and x == param]
            unnamed = [i for i, x in enumerate(d) if _dynamic(x)]
            axes[name] = named[0] if named else (unnamed[0] if unnamed else None)
        return GraphBatch("dynamic", axes)
    size = int(shaped[0][1][0])
    for name, d in shaped:
        axes[name] = 0 if d[0] == size else None
    return GraphBatch(f"fixed:{size}", axes)


def _feeds(specs: Sequence[TensorSpec], batch: int) -> dict[str, np.ndarray] | None:
    feeds = {}
    for spec in specs:
        if spec.value is not None:
            feeds[spec.name] = np.asarray(spec.value, dtype=spec.dtype)
            continue
        shape = spec.run_shape(batch)
        if any(d < 1 for d in shape):  # a token sequence length the generator fills: no probe
            return None
        maker = np.ones if "mask" in spec.name.lower() else np.zeros
        feeds[spec.name] = maker(shape, dtype=spec.dtype)
    return feeds


def probe(
    path: str | os.PathLike, specs: Sequence[TensorSpec], dynamic: bool
) -> tuple[dict[str, tuple[int, ...]], dict[str, int | None]] | None:
    """Output shapes of one run on zeros at batch 1 and, for a dynamic batch, each output's batch axis
    (the axis whose size went from 1 to 2); None when the graph does not run on zeros (or is too big)."""
    import onnxruntime as ort

    one = _feeds(specs, 1)
    if one is None or os.path.getsize(path) > 1 << 30:
        return None
    options = ort.SessionOptions()
    options.log_severity_level = 3  # exporters' declared shapes are wrong often: ORT warns each time
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        at1 = [np.shape(v) for v in session.run(names, one)]
        at2 = [np.shape(v) for v in session.run(names, _feeds(specs, 2))] if dynamic else at1
    except Exception:  # noqa: BLE001 - zeros are not a valid input for every model: no probe then
        return None
    shapes = dict(zip(names, at1, strict=True))
    axes: dict[str, int | None] = {}
    for name, a, b in zip(names, at1, at2, strict=True):
        moved = [i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x == 1 and y == 2]
        axes[name] = moved[0] if moved and len(a) == len(b) else None
    return shapes, axes
