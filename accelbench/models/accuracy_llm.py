"""The accuracy gate for text generation: a variant against the unquantized model on a fixed evaluation text.

The text (``models/data/eval_text.txt``, public domain, its source in its header) is tokenized with the
model's tokenizer and run teacher-forced through both ONNX graphs in one prefill. Per position the two
next-token distributions are compared:

- ``next_token_agreement``: fraction of positions whose most likely next token is the same (the value);
- ``kl_divergence``: mean KL(p_reference ‖ p_variant) in nats;
- ``perplexity`` of each model on the text: meaningful only for trained checkpoints (a random-weight model
  such as ``builtin:llama-tiny`` scores about its vocabulary size whatever its precision).

The verdict is PASS when the agreement reaches the precision's threshold and the KL stays within its own;
thresholds come from the card's ``[generative.gate]`` table, else ``DEFAULT_THRESHOLDS``.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.errors import BadInputError

EVAL_TEXT = "eval_text.txt"
MAX_EVAL_TOKENS = 512
# precision -> (lowest next-token agreement, highest mean KL in nats); documented in docs/llm.md
DEFAULT_THRESHOLDS = {
    "fp32": (0.999, 1e-4),
    "fp16": (0.98, 0.005),
    "bf16": (0.98, 0.005),
    "fp8": (0.95, 0.02),
    "int8": (0.95, 0.02),
    "int4": (0.85, 0.10),
}


def eval_text(path: str | os.PathLike | None = None) -> str:
    """The evaluation text without its ``#`` header lines."""
    source = Path(path) if path else Path(str(resources.files("accelbench.models") / "data" / EVAL_TEXT))
    lines = source.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("#")).strip()


def eval_tokens(tokenizer_dir: Path, context_length: int) -> np.ndarray:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    tokenizer.no_padding()  # MiniLM's tokenizer.json pads and truncates to 128 for the encoder
    tokenizer.no_truncation()
    ids = tokenizer.encode(eval_text(), add_special_tokens=False).ids
    return np.asarray(ids[: min(MAX_EVAL_TOKENS, context_length)], dtype=np.int64)


def teacher_forced_logits(onnx_path: Path, tokens: np.ndarray, threads: int | None = None) -> np.ndarray:
    """Logits ``[positions, vocab]`` of the KV-cache ONNX graph over ``tokens`` in one prefill (empty past)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - ORT's own types; the user needs one line
        raise BadInputError(
            f"ONNX Runtime cannot load {onnx_path}: {str(err).splitlines()[0][:200]}"
        ) from None
    n = len(tokens)
    feed: dict[str, np.ndarray] = {
        "input_ids": tokens[None, :],
        "attention_mask": np.ones((1, n), np.int64),
        "position_ids": np.arange(n, dtype=np.int64)[None, :],
    }
    for value in session.get_inputs():
        if value.name.startswith("past_key_values."):
            heads, size = value.shape[1], value.shape[3]
            feed[value.name] = np.zeros((1, heads, 0, size), np.float32)
    return session.run(["logits"], feed)[0][0].astype(np.float64)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def compare_logits(reference: np.ndarray, candidate: np.ndarray, tokens: np.ndarray) -> dict[str, float]:
    """Agreement, mean KL and both perplexities over the positions that have a next token."""
    if reference.shape != candidate.shape:
        raise BadInputError(f"logits shapes differ: {reference.shape} vs {candidate.shape}")
    ref, cand = _log_softmax(reference[:-1]), _log_softmax(candidate[:-1])
    following = tokens[1:]
    kl = (np.exp(ref) * (ref - cand)).sum(axis=-1)
    rows = np.arange(len(following))
    return {
        "agreement": float(np.mean(ref.argmax(-1) == cand.argmax(-1))),
        "kl_mean": float(kl.mean()),
        "kl_max": float(kl.max()),
        "perplexity_reference": float(np.exp(-ref[rows, following].mean())),
        "perplexity": float(np.exp(-cand[rows, following].mean())),
    }


def thresholds(gate_table: dict[str, Any] | None, precision: str) -> tuple[float, float]:
    table = (gate_table or {}).get(precision) or {}
    agreement, kl = DEFAULT_THRESHOLDS.get(precision, DEFAULT_THRESHOLDS["int4"])
    return float(table.get("agreement", agreement)), float(table.get("kl", kl))


def text_gate(
    reference_logits: np.ndarray,
    variant_onnx: Path,
    tokens: np.ndarray,
    precision: str,
    gate_table: dict[str, Any] | None,
    trained: bool,
) -> dict[str, Any]:
    """The manifest's accuracy block for one generative variant."""
    got = compare_logits(reference_logits, teacher_forced_logits(variant_onnx, tokens), tokens)
    min_agreement, max_kl = thresholds(gate_table, precision)
    ok = got["agreement"] >= min_agreement and got["kl_mean"] <= max_kl
    ppl = (
        f"perplexity {got['perplexity']:.2f} vs {got['perplexity_reference']:.2f} unquantized"
        if trained
        else "perplexity not judged: random weights (it is about the vocabulary size at any precision)"
    )
    return {
        "metric": "next_token_agreement",
        "value": round(got["agreement"], 6),
        "worst": round(got["agreement"], 6),
        "tolerance": min_agreement,
        "samples": int(len(tokens) - 1),
        "verdict": "PASS" if ok else "FAIL",
        "kl_divergence": round(got["kl_mean"], 6),
        "kl_divergence_max": round(got["kl_max"], 6),
        "kl_tolerance": max_kl,
        "perplexity": round(got["perplexity"], 4) if trained else None,
        "perplexity_reference": round(got["perplexity_reference"], 4) if trained else None,
        "reason": f"teacher-forced on {len(tokens)} tokens of the shipped evaluation text vs the unquantized "
        f"model: agreement ≥ {min_agreement}, mean KL ≤ {max_kl} nats; {ppl}",
    }
