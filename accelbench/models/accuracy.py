"""The accuracy gate: a variant against FP32 on held-out samples, by the card's metric.

Metrics (pure functions, numpy in, floats out):

- ``cosine``: cosine similarity of each output vector (last axis) with the FP32 one; value = mean, worst = min.
- ``top1``: fraction of rows whose argmax (last axis) agrees with FP32; worst = the same fraction.
- ``max_abs``: largest absolute difference; value = worst = that difference.

cosine/top1 pass when value ≥ tolerance, max_abs when value ≤ tolerance.

Reference data (``reference/inputs.npz``, ``outputs.npz``) of a card that batches on the first axis holds
the samples concatenated on that axis, as ONNX Runtime runs them ``batch_size`` at a time. A model that
cannot batch that way (a fixed batch, a batch axis elsewhere, fixed values) keeps one run per index of a
new first axis, ``[runs, *run shape]``, and is run one run at a time (``runs=True``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.errors import BadInputError

METRICS = ("cosine", "top1", "max_abs")
REFERENCE_DIR = "reference"


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each vector along the last axis (flattened over the leading axes). Zero with zero is 1."""
    a2 = np.asarray(a, dtype=np.float64).reshape(-1, np.shape(a)[-1] if np.ndim(a) else 1)
    b2 = np.asarray(b, dtype=np.float64).reshape(a2.shape)
    na, nb = np.linalg.norm(a2, axis=1), np.linalg.norm(b2, axis=1)
    # divide by each norm separately: tiny but non-zero vectors must still compare by direction
    safe_a, safe_b = np.where(na > 0, na, 1.0), np.where(nb > 0, nb, 1.0)
    cos = ((a2 / safe_a[:, None]) * (b2 / safe_b[:, None])).sum(axis=1)
    return np.where((na == 0) & (nb == 0), 1.0, np.clip(cos, -1.0, 1.0))


def top1_agreement(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Fraction of rows whose argmax over the last axis is the same."""
    ref = np.asarray(reference).reshape(-1, np.shape(reference)[-1])
    cand = np.asarray(candidate).reshape(ref.shape)
    return float(np.mean(ref.argmax(axis=1) == cand.argmax(axis=1))) if len(ref) else 1.0


def max_abs_error(reference: np.ndarray, candidate: np.ndarray) -> float:
    ref = np.asarray(reference, dtype=np.float64)
    return float(np.max(np.abs(ref - np.asarray(candidate, dtype=np.float64)))) if ref.size else 0.0


def compare(metric: str, reference: np.ndarray, candidate: np.ndarray) -> tuple[float, float]:
    """(value, worst) of ``metric`` for a candidate output against the reference output."""
    if np.shape(reference) != np.shape(candidate):
        raise BadInputError(f"output shapes differ: reference {np.shape(reference)} vs {np.shape(candidate)}")
    if metric == "cosine":
        cos = cosine_similarity(reference, candidate)
        return float(cos.mean()), float(cos.min())
    if metric == "top1":
        agreement = top1_agreement(reference, candidate)
        return agreement, agreement
    if metric == "max_abs":
        err = max_abs_error(reference, candidate)
        return err, err
    raise BadInputError(f"unknown accuracy metric {metric!r}; allowed: {', '.join(METRICS)}")


def verdict(metric: str, value: float, tolerance: float) -> str:
    """PASS or FAIL: cosine/top1 must reach the tolerance, max_abs must stay at or below it."""
    ok = value <= tolerance if metric == "max_abs" else value >= tolerance
    return "PASS" if ok and np.isfinite(value) else "FAIL"


def not_run(metric: str, tolerance: float, reason: str) -> dict[str, Any]:
    """The accuracy block of a variant this host cannot run (a TensorRT plan, a Neuron model)."""
    return {
        "metric": metric,
        "value": None,
        "worst": None,
        "tolerance": tolerance,
        "samples": 0,
        "verdict": "NOT_RUN",
        "reason": reason,
    }


def write_reference(
    variant_dir: str | os.PathLike, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
):
    """``reference/inputs.npz`` and ``outputs.npz`` (held-out inputs, FP32 outputs; first axis = samples)."""
    ref = Path(variant_dir) / REFERENCE_DIR
    ref.mkdir(parents=True, exist_ok=True)
    for name, arrays in (("inputs.npz", inputs), ("outputs.npz", outputs)):
        tmp = ref / f".{name}.tmp.npz"
        np.savez(tmp, allow_pickle=True, **arrays)  # the default, named: numpy 2 stubs read **arrays as it
        os.replace(tmp, ref / name)


def read_reference(variant_dir: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    ref = Path(variant_dir) / REFERENCE_DIR
    try:
        with np.load(ref / "inputs.npz") as i, np.load(ref / "outputs.npz") as o:
            return {k: i[k] for k in i.files}, {k: o[k] for k in o.files}
    except (OSError, ValueError) as err:
        raise BadInputError(f"{ref}: reference data missing or unreadable ({err})") from None


def stack(feeds: list[dict[str, np.ndarray]], runs: bool = False) -> dict[str, np.ndarray]:
    """Feeds (one per run) as reference arrays: concatenated on the batch axis, or ``runs``: stacked on a
    new first axis (see the module docstring)."""
    join = np.stack if runs else np.concatenate
    return {name: join([f[name] for f in feeds]) for name in feeds[0]}


def _session(model_path: str | os.PathLike, threads: int | None = None) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    opts.log_severity_level = 3  # quantized graphs log harmless per-node warnings
    try:
        return ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    except Exception as err:  # ORT raises its own types (Fail, InvalidGraph, NotImplemented) with long text
        from accelbench.models.intake import one_line

        raise BadInputError(f"ONNX Runtime cannot load {model_path}: {one_line(err)}") from None


def run_onnx_cpu(
    model_path: str | os.PathLike,
    inputs: dict[str, np.ndarray],
    batch_size: int = 8,
    output_names: list[str] | None = None,
    threads: int | None = None,
    runs: bool = False,
) -> dict[str, np.ndarray]:
    """Run an ONNX model on ORT CPU over samples stacked on axis 0, ``batch_size`` at a time; with ``runs``
    each index of axis 0 is one whole run (a model that cannot batch), and the outputs are stacked so."""
    session = _session(model_path, threads)
    names = output_names or [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    n = len(next(iter(inputs.values())))
    chunks: dict[str, list[np.ndarray]] = {name: [] for name in names}
    step = 1 if runs else batch_size
    for start in range(0, n, step):
        if runs:
            feed = {k: np.asarray(v[start]) for k, v in inputs.items() if k in wanted}  # 0-d stays an array
        else:
            feed = {k: v[start : start + batch_size] for k, v in inputs.items() if k in wanted}
        for name, value in zip(names, _run(session, names, feed, model_path), strict=True):
            chunks[name].append(value)
    join = np.stack if runs else np.concatenate
    return {name: join(parts) for name, parts in chunks.items()}


def chain_states(
    model_path: str | os.PathLike, feeds: list[dict[str, np.ndarray]], state_from: dict[str, str]
) -> list[dict[str, np.ndarray]]:
    """The feeds as one stream: each state input (``state_from``: input → output) gets the previous run's
    output, the first run keeps the zeros it was given. Runs the model (the FP32 one) once per feed."""
    if not state_from or not feeds:
        return feeds
    session = _session(model_path)
    outputs = sorted(set(state_from.values()))
    chained, previous = [], None
    for feed in feeds:
        feed = dict(feed)
        if previous is not None:
            for name, output in state_from.items():
                feed[name] = previous[output].astype(feed[name].dtype, copy=False)
        chained.append(feed)
        previous = dict(zip(outputs, _run(session, outputs, feed, model_path), strict=True))
    return chained


def _run(session: Any, names: list[str], feed: dict[str, np.ndarray], model_path: Any) -> list[np.ndarray]:
    try:
        return session.run(names, feed)
    except Exception as err:  # a shape the card got wrong, an op that fails at run time
        from accelbench.models.intake import one_line

        raise BadInputError(f"ONNX Runtime failed to run {model_path}: {one_line(err)}") from None


def gate(
    model_path: str | os.PathLike,
    reference_inputs: dict[str, np.ndarray],
    reference_outputs: dict[str, np.ndarray],
    metric: str,
    tolerance: float,
    output: str,
    runs: bool = False,
) -> dict[str, Any]:
    """Run the variant on ORT CPU over the held-out inputs and judge it against the FP32 outputs."""
    if output not in reference_outputs:
        raise BadInputError(
            f"accuracy output {output!r} is not among the model outputs {sorted(reference_outputs)}"
        )
    got = run_onnx_cpu(model_path, reference_inputs, output_names=[output], runs=runs)[output]
    value, worst = compare(metric, reference_outputs[output], got.astype(np.float32))
    return {
        "metric": metric,
        "value": round(value, 6),
        "worst": round(worst, 6),
        "tolerance": tolerance,
        "samples": int(len(got)),
        "verdict": verdict(metric, value, tolerance),
        "reason": f"ONNX Runtime CPU on {len(got)} held-out samples vs FP32, output {output}",
    }
