"""``accelbench models card``: a model card written from an ONNX graph, so nobody has to read source to write one.

From the graph: the inputs and outputs (names, dtypes, shapes), where the batch is (``graph_batch``: dynamic,
fixed at N or none, and each input's batch axis), recurrent state inputs (an input ``state`` with an output
``stateN``, ``h_in``/``h_out``, …: ``state_from``), a request generator guessed from the inputs and an
accuracy metric guessed from the outputs (docs/models.md):

- generator ``tokens`` when an integer input is named like token ids (``input_ids``); the sequence length is
  the input's fixed second dimension or 128, the vocabulary the rows of the embedding table it indexes;
  ``image`` when a float input is 4-D with 1 or 3 channels (NCHW or NHWC); otherwise ``uniform`` (generic:
  [0, 1) for floats, [0, 256) when every input is an integer, e.g. bytes);
- metric ``top1`` when the output is a class axis (named like logits, probabilities, labels or softmax; last
  dimension > 1), ``cosine`` for embeddings, maps and detection heads, ``max_abs`` for one value per row;
- task ``embedding``, ``classification``, ``segmentation`` (a 4-D map output), ``detection`` (a 3-D head
  ``[N, C, anchors]`` with more anchors than channels) or ``other``.

A dynamic dimension other than the batch (and a token sequence length) must be given with ``--shape``; a
scalar input (a sample rate, a flag) needs its value, ``--value NAME:V``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import onnx

from accelbench.errors import BadInputError
from accelbench.models import graph_batch
from accelbench.models.cards import (
    DTYPES,
    AccuracySpec,
    GeneratorSpec,
    ModelCard,
    TensorSpec,
    card_from_toml,
    card_name,
    parse_shape,
)
from accelbench.models.intake import check_onnx_file
from accelbench.util import atomic_write_bytes

DEFAULT_SEQ_LEN = 128
COSINE_TOLERANCE = 0.99  # INT8 of a healthy model stays above this on every corpus model that passes
TOP1_TOLERANCE = 0.9  # fraction of held-out samples whose argmax must agree with FP32
MAX_ABS_TOLERANCE = 0.05  # one value per row (a probability, a score)
_CLASS_NAMES = re.compile(r"logit|prob|softmax|label|class|score", re.IGNORECASE)
_TOKEN_NAMES = re.compile(r"ids$|^ids|token", re.IGNORECASE)
# output names that carry an input's recurrent state to the next run: state → stateN, h_in → h_out, …
_STATE_OUTPUTS = ("{}N", "{}_out", "{}_new", "new_{}", "next_{}", "out_{}")


def parse_value(text: str) -> tuple[str, list[float] | float]:
    """``NAME:V`` or ``NAME:V1,V2,…`` → (name, value); BadInputError on anything else."""
    name, sep, values = text.rpartition(":")
    try:
        numbers = [float(v) for v in values.split(",")]
    except ValueError:
        numbers = []
    if not sep or not name or not numbers:
        raise BadInputError(f"--value {text!r}: expected NAME:V or NAME:V1,V2,…, e.g. sr:16000")
    return name, numbers[0] if len(numbers) == 1 and "," not in values else numbers


_dims = graph_batch.dims


def _dtype(value: onnx.ValueInfoProto) -> str:
    elem = value.type.tensor_type.elem_type
    try:
        name = onnx.helper.tensor_dtype_to_np_dtype(elem).name
    except (KeyError, ValueError, TypeError):
        name = f"elem_type {elem}"
    if name not in DTYPES:
        raise BadInputError(
            f"tensor {value.name!r} has dtype {name}, which cards do not support ({', '.join(DTYPES)})"
        )
    return name


def _value_spec(value: onnx.ValueInfoProto, given: list[float] | float) -> TensorSpec:
    dims = _dims(value)
    data = given if isinstance(given, list) else [given]
    if len(dims) > 1 or (dims and isinstance(dims[0], int) and dims[0] > 0 and dims[0] != len(data)):
        raise BadInputError(f"--value {value.name}: {len(data)} value(s) for an input of shape {dims}")
    dtype = _dtype(value)
    cast = float if dtype.startswith("float") else (bool if dtype == "bool" else int)
    items = [cast(x) for x in data]
    shape = (len(items),) if dims else ()
    return TensorSpec(value.name, dtype, shape, batch_axis=None, value=items if dims else items[0])


def _input_spec(
    value: onnx.ValueInfoProto, given: tuple[int, ...] | None, token: bool, batch: str, axis: int | None
) -> TensorSpec:
    dims = _dims(value)
    if not dims:
        raise BadInputError(
            f"input {value.name!r} is a {_dtype(value)} scalar (a sample rate, a flag): give the value it must "
            f"have with --value {value.name}:V"
        )
    if given is not None:
        if len(given) != len(dims):
            raise BadInputError(f"--shape {value.name}: {len(given)} sizes for a {len(dims)}-D input {dims}")
        dims = [d if i == axis else g for i, (d, g) in enumerate(zip(dims, given, strict=True))]
    shape = []
    for i, d in enumerate(dims):
        if i == axis and batch == "dynamic":
            shape.append(-1)
        elif isinstance(d, int) and d > 0:
            shape.append(d)
        elif token and i == 1:
            shape.append(-1)  # the tokens generator's seq_len fills it
        else:
            example = ",".join(
                "1" if j == axis else (str(x) if isinstance(x, int) and x > 0 else "N")
                for j, x in enumerate(dims)
            )
            raise BadInputError(
                f"input {value.name!r} has a dynamic dimension {i} ({d}); give its size with "
                f"--shape {value.name}:{example}"
            )
    return TensorSpec(value.name, _dtype(value), tuple(shape), batch_axis=axis)


def _output_spec(
    value: onnx.ValueInfoProto, batch: str, probed: tuple[int, ...] | None, axis: int | None
) -> TensorSpec:
    """Declared sizes (-1 where dynamic), the probed ones where the declared rank is wrong; the batch axis
    -1 when the batch is dynamic."""
    dims = _dims(value)
    if probed is not None and len(probed) != len(dims):
        dims = list(probed)
    shape = [d if isinstance(d, int) and d > 0 else -1 for d in dims]
    if batch == "dynamic" and axis is not None and axis < len(shape):
        shape[axis] = -1
    if axis is not None and axis >= len(shape):
        axis = None
    return TensorSpec(value.name, _dtype(value), tuple(shape), batch_axis=axis)


def _output_axis(batch: str, shape: Sequence[int], probed_axis: int | None, batchable: bool) -> int | None:
    """An output's batch axis: 0 where every input batches on 0, else the probed one; a fixed batch N:
    the first axis of size N."""
    if not shape or batch == "none":
        return None
    if batch == "dynamic":
        return 0 if batchable and probed_axis in (None, 0) else probed_axis
    size = int(batch.partition(":")[2])
    return next((i for i, d in enumerate(shape) if d == size), None)


def _vocab_size(graph: onnx.GraphProto, ids_name: str) -> int | None:
    """Rows of the embedding table a Gather indexes with the token ids (optimum/PyTorch exports)."""
    tables = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == ids_name:
            table = tables.get(node.input[0])
            if table is not None and len(table.dims) == 2:
                return int(table.dims[0])
    return None


def _generator(
    graph: onnx.GraphProto, inputs: Sequence[onnx.ValueInfoProto], token_inputs: set[str]
) -> GeneratorSpec:
    if token_inputs:
        ids = next((n for n in sorted(token_inputs) if _TOKEN_NAMES.search(n)), sorted(token_inputs)[0])
        # a token input's fixed second dimension is the sequence length
        fixed = [
            d for v in inputs if v.name in token_inputs for d in _dims(v)[1:2] if isinstance(d, int) and d > 0
        ]
        seq = fixed[0] if fixed else DEFAULT_SEQ_LEN
        return GeneratorSpec(kind="tokens", vocab_size=_vocab_size(graph, ids) or 30522, seq_len=seq)
    for value in inputs:
        dims = _dims(value)
        if _dtype(value).startswith("float") and len(dims) == 4 and (dims[1] in (1, 3) or dims[3] in (1, 3)):
            return GeneratorSpec(kind="image", mean=0.0, std=1.0)
    if all(not _dtype(v).startswith("float") and _dtype(v) != "bool" for v in inputs):
        return GeneratorSpec(kind="uniform", low=0.0, high=256.0)
    return GeneratorSpec(kind="uniform", low=0.0, high=1.0)


def _producer_ops(graph: onnx.GraphProto) -> dict[str, str]:
    """Graph output name → the op that computes it, looking through reshapes and identities."""
    made_by = {o: n for n in graph.node for o in n.output}
    ops = {}
    for value in graph.output:
        node = made_by.get(value.name)
        while node is not None and node.op_type in ("Identity", "Reshape", "Flatten", "Squeeze", "Cast"):
            node = made_by.get(node.input[0])
        ops[value.name] = node.op_type if node is not None else ""
    return ops


def _accuracy_and_task(
    outputs: Sequence[TensorSpec], generator: GeneratorSpec, producers: dict[str, str]
) -> tuple[AccuracySpec, str]:
    embedding = next((o for o in outputs if "embedding" in o.name.lower() and len(o.shape) == 2), None)
    if embedding is not None:
        return AccuracySpec("cosine", COSINE_TOLERANCE, embedding.name), "embedding"
    out = outputs[0]
    classes = out.shape[-1] if len(out.shape) > 1 else 1
    class_like = _CLASS_NAMES.search(out.name) or producers.get(out.name) in ("Softmax", "LogSoftmax")
    if class_like and classes != 1 and len(out.shape) in (2, 3):
        return AccuracySpec("top1", TOP1_TOLERANCE, out.name), "classification" if len(
            out.shape
        ) == 2 else "other"
    if len(out.shape) == 2 and classes == 1:
        return AccuracySpec("max_abs", MAX_ABS_TOLERANCE, out.name), "other"
    if len(out.shape) >= 3 and producers.get(out.name) in ("Sigmoid", "Softmax"):
        # a probability map is mostly zeros: cosine of near-zero rows is noise, the largest error is not
        task = "segmentation" if len(out.shape) == 4 else "other"
        return AccuracySpec("max_abs", MAX_ABS_TOLERANCE, out.name), task
    if len(out.shape) == 4:
        task = "segmentation"
    elif len(out.shape) == 3 and out.shape[1] > 0 and (out.shape[2] == -1 or out.shape[2] > out.shape[1]):
        task = "detection"
    else:
        task = "embedding" if generator.kind == "tokens" else "other"
    return AccuracySpec("cosine", COSINE_TOLERANCE, out.name), task


def card_from_graph(
    onnx_path: str | os.PathLike,
    shapes: Sequence[str] = (),
    name: str | None = None,
    task: str | None = None,
    card_dir: str | os.PathLike | None = None,
    values: Sequence[str] = (),
) -> ModelCard:
    """A card for ``onnx_path``; ``shapes`` are ``--shape`` strings, ``values`` ``--value`` ones; ``source``
    is relative to ``card_dir``."""
    path = Path(onnx_path)
    check_onnx_file(path)
    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in weights]
    given = _named(path, inputs, "--shape", dict(parse_shape(s) for s in shapes))
    fixed = _named(path, inputs, "--value", dict(parse_value(v) for v in values))
    batch = graph_batch.graph_batch(inputs, set(fixed))
    in_specs = _input_specs(graph, inputs, given, fixed, batch)
    out_specs = _output_specs(path, graph, in_specs, batch.batch)
    data = [v for v in inputs if v.name not in fixed and not _state_of(v.name, graph)]
    generator = _generator(graph, data, {s.name for s in in_specs if s.name in _token_inputs(data)})
    accuracy, guessed_task = _accuracy_and_task(out_specs, generator, _producer_ops(graph))
    base = Path(card_dir) if card_dir is not None else Path.cwd()
    try:
        source = os.path.relpath(path.resolve(), base.resolve())
    except ValueError:  # another drive (Windows)
        source = str(path.resolve())
    producer = " ".join(p for p in (model.producer_name, model.producer_version) if p) or "unknown producer"
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return ModelCard(
        name=name or card_name(path.stem),
        source=f"onnx:{Path(source).as_posix()}",
        task=task or guessed_task,
        batch=batch.batch,
        inputs=in_specs,
        outputs=out_specs,
        generator=generator,
        accuracy=accuracy,
        description=f"written by `accelbench models card` from {path.name} ({producer}, opset {opset})",
        card_path=base / "card.toml",
    )


def _named(path: Path, inputs: Sequence[onnx.ValueInfoProto], option: str, given: dict) -> dict:
    if unknown := sorted(set(given) - {v.name for v in inputs}):
        raise BadInputError(
            f"{option} names no input of {path.name}: {', '.join(unknown)}; "
            f"inputs: {', '.join(v.name for v in inputs)}"
        )
    return given


def _token_inputs(inputs: Sequence[onnx.ValueInfoProto]) -> set[str]:
    tokens = {v.name for v in inputs if _dtype(v).startswith("int") and _TOKEN_NAMES.search(v.name)}
    if tokens:  # masks and type ids of a text encoder share the token axis
        tokens |= {v.name for v in inputs if _dtype(v).startswith("int") and len(_dims(v)) == 2}
    return tokens


def _state_of(name: str, graph: onnx.GraphProto) -> str | None:
    """The output that carries input ``name``'s recurrent state (``state`` → ``stateN``, ``h_in`` → ``h_out``)."""
    outputs = {o.name for o in graph.output}
    candidates = [pattern.format(name) for pattern in _STATE_OUTPUTS]
    if name.endswith("_in"):
        candidates.append(name[:-3] + "_out")
    if name.startswith("in_"):
        candidates.append("out_" + name[3:])
    return next((c for c in candidates if c in outputs), None)


def _input_specs(
    graph: onnx.GraphProto,
    inputs: Sequence[onnx.ValueInfoProto],
    given: dict,
    fixed: dict,
    batch: graph_batch.GraphBatch,
) -> tuple[TensorSpec, ...]:
    tokens = _token_inputs([v for v in inputs if v.name not in fixed])
    specs = []
    for v in inputs:
        if v.name in fixed:
            specs.append(_value_spec(v, fixed[v.name]))
            continue
        spec = _input_spec(v, given.get(v.name), v.name in tokens, batch.batch, batch.axes[v.name])
        specs.append(dataclasses.replace(spec, state_from=_state_of(v.name, graph)))
    return tuple(specs)


def _output_specs(
    path: Path, graph: onnx.GraphProto, inputs: tuple[TensorSpec, ...], batch: str
) -> tuple[TensorSpec, ...]:
    batchable = batch == "dynamic" and all(s.batch_axis == 0 for s in inputs)
    probed = graph_batch.probe(path, inputs, dynamic=batch == "dynamic")
    shapes, axes = probed if probed is not None else ({}, {})
    specs = []
    for value in graph.output:
        shape = shapes.get(value.name) or tuple(d if isinstance(d, int) else -1 for d in _dims(value))
        axis = _output_axis(batch, shape, axes.get(value.name), batchable)
        specs.append(_output_spec(value, batch, shapes.get(value.name), axis))
    return tuple(specs)


_GENERATOR_FIELDS = {
    "tokens": ("vocab_size", "seq_len"),
    "image": ("mean", "std"),
    "uniform": ("low", "high"),
}


def card_toml(card: ModelCard) -> str:
    """The card as TOML that ``load_card`` reads back to the same card."""

    def q(text: str) -> str:  # a JSON string is a valid TOML basic string
        return json.dumps(text)

    lines = [f"name = {q(card.name)}", f"source = {q(card.source)}", f"task = {q(card.task)}"]
    lines.append(f"description = {q(card.description)}")
    if card.batch != "dynamic":
        lines.append(
            f"batch = {q(card.batch)}  # {card.batch_note}: requests are not batched (Triton max_batch_size 0)"
        )
    for table, specs in (("inputs", card.inputs), ("outputs", card.outputs)):
        for spec in specs:
            lines += ["", f"[[{table}]]", f"name = {q(spec.name)}", f"dtype = {q(spec.dtype)}"]
            lines.append(f"shape = [{', '.join(str(d) for d in spec.shape)}]")
            extra = spec.to_dict()  # batch_axis, value, state_from: only where they are not the default
            lines += [
                f"{k} = {json.dumps(extra[k])}" for k in ("batch_axis", "value", "state_from") if k in extra
            ]
    gen = card.generator
    lines += ["", "[generator]", f"kind = {q(gen.kind)}"]
    lines += [
        f"{f} = {getattr(gen, f)!r}"
        for f in _GENERATOR_FIELDS.get(gen.kind, ())
        if getattr(gen, f) is not None
    ]
    acc = card.accuracy
    lines += ["", "[accuracy]", f"metric = {q(acc.metric)}", f"tolerance = {acc.tolerance!r}"]
    if acc.output:
        lines.append(f"output = {q(acc.output)}")
    return "\n".join(lines) + "\n"


def write_card(card: ModelCard, out: str | os.PathLike | None) -> str:
    """The TOML text, checked by reading it back; written to ``out`` when given."""
    text = card_toml(card)
    card_from_toml(text, origin="<generated card>")  # what we write must load
    if out is not None:
        atomic_write_bytes(Path(out), text.encode("utf-8"))
    return text
