"""``accelbench models card``: a model card written from an ONNX graph, so nobody has to read source to write one.

From the graph: the inputs and outputs (names, dtypes, shapes; the first dimension is the batch, -1), a
request generator guessed from the inputs and an accuracy metric guessed from the outputs (docs/models.md):

- generator ``tokens`` when an integer input is named like token ids (``input_ids``); the sequence length is
  the input's fixed second dimension or 128, the vocabulary the rows of the embedding table it indexes;
  ``image`` when a float input is 4-D with 1 or 3 channels (NCHW or NHWC); otherwise ``uniform`` (generic:
  [0, 1) for floats, [0, 256) when every input is an integer, e.g. bytes);
- metric ``top1`` when the output is a class axis (named like logits, probabilities, labels or softmax; last
  dimension > 1), ``cosine`` for embeddings, maps and detection heads, ``max_abs`` for one value per row;
- task ``embedding``, ``classification``, ``segmentation`` (a 4-D map output), ``detection`` (a 3-D head
  ``[N, C, anchors]`` with more anchors than channels) or ``other``.

A dynamic dimension other than the batch (and a token sequence length) must be given with ``--shape``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import onnx

from accelbench.errors import BadInputError
from accelbench.models.cards import DTYPES, AccuracySpec, GeneratorSpec, ModelCard, TensorSpec, card_from_dict

DEFAULT_SEQ_LEN = 128
COSINE_TOLERANCE = 0.99  # INT8 of a healthy model stays above this on every corpus model that passes
TOP1_TOLERANCE = 0.9  # fraction of held-out samples whose argmax must agree with FP32
MAX_ABS_TOLERANCE = 0.05  # one value per row (a probability, a score)
_CLASS_NAMES = re.compile(r"logit|prob|softmax|label|class|score", re.IGNORECASE)
_TOKEN_NAMES = re.compile(r"ids$|^ids|token", re.IGNORECASE)


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:D1,D2,…`` → (name, dims); BadInputError on anything else."""
    name, sep, dims = text.rpartition(":")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 1 for d in shape):
        raise BadInputError(
            f"--shape {text!r}: expected NAME:D1,D2,… with positive sizes, e.g. x:1,3,640,640"
        )
    return name, shape


def _dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
        for d in value.type.tensor_type.shape.dim
    ]


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


def _input_spec(value: onnx.ValueInfoProto, given: tuple[int, ...] | None, token: bool) -> TensorSpec:
    dims = _dims(value)
    if not dims:
        raise BadInputError(f"input {value.name!r} is a scalar; cards describe batched tensors only")
    if given is not None:
        if len(given) != len(dims):
            raise BadInputError(f"--shape {value.name}: {len(given)} sizes for a {len(dims)}-D input {dims}")
        dims = list(given)
    shape = [-1]
    for i, d in enumerate(dims[1:], start=1):
        if isinstance(d, int) and d > 0:
            shape.append(d)
        elif token and i == 1:
            shape.append(-1)  # the tokens generator's seq_len fills it
        else:
            example = ",".join(str(x) if isinstance(x, int) and x > 0 else "N" for x in [1, *dims[1:]])
            raise BadInputError(
                f"input {value.name!r} has a dynamic dimension {i} ({d}); give its size with "
                f"--shape {value.name}:{example}"
            )
    return TensorSpec(value.name, _dtype(value), tuple(shape))


def _output_spec(value: onnx.ValueInfoProto) -> TensorSpec:
    dims = _dims(value)
    shape = [-1] + [d if isinstance(d, int) and d > 0 else -1 for d in dims[1:]]
    return TensorSpec(value.name, _dtype(value), tuple(shape) if dims else (-1,))


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
        fixed = [
            s
            for v in inputs
            if v.name in token_inputs and len(s := _dims(v)) > 1 and isinstance(s[1], int) and s[1] > 0
        ]
        seq = fixed[0][1] if fixed else DEFAULT_SEQ_LEN
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
) -> ModelCard:
    """A card for ``onnx_path``; ``shapes`` are ``--shape`` strings; ``source`` is relative to ``card_dir``."""
    from accelbench.models.loader import _safe_name, check_onnx_file

    path = Path(onnx_path)
    check_onnx_file(path)
    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in weights]
    given = dict(parse_shape(s) for s in shapes)
    if unknown := sorted(set(given) - {v.name for v in inputs}):
        raise BadInputError(
            f"--shape names no input of {path.name}: {', '.join(unknown)}; inputs: {', '.join(v.name for v in inputs)}"
        )
    token_inputs = {v.name for v in inputs if _dtype(v).startswith("int") and _TOKEN_NAMES.search(v.name)}
    if token_inputs:  # masks and type ids of a text encoder share the token axis
        token_inputs |= {v.name for v in inputs if _dtype(v).startswith("int") and len(_dims(v)) == 2}
    in_specs = tuple(_input_spec(v, given.get(v.name), v.name in token_inputs) for v in inputs)
    out_specs = tuple(_output_spec(v) for v in graph.output)
    generator = _generator(graph, inputs, token_inputs)
    accuracy, guessed_task = _accuracy_and_task(out_specs, generator, _producer_ops(graph))
    base = Path(card_dir) if card_dir is not None else Path.cwd()
    try:
        source = os.path.relpath(path.resolve(), base.resolve())
    except ValueError:  # another drive (Windows)
        source = str(path.resolve())
    producer = " ".join(p for p in (model.producer_name, model.producer_version) if p) or "unknown producer"
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return ModelCard(
        name=name or _safe_name(path.stem),
        source=f"onnx:{Path(source).as_posix()}",
        task=task or guessed_task,
        inputs=in_specs,
        outputs=out_specs,
        generator=generator,
        accuracy=accuracy,
        description=f"written by `accelbench models card` from {path.name} ({producer}, opset {opset})",
        card_path=base / "card.toml",
    )


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
    for table, specs in (("inputs", card.inputs), ("outputs", card.outputs)):
        for spec in specs:
            lines += ["", f"[[{table}]]", f"name = {q(spec.name)}", f"dtype = {q(spec.dtype)}"]
            lines.append(f"shape = [{', '.join(str(d) for d in spec.shape)}]")
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
    import tomllib

    text = card_toml(card)
    card_from_dict(tomllib.loads(text), origin="<generated card>")  # what we write must load
    if out is not None:
        from accelbench.util import atomic_write_bytes

        atomic_write_bytes(Path(out), text.encode("utf-8"))
    return text
