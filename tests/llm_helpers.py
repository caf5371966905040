"""Shared by the generative-model tests: the built llama-tiny files and a plain greedy decoder on ORT."""

from __future__ import annotations

from pathlib import Path

import numpy as np

PROMPTS = (
    [101, 2009, 2003, 1037, 3606],
    [101, 2026, 2171, 2003, 7592, 1010, 1998, 1045, 2293, 2023, 2173, 2172],
    [101, 7592],
    [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899],
)


def tiny_files():
    from accelbench.models.cards import load_card
    from accelbench.models.export_llm import generative_files

    return generative_files(load_card("builtin:llama-tiny"))


def greedy_reference(onnx_path: Path, prompt: list[int], max_tokens: int) -> list[int]:
    """Greedy decoding of one prompt at batch 1, the KV cache fed back by hand: the ground truth."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    past_names = [i.name for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    shape = next(i.shape for i in session.get_inputs() if i.name in past_names)
    past = [np.zeros((1, shape[1], 0, shape[3]), np.float32) for _ in past_names]
    outputs = ["logits"] + [n.replace("past_key_values", "present") for n in past_names]
    ids = np.asarray([prompt], np.int64)
    out: list[int] = []
    length = 0
    for _ in range(max_tokens):
        feed = {
            "input_ids": ids,
            "attention_mask": np.ones((1, length + ids.shape[1]), np.int64),
            "position_ids": np.arange(length, length + ids.shape[1], dtype=np.int64)[None],
            **dict(zip(past_names, past, strict=True)),
        }
        logits, *past = session.run(outputs, feed)
        length += ids.shape[1]
        token = int(np.argmax(logits[0, -1]))
        out.append(token)
        ids = np.asarray([[token]], np.int64)
    return out


def measured(done) -> None:
    """A generative sweep that ran to its end: exit 0, or 5 when a run this short has every step INVALID
    (too few requests to trust: ``accelbench loadtest`` exits 5 then); the document is printed either way."""
    if done.returncode == 5:
        assert done.stderr.startswith("accelbench: error: every step is INVALID"), done.stderr
    else:
        assert done.returncode == 0, done.stderr
