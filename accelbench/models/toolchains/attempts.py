"""Quantization recipes tried in order until one gives a graph that loads and runs.

A recipe can fail anywhere: inside ``onnxruntime.quantization`` (calibration, an ORT bug on an unusual
graph), in the opset upgrade it needs, in the ONNX checker or when ONNX Runtime creates a session for the
result (per-channel ``DequantizeLinear`` in an opset-12 graph: "Unrecognized attribute: axis"). Each failure
becomes one line naming the recipe and the reason and the next recipe is tried; every attempt is recorded
(``attempts`` in the manifest). When none works the refusal is one BadInputError line, and the attempts are
kept in ``attempts.json`` in the variant folder. The accuracy gate, not this module, decides whether a
variant that runs is good enough to serve: a recipe that runs is never replaced for being inaccurate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.errors import AccelbenchError, BadInputError
from accelbench.models.intake import one_line

ATTEMPTS_FILE = "attempts.json"
# what a toolchain falls back to, in order, after the default recipe of a model kind
FALLBACKS = {
    "ort-static-qdq-int8": ("ort-static-qdq-int8-per-tensor", "ort-dynamic-int8"),
    "ort-dynamic-int8-per-channel": ("ort-dynamic-int8", "ort-static-qdq-int8-per-tensor"),
    # TensorRT reads symmetric QDQ only: the fallbacks stay symmetric
    "qdq-int8-symmetric": ("qdq-int8-symmetric-per-tensor",),
    "qdq-int8-symmetric-smoothquant": ("qdq-int8-symmetric", "qdq-int8-symmetric-per-tensor"),
}

log = logging.getLogger(__name__)


def chain(default: str, requested: str | None) -> tuple[str, ...]:
    """The recipes to try: only the one the user asked for, else the default and its fallbacks."""
    if requested:
        return (requested,)
    return (default, *FALLBACKS.get(default, ()))


def reason(err: BaseException) -> str:
    """One line: our own errors as they are, anything else prefixed with its type."""
    text = one_line(err)
    return text if isinstance(err, AccelbenchError) else f"{type(err).__name__}: {text}"


def check_variant(path: Path, sample: dict[str, np.ndarray] | None) -> None:
    """The ONNX checker, an ORT CPU session, and one run on ``sample`` when given."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(path))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    if sample is not None:
        wanted = {i.name for i in session.get_inputs()}
        session.run(None, {k: v for k, v in sample.items() if k in wanted})


def try_in_order(
    recipes: Sequence[str],
    make: Callable[[str], Any],
    dst: Path,
    sample: dict[str, np.ndarray] | None,
    label: str,
) -> tuple[str, Any, list[dict[str, str]]]:
    """(recipe that worked, what ``make`` returned, attempts); BadInputError when none worked."""
    attempts: list[dict[str, str]] = []
    for recipe in recipes:
        try:
            made = make(recipe)
            if recipe != "fp32-reference":  # a copy of the source, which the FP32 reference run loaded
                check_variant(dst, sample)
        except KeyboardInterrupt:
            raise
        except Exception as err:  # noqa: BLE001 - every failure of a recipe is reported, then the next one tried
            why = reason(err)
            attempts.append({"recipe": recipe, "outcome": "failed", "reason": why})
            log.info("%s: recipe %s failed: %s", label, recipe, why)
            continue
        attempts.append(
            {"recipe": recipe, "outcome": "ok", "reason": "the graph passes the ONNX checker and runs"}
        )
        return recipe, made, attempts
    (dst.parent / ATTEMPTS_FILE).write_text(json.dumps(attempts, indent=2) + "\n", encoding="utf-8")
    dst.unlink(missing_ok=True)
    summary = "; ".join(f"{a['recipe']}: {a['reason']}" for a in attempts)
    raise BadInputError(f"{label}: no recipe worked ({summary})")
