"""Model cards: one TOML file per model saying where it comes from, its tensors, inputs and accuracy metric.

Format (every field with an example: docs/models.md; ``accelbench models card MODEL.onnx`` writes one)::

    name = "minilm-l6"
    source = "builtin:minilm-l6"      # or "onnx:model.onnx" (relative to the card's folder) or "hf:ID_OR_DIR"
    task = "embedding"                # embedding | classification | detection | segmentation | other
    batch = "dynamic"                 # dynamic | fixed:N | none (default dynamic)
    [[inputs]]                        # shape[batch_axis] is the batch: -1 when dynamic, N when fixed:N
    name = "input_ids"
    dtype = "int64"
    shape = [-1, 128]
    # batch_axis = 0                  # which axis is the batch (default 0); "none" for a tensor without one
    # value = 16000                   # a fixed value fed on every run (a scalar or a small nested list)
    # state_from = "stateN"           # recurrent state: zeros in requests; calibration and the gate feed
    #                                 #   it the previous run's output of that name
    [[outputs]]                       # optional
    ...
    [generator]                       # tokens | image | uniform | dataset (see accelbench.models.inputs)
    kind = "tokens"
    vocab_size = 30522
    [accuracy]
    metric = "cosine"                 # cosine | top1 | max_abs
    tolerance = 0.99                  # cosine/top1: lowest acceptable value; max_abs: highest
    output = "sentence_embedding"     # the output the metric reads (default: the first output)

A bad card raises BadInputError naming the file and the field.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.models.generative import GenerativeSpec, spec_from_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SOURCE_SCHEMES = ("onnx", "hf", "builtin")
TASKS = ("embedding", "classification", "detection", "segmentation", "other", "text-generation")
METRICS = ("cosine", "top1", "max_abs", "next_token_agreement")
GENERATOR_KINDS = ("tokens", "image", "uniform", "dataset")
DTYPES = ("float32", "float16", "int64", "int32", "int8", "uint8", "bool")
BATCH_KINDS = ("dynamic", "fixed:N", "none")
NO_BATCH_AXIS = "none"  # how TOML (which has no null) spells a tensor without a batch axis
MAX_VALUE_ELEMENTS = 4096  # a card value is a sample rate or a flag, not a data set
BUILTIN_CARDS_DIR = Path(__file__).parent / "cards"


@dataclass(frozen=True)
class TensorSpec:
    """One input or output. ``shape`` is the whole tensor: -1 = dynamic; ``shape[batch_axis]`` is the batch
    (-1 when the model's batch is dynamic, N when it is fixed at N); ``batch_axis`` None: no batch axis."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    batch_axis: int | None = 0
    value: Any = None  # inputs: fed as is on every run (a scalar or nested list), never generated
    state_from: str | None = None  # inputs: the output that carries this state to the next run

    def __post_init__(self) -> None:
        axis = self.batch_axis
        if axis is not None and not 0 <= axis < len(self.shape):
            raise BadInputError(
                f"tensor {self.name!r}: batch_axis {axis} is outside its {len(self.shape)}-D shape "
                f'{list(self.shape)} (use batch_axis = "none" for a tensor without a batch axis)'
            )
        if self.value is not None:
            import numpy as np

            try:
                array = np.asarray(self.value, dtype=self.dtype)
            except (TypeError, ValueError) as err:
                raise BadInputError(f"input {self.name!r}: value is not {self.dtype}: {err}") from None
            if array.shape != tuple(self.shape) or array.size > MAX_VALUE_ELEMENTS:
                raise BadInputError(
                    f"input {self.name!r}: value has shape {list(array.shape)}, its shape says "
                    f"{list(self.shape)} (a value is at most {MAX_VALUE_ELEMENTS} elements)"
                )
            if axis is not None:
                raise BadInputError(f"input {self.name!r}: an input with a value has no batch axis")

    def run_shape(self, batch: int) -> tuple[int, ...]:
        """The shape of one run at ``batch``: the batch axis set (when dynamic), other -1 left as they are."""
        if self.batch_axis is None:
            return self.shape
        dims = list(self.shape)
        if dims[self.batch_axis] == -1:
            dims[self.batch_axis] = batch
        return tuple(dims)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}
        if self.batch_axis != 0:
            out["batch_axis"] = NO_BATCH_AXIS if self.batch_axis is None else self.batch_axis
        if self.value is not None:
            out["value"] = self.value
        if self.state_from is not None:
            out["state_from"] = self.state_from
        return out


@dataclass(frozen=True)
class GeneratorSpec:
    """How to make request payloads; fields not used by ``kind`` keep their defaults."""

    kind: str
    vocab_size: int = 30522
    seq_len: int | None = None  # tokens: defaults to the token inputs' second dim
    min_len: int | None = None  # tokens: shortest unpadded length; default seq_len (no padding)
    cls_token_id: int = 101
    mean: float = 0.0  # image: normal(mean, std)
    std: float = 1.0
    low: float = 0.0  # uniform: [low, high)
    high: float = 1.0
    path: str | None = None  # dataset: .npz with one array per input, first axis = samples

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class AccuracySpec:
    metric: str
    tolerance: float
    output: str | None = None  # None: the first output

    @property
    def higher_is_better(self) -> bool:
        return self.metric != "max_abs"

    def passes(self, value: float) -> bool:
        return value >= self.tolerance if self.higher_is_better else value <= self.tolerance


@dataclass(frozen=True)
class ModelCard:
    name: str
    source: str
    task: str
    inputs: tuple[TensorSpec, ...]
    generator: GeneratorSpec
    accuracy: AccuracySpec
    outputs: tuple[TensorSpec, ...] = ()
    description: str = ""
    batch: str = "dynamic"  # dynamic | fixed:N | none
    reference: str | None = None  # onnx:PATH of a float graph, for a source that is already quantized
    card_path: Path | None = field(default=None, compare=False)  # where relative paths resolve from
    generative: GenerativeSpec | None = None  # task text-generation: tokenizer, context, KV cache shape

    def __post_init__(self) -> None:
        _check_choice(self.source_scheme, SOURCE_SCHEMES, "source", f"{self.source!r}: unknown scheme")
        _check_choice(self.task, TASKS, "task")
        _check_choice(self.accuracy.metric, METRICS, "accuracy.metric")
        _check_choice(self.generator.kind, GENERATOR_KINDS, "generator.kind")
        if not self.inputs:
            raise BadInputError("field 'inputs': a card needs at least one input")
        if (self.task == "text-generation") != (self.generative is not None):
            raise BadInputError(
                "field 'generative': a text-generation card needs it, other tasks must not have it"
            )
        parse_batch(self.batch)
        self._check_batch_axes()
        outputs = {o.name for o in self.outputs}
        for spec in self.inputs:
            if spec.state_from is not None and outputs and spec.state_from not in outputs:
                raise BadInputError(
                    f"input {spec.name!r}: state_from {spec.state_from!r} is not an output "
                    f"({', '.join(sorted(outputs))})"
                )

    def _check_batch_axes(self) -> None:
        fixed = self.fixed_batch
        for spec in self.inputs:
            axis = spec.batch_axis
            if axis is None:
                continue
            if self.batch == "none":
                raise BadInputError(
                    f'input {spec.name!r} has batch_axis {axis} but the card says batch = "none"'
                )
            size = spec.shape[axis]
            if fixed is None and size != -1:
                raise BadInputError(
                    f"input {spec.name!r}: its batch axis {axis} is {size} in the shape; a dynamic batch is -1 "
                    f'there (or set batch = "fixed:{size}")'
                )
            if fixed is not None and size not in (-1, fixed):
                raise BadInputError(
                    f"input {spec.name!r}: its batch axis {axis} is {size}, the card's batch is fixed:{fixed}"
                )

    @property
    def fixed_batch(self) -> int | None:
        """N when the model's batch is fixed at N, else None."""
        return parse_batch(self.batch)

    @property
    def run_batch(self) -> int:
        """Samples in one run of the model: N for a fixed batch, else 1 (a model without a batch takes one)."""
        return self.fixed_batch or 1

    @property
    def batchable(self) -> bool:
        """Whether runs can be concatenated into one batch on the first axis (Triton ``max_batch_size`` > 0):
        a dynamic batch, every tensor's batch axis first, no fixed values."""
        tensors = (*self.inputs, *self.outputs)
        return self.batch == "dynamic" and all(t.batch_axis == 0 and t.value is None for t in tensors)

    @property
    def batch_note(self) -> str | None:
        """Why requests are not batched, for notes and the report; None when they are."""
        if self.batchable:
            return None
        if self.batch == "dynamic":
            why = [
                f"{t.name} batch axis {t.batch_axis}" for t in self.inputs if t.batch_axis not in (0, None)
            ]
            why += [f"{t.name} has a fixed value" for t in self.inputs if t.value is not None]
            return f"the model cannot batch on the first axis ({', '.join(why) or 'outputs'})"
        return "the model has no batch axis" if self.batch == "none" else f"the model's batch is {self.batch}"

    @property
    def source_scheme(self) -> str:
        return self.source.partition(":")[0] if ":" in self.source else ""

    @property
    def source_value(self) -> str:
        return self.source.partition(":")[2]

    @property
    def base_dir(self) -> Path:
        return self.card_path.parent if self.card_path else Path.cwd()

    def resolve_path(self, relative: str) -> Path:
        """A path written in the card, relative to the card's folder."""
        path = Path(os.path.expanduser(relative))
        return path if path.is_absolute() else self.base_dir / path

    @property
    def metric_output(self) -> str | None:
        if self.accuracy.output:
            return self.accuracy.output
        return self.outputs[0].name if self.outputs else None

    def to_dict(self) -> dict[str, Any]:
        """The card as plain data (the manifest's ``card`` field); ``card_from_dict`` reads it back."""
        data = self._plain_dict()
        if self.generative is not None:
            data["generative"] = self.generative.to_dict()
        return data

    def _plain_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "task": self.task,
            "description": self.description,
            **({"batch": self.batch} if self.batch != "dynamic" else {}),
            **({"reference": self.reference} if self.reference else {}),
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "generator": self.generator.to_dict(),
            "accuracy": {
                "metric": self.accuracy.metric,
                "tolerance": self.accuracy.tolerance,
                "output": self.metric_output,
            },
        }


def parse_batch(text: str) -> int | None:
    """``dynamic`` / ``none`` → None, ``fixed:N`` → N; BadInputError for anything else."""
    kind, _, size = str(text).partition(":")
    if text in ("dynamic", "none"):
        return None
    if kind == "fixed" and size.isdigit() and int(size) > 0:
        return int(size)
    raise BadInputError(f"field 'batch': unknown value {text!r}; allowed: {', '.join(BATCH_KINDS)}")


def _check_choice(value: str, allowed: tuple[str, ...], field_name: str, what: str | None = None) -> None:
    if value not in allowed:
        raise BadInputError(
            f"field '{field_name}': {what or f'unknown value {value!r}'}; allowed: {', '.join(allowed)}"
        )


class _Reader:
    """Typed field access over a TOML table that reports ``<file>: field '<path>': <problem>``."""

    def __init__(self, data: dict[str, Any], origin: str, prefix: str = "") -> None:
        self.data, self.origin, self.prefix = data, origin, prefix

    def fail(self, key: str, problem: str) -> BadInputError:
        return BadInputError(f"{self.origin}: field '{self.prefix}{key}': {problem}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., allowed: tuple = ()) -> Any:
        if key not in self.data:
            if default is ...:
                raise BadInputError(f"{self.origin}: missing field '{self.prefix}{key}'")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # TOML integers are acceptable floats; bools are not integers here
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.fail(key, f"expected {names}, got {type(value).__name__} {value!r}")
        if allowed and value not in allowed:
            raise self.fail(key, f"unknown value {value!r}; allowed: {', '.join(allowed)}")
        return value

    def table(self, key: str, prefix: str) -> _Reader:
        return _Reader(self.get(key, dict, {}), self.origin, prefix)


def _tensors(reader: _Reader, key: str, required: bool, batch: str) -> tuple[TensorSpec, ...]:
    items = reader.get(key, list, ... if required else [])
    if required and not items:
        raise reader.fail(key, "needs at least one entry")
    specs = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise reader.fail(f"{key}[{i}]", f"expected a table, got {type(item).__name__}")
        r = _Reader(item, reader.origin, f"{key}[{i}].")
        shape = r.get("shape", list)
        if not all(isinstance(d, int) and not isinstance(d, bool) and (d > 0 or d == -1) for d in shape):
            raise r.fail(
                "shape", f"expected a list of positive integers or -1 ([] for a scalar), got {shape!r}"
            )
        value = item.get("value")
        no_axis = batch == "none" or value is not None or not shape
        axis = r.get("batch_axis", (int, str), NO_BATCH_AXIS if no_axis else 0)
        if isinstance(axis, str) and axis != NO_BATCH_AXIS:
            raise r.fail("batch_axis", f'expected an axis number or "{NO_BATCH_AXIS}", got {axis!r}')
        try:
            specs.append(
                TensorSpec(
                    r.get("name", str),
                    r.get("dtype", str, allowed=DTYPES),
                    tuple(shape),
                    batch_axis=None if axis == NO_BATCH_AXIS else axis,
                    value=value,
                    state_from=r.get("state_from", str, None),
                )
            )
        except BadInputError as err:
            raise reader.fail(f"{key}[{i}]", str(err)) from None
    return tuple(specs)


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:D1,D2,…`` (a ``--shape`` value: an input's sizes) → (name, dims); BadInputError on anything else."""
    name, sep, dims = text.rpartition(":")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 1 for d in shape):
        raise BadInputError(
            f"--shape {text!r}: expected NAME:D1,D2,… with positive sizes, e.g. x:1,3,640,640 or input_ids:128"
        )
    return name, shape


def card_name(text: str) -> str:
    """A card name from a file or folder name (``hf:`` ids and paths included): what a name may hold."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(text).name or text).strip("-") or "model"


def card_from_dict(data: dict[str, Any], origin: str = "<card>", card_path: Path | None = None) -> ModelCard:
    """Validate plain data (a parsed TOML card or ``ModelCard.to_dict()``) into a ModelCard."""
    r = _Reader(data, origin)
    source = r.get("source", str)
    if source.partition(":")[0] not in SOURCE_SCHEMES or ":" not in source:
        raise r.fail(
            "source", f"{source!r}: unknown scheme; allowed: {', '.join(s + ':' for s in SOURCE_SCHEMES)}"
        )
    g = r.table("generator", "generator.")
    a = r.table("accuracy", "accuracy.")
    generator = GeneratorSpec(
        kind=g.get("kind", str, "uniform", allowed=GENERATOR_KINDS),
        vocab_size=g.get("vocab_size", int, 30522),
        seq_len=g.get("seq_len", int, None),
        min_len=g.get("min_len", int, None),
        cls_token_id=g.get("cls_token_id", int, 101),
        mean=g.get("mean", float, 0.0),
        std=g.get("std", float, 1.0),
        low=g.get("low", float, 0.0),
        high=g.get("high", float, 1.0),
        path=g.get("path", str, None),
    )
    if generator.kind == "dataset" and not generator.path:
        raise g.fail("path", "a dataset generator needs the path of an .npz file")
    accuracy = AccuracySpec(
        metric=a.get("metric", str, "max_abs", allowed=METRICS),
        tolerance=a.get("tolerance", float, 1e-3),
        output=a.get("output", (str, type(None)), None),
    )
    batch = r.get("batch", str, "dynamic")
    fields = {
        "name": r.get("name", str),
        "task": r.get("task", str, "other", allowed=TASKS),
        "batch": batch,
        "reference": r.get("reference", str, None),
        "inputs": _tensors(r, "inputs", required=True, batch=batch),
        "outputs": _tensors(r, "outputs", required=False, batch=batch),
        "description": r.get("description", str, ""),
    }
    if "generative" in data:
        fields["generative"] = spec_from_table(r.get("generative", dict), origin)
    try:
        return ModelCard(source=source, generator=generator, accuracy=accuracy, card_path=card_path, **fields)
    except BadInputError as err:  # __post_init__ does not know the file
        raise BadInputError(f"{origin}: {err}") from None


def builtin_card_path(name: str) -> Path:
    path = BUILTIN_CARDS_DIR / f"{name}.toml"
    if not path.is_file():
        available = ", ".join(sorted(p.stem for p in BUILTIN_CARDS_DIR.glob("*.toml")))
        raise BadInputError(f"unknown built-in model {name!r}; available: {available}")
    return path


def load_card(path_or_uri: str | os.PathLike) -> ModelCard:
    """Load a card from a TOML file, or the packaged card for ``builtin:NAME``."""
    text = os.fspath(path_or_uri)
    path = builtin_card_path(text.partition(":")[2]) if text.startswith("builtin:") else Path(text)
    if not path.is_file():
        raise BadInputError(f"file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not a valid TOML model card ({err})") from None
    return card_from_toml(text, origin=str(path), card_path=path.resolve())


def card_from_toml(text: str, origin: str, card_path: Path | None = None) -> ModelCard:
    """A card from its TOML text; BadInputError naming ``origin`` when it is not TOML or not a card."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BadInputError(f"{origin}: not a valid TOML model card ({err})") from None
    return card_from_dict(data, origin=origin, card_path=card_path)


def load_model_repository(folder: str | os.PathLike) -> list[ModelCard]:
    """Every card (``*.toml``) in a model repository folder, sorted by file name."""
    root = Path(folder)
    if not root.is_dir():
        raise BadInputError(f"model repository not found: {root}")
    cards = [load_card(p) for p in sorted(root.glob("*.toml"))]
    names = [c.name for c in cards]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise BadInputError(f"{root}: model names used by more than one card: {', '.join(dupes)}")
    return cards
