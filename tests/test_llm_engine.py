"""The in-flight batching scheduler (accelbench/serving/llm_engine.py) against plain greedy decoding."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from accelbench.serving import llm_engine
from tests.llm_helpers import PROMPTS, greedy_reference, tiny_files

pytestmark = pytest.mark.hf


@pytest.fixture(scope="module")
def files():
    pytest.importorskip("optimum")
    return tiny_files()


def _run_all(scheduler, requests, stagger: int = 0):
    """Submit (prompt, max_tokens) pairs, ``stagger`` steps apart; step until all are done."""
    outputs = {i: [] for i in range(len(requests))}
    finals = {}

    def emit(sequence, tokens, final):
        outputs[sequence.tag].extend(tokens)
        if final:
            finals[sequence.tag] = True

    pending = list(enumerate(requests))
    steps = 0
    while len(finals) < len(requests):
        if pending and steps % max(stagger, 1) == 0:
            index, (prompt, max_tokens) = pending.pop(0)
            sequence = llm_engine.Sequence(
                prompt=list(prompt), max_tokens=max_tokens, ignore_eos=True, emit=emit, tag=index
            )
            assert scheduler.check(sequence) is None
            scheduler.submit(sequence)
        scheduler.step()
        steps += 1
        assert steps < 500
    return outputs


def test_left_pad_and_decode_mask():
    ids, mask, positions = llm_engine.left_pad([[5, 6, 7], [8]])
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert positions.tolist() == [[0, 1, 2], [0, 0, 0]]
    mask, positions, past = llm_engine.decode_mask([3, 1])
    assert past == 3 and mask.tolist() == [[1, 1, 1, 1], [0, 0, 1, 1]] and positions.tolist() == [[3], [1]]


@pytest.mark.slow
def test_batched_greedy_matches_batch_one(files):
    """Several prompts of different lengths, joining at different steps, give the batch-1 greedy tokens."""
    runner = llm_engine.OrtRunner(str(files.onnx_path), threads=2)
    scheduler = llm_engine.Scheduler(runner, max_sequences=3, max_context=64)
    requests = [(p, 12) for p in PROMPTS]
    got = _run_all(scheduler, requests, stagger=3)
    for i, (prompt, max_tokens) in enumerate(requests):
        assert got[i] == greedy_reference(files.onnx_path, prompt, max_tokens), f"prompt {i}"
    # in-flight batching happened: some decode steps carried more than one sequence
    assert scheduler.steps["decode_rows"] > scheduler.steps["decode"]


def test_context_limit_names_both_numbers():
    scheduler = llm_engine.Scheduler(runner=None, max_context=32)
    message = scheduler.check(llm_engine.Sequence(prompt=[1] * 20, max_tokens=13))
    assert "20 tokens" in message and "max_tokens 13" in message and "max_context 32" in message
    assert scheduler.check(llm_engine.Sequence(prompt=[1] * 20, max_tokens=12)) is None
    assert "empty" in scheduler.check(llm_engine.Sequence(prompt=[], max_tokens=1))


def test_eos_stops_unless_ignored():
    class Fixed:
        """A runner whose next token is always 7."""

        def prefill(self, prompts):
            return np.eye(10)[[7] * len(prompts)], [[] for _ in prompts]

        def decode(self, tokens, caches, lengths):
            return np.eye(10)[[7] * len(tokens)], caches

    for ignore, expected in ((False, 1), (True, 5)):
        scheduler = llm_engine.Scheduler(Fixed(), eos_token_id=7)
        seen = []
        sequence = llm_engine.Sequence(
            prompt=[1], max_tokens=5, ignore_eos=ignore, emit=lambda s, t, f, seen=seen: seen.append((t, f))
        )
        scheduler.submit(sequence)
        while not seen or not seen[-1][1]:
            scheduler.step()
        assert len(seen) == expected


@pytest.mark.slow
def test_background_thread_serves_concurrent_requests(files):
    runner = llm_engine.OrtRunner(str(files.onnx_path), threads=2)
    scheduler = llm_engine.Scheduler(runner, max_sequences=4, max_context=64)
    scheduler.start()
    done = threading.Event()
    outputs: dict[int, list[int]] = {}

    def emit(sequence, tokens, final):
        outputs.setdefault(sequence.tag, []).extend(tokens)
        if final and len([k for k in outputs if len(outputs[k]) == 6]) == len(PROMPTS):
            done.set()

    try:
        for i, prompt in enumerate(PROMPTS):
            scheduler.submit(
                llm_engine.Sequence(prompt=list(prompt), max_tokens=6, ignore_eos=True, emit=emit, tag=i)
            )
        assert done.wait(120)
    finally:
        scheduler.stop()
    assert outputs[1] == greedy_reference(files.onnx_path, PROMPTS[1], 6)


@pytest.mark.slow
def test_torch_runner_on_cpu_matches_onnx(files):
    """The torch-cuda flavor's runner (transformers on the hf/ checkpoint), here on the CPU in float32."""
    runner = llm_engine.TorchRunner(str(files.hf_dir), device="cpu", dtype="float32", threads=2)
    scheduler = llm_engine.Scheduler(runner, max_sequences=3, max_context=64)
    requests = [(p, 8) for p in PROMPTS]
    got = _run_all(scheduler, requests, stagger=2)
    for i, (prompt, max_tokens) in enumerate(requests):
        assert got[i] == greedy_reference(files.onnx_path, prompt, max_tokens), f"prompt {i}"
