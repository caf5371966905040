"""Model cards: one TOML file per model saying where it comes from, its tensors, inputs and accuracy metric.

Format (every field with an example: docs/models.md; ``accelbench models card MODEL.onnx`` writes one)::

    name = "minilm-l6"
    source = "builtin:minilm-l6"      # or "onnx:model.onnx" (relative to the card's folder) or "hf:ID_OR_DIR"
    task = "embedding"                # embedding | classification | detection | segmentation | other
    [[inputs]]                        # first dim is the batch: -1
    name = "input_ids"
    dtype = "int64"
    shape = [-1, 128]
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
BUILTIN_CARDS_DIR = Path(__file__).parent / "cards"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]  # -1 = dynamic; the first dim is the batch

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


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
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "generator": self.generator.to_dict(),
            "accuracy": {
                "metric": self.accuracy.metric,
                "tolerance": self.accuracy.tolerance,
                "output": self.metric_output,
            },
        }


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


def _tensors(reader: _Reader, key: str, required: bool) -> tuple[TensorSpec, ...]:
    items = reader.get(key, list, ... if required else [])
    if required and not items:
        raise reader.fail(key, "needs at least one entry")
    specs = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise reader.fail(f"{key}[{i}]", f"expected a table, got {type(item).__name__}")
        r = _Reader(item, reader.origin, f"{key}[{i}].")
        shape = r.get("shape", list)
        if not shape or not all(
            isinstance(d, int) and not isinstance(d, bool) and (d > 0 or d == -1) for d in shape
        ):
            raise r.fail("shape", f"expected a list of positive integers or -1, got {shape!r}")
        specs.append(TensorSpec(r.get("name", str), r.get("dtype", str, allowed=DTYPES), tuple(shape)))
    return tuple(specs)


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
    fields = {
        "name": r.get("name", str),
        "task": r.get("task", str, "other", allowed=TASKS),
        "inputs": _tensors(r, "inputs", required=True),
        "outputs": _tensors(r, "outputs", required=False),
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
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise BadInputError(f"{path}: not a valid TOML model card ({err})") from None
    return card_from_dict(data, origin=str(path), card_path=path.resolve())


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
