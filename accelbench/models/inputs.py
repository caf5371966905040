"""Request payloads for a model card, deterministic per seed.

Generators (``[generator] kind`` in the card):

- ``tokens``: for int inputs of a text encoder. ``*mask*`` inputs are 1 for the first L tokens and 0 for the
  padding tail (L uniform in [min_len, seq_len]); ``*type*`` inputs are 0; other int inputs get ``[CLS]``
  (``cls_token_id``, 101) first, then ids uniform in [1000, vocab_size) — 1000 skips BERT's special and
  unused tokens — and 0 ([PAD]) where masked. Float inputs get normal(0, 1).
- ``image``: normal(mean, std) float32.
- ``uniform``: uniform in [low, high) (integers for int inputs).
- ``dataset``: rows of an .npz file (one array per input, first axis = samples), visited in a
  seed-dependent order; requests wrap around when the file has fewer rows than needed.

Inputs that are not data come from their card fields, whatever the generator: an input with a ``value`` gets
that value on every run; a recurrent ``state_from`` input gets zeros (the state of a fresh stream; quantize
chains the real state through calibration and held-out samples, ``chain_states``). Each array has the
input's whole shape, its batch axis (``batch_axis``, not always the first) set to the run's batch; a model
whose batch is fixed at N always gets N, one without a batch axis exactly one sample.

The same function makes calibration and held-out accuracy samples; use different seeds for them.
"""

from __future__ import annotations

import zipfile

import numpy as np

from accelbench.errors import BadInputError
from accelbench.models.cards import GeneratorSpec, ModelCard, TensorSpec

_FIRST_REGULAR_TOKEN_ID = 1000


def make_inputs(card: ModelCard, batch_size: int, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``count`` payloads, each a dict input-name → array whose batch axis holds ``batch_size`` samples
    (the fixed batch of a model that has one; 1 for a model without a batch axis)."""
    if batch_size < 1 or count < 0:
        raise BadInputError(f"batch size must be ≥ 1 and count ≥ 0 (got batch {batch_size}, count {count})")
    batch_size = run_batch(card, batch_size)
    data = tuple(s for s in card.inputs if s.value is None and s.state_from is None)
    gen = card.generator
    if not data:
        feeds: list[dict[str, np.ndarray]] = [{} for _ in range(count)]
    elif gen.kind == "dataset":
        feeds = _from_dataset(card, data, batch_size, count, seed)
    else:
        rng = np.random.default_rng(seed)
        feeds = [_one_request(data, gen, batch_size, rng) for _ in range(count)]
    for spec in card.inputs:
        if spec.value is not None:
            fixed = np.asarray(spec.value, dtype=spec.dtype)
            for feed in feeds:
                feed[spec.name] = fixed
        elif spec.state_from is not None:
            for feed in feeds:
                feed[spec.name] = np.zeros(_shape(spec, batch_size), dtype=spec.dtype)
    return [{spec.name: feed[spec.name] for spec in card.inputs} for feed in feeds]  # in the card's order


def run_batch(card: ModelCard, asked: int) -> int:
    """The batch one run gets: ``asked`` for a dynamic batch, else the model's own (refusing another)."""
    own = card.fixed_batch or (None if card.batch == "dynamic" else 1)
    if own is None:
        return asked
    if asked not in (1, own):
        raise BadInputError(
            f"model {card.name!r}: {card.batch_note}; every request carries {own} sample(s), not a batch of {asked}"
        )
    return own


def _shape(spec: TensorSpec, batch_size: int, seq_len: int | None = None) -> tuple[int, ...]:
    dims = list(spec.run_shape(batch_size))
    for i, d in enumerate(dims):
        if d == -1 and i == 1 and seq_len and spec.batch_axis == 0:
            dims[i] = seq_len
        elif d == -1:
            raise BadInputError(
                f"input {spec.name!r} has a dynamic dimension {i}; give it a fixed size in the card's shape"
            )
    return tuple(dims)


def _one_request(
    specs: tuple[TensorSpec, ...], gen: GeneratorSpec, batch_size: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    if gen.kind == "tokens":
        return _tokens(specs, gen, batch_size, rng)
    out = {}
    for spec in specs:
        shape = _shape(spec, batch_size)
        if gen.kind == "image":
            out[spec.name] = rng.normal(gen.mean, gen.std, size=shape).astype(spec.dtype)
        elif np.issubdtype(np.dtype(spec.dtype), np.integer):
            out[spec.name] = rng.integers(
                int(gen.low), max(int(gen.high), int(gen.low) + 1), size=shape
            ).astype(spec.dtype)
        elif spec.dtype == "bool":
            out[spec.name] = rng.random(size=shape) < 0.5
        else:
            out[spec.name] = rng.uniform(gen.low, gen.high, size=shape).astype(spec.dtype)
    return out


def _tokens(
    specs: tuple[TensorSpec, ...], gen: GeneratorSpec, batch_size: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    seq_len = gen.seq_len or next((s.shape[1] for s in specs if len(s.shape) > 1 and s.shape[1] > 0), None)
    if not seq_len:
        raise BadInputError(
            "tokens generator: set generator.seq_len or a fixed sequence length in the inputs"
        )
    min_len = min(gen.min_len or seq_len, seq_len)
    lengths = rng.integers(min_len, seq_len + 1, size=batch_size)
    mask = (np.arange(seq_len)[None, :] < lengths[:, None]).astype(np.int64)
    low = min(_FIRST_REGULAR_TOKEN_ID, gen.vocab_size - 1)
    ids = rng.integers(low, gen.vocab_size, size=(batch_size, seq_len))
    ids[:, 0] = gen.cls_token_id
    ids = ids * mask  # [PAD] = 0 in the padding tail
    out: dict[str, np.ndarray] = {}
    for spec in specs:
        lower = spec.name.lower()
        if not np.issubdtype(np.dtype(spec.dtype), np.integer):
            out[spec.name] = rng.normal(size=_shape(spec, batch_size, seq_len)).astype(spec.dtype)
        elif "mask" in lower:
            out[spec.name] = mask.astype(spec.dtype)
        elif "type" in lower:
            out[spec.name] = np.zeros_like(ids, dtype=spec.dtype)
        else:
            out[spec.name] = ids.astype(spec.dtype)
    return out


def _from_dataset(
    card: ModelCard, specs: tuple[TensorSpec, ...], batch_size: int, count: int, seed: int
) -> list[dict[str, np.ndarray]]:
    path = card.resolve_path(card.generator.path or "")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {spec.name: np.asarray(data[spec.name]) for spec in specs}
    except FileNotFoundError:
        raise BadInputError(f"file not found: {path} (generator.path of card {card.name!r})") from None
    except KeyError as err:
        raise BadInputError(f"{path}: dataset has no array for input {err}") from None
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        raise BadInputError(f"{path}: not a readable .npz dataset ({err})") from None
    rows = {len(a) for a in arrays.values()}
    if len(rows) != 1 or 0 in rows:
        raise BadInputError(
            f"{path}: input arrays must share a non-zero first dimension (got {sorted(rows)})"
        )
    n = rows.pop()
    order = np.random.default_rng(seed).permutation(n)
    picks = [order[np.arange(i * batch_size, (i + 1) * batch_size) % n] for i in range(count)]
    return [{spec.name: _rows(arrays[spec.name], idx, spec) for spec in specs} for idx in picks]


def _rows(array: np.ndarray, idx: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Samples ``idx`` of a dataset array (samples first) laid on the input's batch axis."""
    if spec.batch_axis is None:  # one sample per run, without a batch axis of its own
        return array[idx[0]].astype(spec.dtype, copy=False)
    return np.moveaxis(array[idx], 0, spec.batch_axis).astype(spec.dtype, copy=False)
