"""Iteration-level scheduling of a causal LM with a KV cache (in-flight batching), for the Triton model.

Copied beside the generative ``model.py`` (``llm_model.py``) and imported from there: it must not import
accelbench (the server's python need not have it), only numpy and, by runner, onnxruntime or torch.

A background thread owns the running batch. Each iteration it (1) admits waiting sequences up to
``max_sequences`` and prefills them together (prompts left-padded, ``attention_mask`` 0 on the pads,
``position_ids`` counting real tokens only), then (2) runs one decode step for every sequence that was already
running: their KV caches (each kept per sequence until it ends) are left-padded to the longest and stacked, one
token each. New requests therefore join at the next step, and a finished sequence leaves at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Sequence:
    prompt: list[int]
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 0.0
    # emit(sequence, new token ids, final): called from the scheduler thread for every token
    emit: Callable[[Sequence, list[int], bool], None] | None = None
    fail: Callable[[Sequence, str], None] | None = None  # an error ends the sequence
    cancelled: Callable[[], bool] | None = None  # the client went away: drop it at the next step
    generated: list[int] = field(default_factory=list)
    cache: list = field(default_factory=list)  # per layer (key, value) of shape [kv_heads, length, head]
    length: int = 0  # tokens in the cache
    tag: object = None  # the caller's (model.py keeps its response sender and text state here)


class Scheduler:
    """Admit, prefill and decode sequences on one runner (``OrtRunner`` or ``TorchRunner``)."""

    def __init__(
        self,
        runner,
        max_sequences: int = 8,
        max_context: int = 2048,
        eos_token_id: int | None = None,
        max_prefill_tokens: int = 2048,
        seed: int = 0,
    ) -> None:
        self.runner = runner
        self.max_sequences = max_sequences
        self.max_context = max_context
        self.eos_token_id = eos_token_id
        self.max_prefill_tokens = max_prefill_tokens
        self.rng = np.random.default_rng(seed)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.lock = threading.Condition()
        self.stopping = False
        self.thread: threading.Thread | None = None
        # counters: steps, sequences they carried, seconds in the runner (the server logs them at unload)
        self.steps = {
            "prefill": 0,
            "prefill_rows": 0,
            "prefill_s": 0.0,
            "decode": 0,
            "decode_rows": 0,
            "decode_s": 0.0,
        }

    def check(self, sequence: Sequence) -> str | None:
        """Why a request cannot run (an error message naming the numbers), or None."""
        if not sequence.prompt:
            return "the prompt is empty: send text_input or input_ids"
        if sequence.max_tokens < 1:
            return f"max_tokens must be at least 1, got {sequence.max_tokens}"
        total = len(sequence.prompt) + sequence.max_tokens
        if total > self.max_context:
            return (
                f"prompt of {len(sequence.prompt)} tokens + max_tokens {sequence.max_tokens} = {total} "
                f"exceeds max_context {self.max_context}"
            )
        return None

    def submit(self, sequence: Sequence) -> None:
        with self.lock:
            self.waiting.append(sequence)
            self.lock.notify()

    # ------------------------------------------------------------------ the loop
    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name="llm-scheduler", daemon=True)
        self.thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        with self.lock:
            self.stopping = True
            self.lock.notify()
        if self.thread is not None:
            self.thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            with self.lock:
                while not self.stopping and not self.waiting and not self.running:
                    self.lock.wait()
                if self.stopping:
                    return
            try:
                self.step()
            except Exception as err:  # noqa: BLE001 - a runner failure ends the sequences, not the server
                for sequence in [*self.running, *self._admit()]:
                    _fail(sequence, f"{type(err).__name__}: {err}")
                self.running = []
                time.sleep(0.01)

    def step(self) -> None:
        """One iteration: prefill what was admitted, then one decode step for the sequences already running."""
        self._drop_cancelled()
        previous = list(self.running)
        admitted = self._admit()
        if admitted:
            self._prefill(admitted)
        if previous:
            self._decode(previous)

    def _admit(self) -> list[Sequence]:
        admitted: list[Sequence] = []
        tokens = 0
        with self.lock:
            while self.waiting and len(self.running) + len(admitted) < self.max_sequences:
                nxt = self.waiting[0]
                if admitted and tokens + len(nxt.prompt) > self.max_prefill_tokens:
                    break  # a long prompt waits for the next iteration instead of growing this one's logits
                admitted.append(self.waiting.popleft())
                tokens += len(nxt.prompt)
        return admitted

    def _drop_cancelled(self) -> None:
        keep = []
        for sequence in self.running:
            if sequence.cancelled is not None and sequence.cancelled():
                sequence.cache = []
                continue
            keep.append(sequence)
        self.running = keep

    def _prefill(self, sequences: list[Sequence]) -> None:
        start = time.perf_counter()
        logits, caches = self.runner.prefill([s.prompt for s in sequences])
        self.steps["prefill_s"] += time.perf_counter() - start
        self.steps["prefill"] += 1
        self.steps["prefill_rows"] += len(sequences)
        for sequence, row, cache in zip(sequences, logits, caches, strict=True):
            sequence.cache, sequence.length = cache, len(sequence.prompt)
            self.running.append(sequence)
            self._advance(sequence, row)

    def _decode(self, sequences: list[Sequence]) -> None:
        tokens = [s.generated[-1] for s in sequences]
        start = time.perf_counter()
        logits, caches = self.runner.decode(
            tokens, [s.cache for s in sequences], [s.length for s in sequences]
        )
        self.steps["decode_s"] += time.perf_counter() - start
        self.steps["decode"] += 1
        self.steps["decode_rows"] += len(sequences)
        for sequence, row, cache in zip(sequences, logits, caches, strict=True):
            sequence.cache, sequence.length = cache, sequence.length + 1
            self._advance(sequence, row)

    def _advance(self, sequence: Sequence, logits: np.ndarray) -> None:
        token = self._pick(logits, sequence.temperature)
        sequence.generated.append(token)
        done = len(sequence.generated) >= sequence.max_tokens or (
            not sequence.ignore_eos and self.eos_token_id is not None and token == self.eos_token_id
        )
        if done:
            self.running.remove(sequence)
            sequence.cache = []
        if sequence.emit is not None:
            try:
                sequence.emit(sequence, [token], done)
            except Exception:  # noqa: BLE001 - a client that cannot be answered is dropped
                if sequence in self.running:
                    self.running.remove(sequence)

    def _pick(self, logits: np.ndarray, temperature: float) -> int:
        if temperature <= 0:
            return int(np.argmax(logits))
        scaled = np.asarray(logits, np.float64) / temperature
        probs = np.exp(scaled - scaled.max())
        return int(self.rng.choice(len(probs), p=probs / probs.sum()))


def _fail(sequence: Sequence, message: str) -> None:
    if sequence.fail is not None:
        with contextlib.suppress(Exception):  # nothing more can be done for it
            sequence.fail(sequence, message)


# ---------------------------------------------------------------------- runners
def left_pad(prompts: list[list[int]], pad_id: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``input_ids``, ``attention_mask`` and ``position_ids`` of left-padded prompts."""
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad_id, np.int64)
    mask = np.zeros((len(prompts), width), np.int64)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = prompt
        mask[i, width - len(prompt) :] = 1
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    return ids, mask, positions


def decode_mask(lengths: list[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Attention mask ``[b, P + 1]`` (P = longest cache, shorter ones left-padded) and ``position_ids``."""
    past = max(lengths)
    mask = np.zeros((len(lengths), past + 1), np.int64)
    for i, length in enumerate(lengths):
        mask[i, past - length :] = 1
    return mask, np.asarray(lengths, np.int64)[:, None], past


def last_position_logits(onnx_path: str) -> bytes | None:
    """The graph with the LM head applied to the last position only (a Slice before it), serialized; None
    when the graph keeps its weights in an external file or has no single node making ``logits``.

    A prefill then computes ``[batch, 1, vocab]`` logits instead of one row per prompt token: the LM head is most
    of a small model's FLOPs, and all but the last row would be thrown away."""
    import os

    import onnx
    from onnx import helper

    if os.path.exists(onnx_path + ".data") or os.path.exists(onnx_path + "_data"):
        return None
    model = onnx.load(onnx_path)
    graph = model.graph
    heads = [n for n in graph.node if "logits" in n.output]
    if len(heads) != 1:
        return None
    head = heads[0]
    names = {"starts": [-1], "ends": [2**62], "axes": [1]}
    for key, value in names.items():
        graph.initializer.append(
            onnx.numpy_helper.from_array(np.asarray(value, np.int64), f"last_position_{key}")
        )
    sliced = f"{head.input[0]}_last_position"
    node = helper.make_node(
        "Slice", [head.input[0], *(f"last_position_{k}" for k in names)], [sliced], name="last_position_slice"
    )
    head.input[0] = sliced
    graph.node.insert(list(graph.node).index(head), node)
    return model.SerializeToString()


class OrtRunner:
    """An optimum ``text-generation-with-past`` ONNX graph on ONNX Runtime (CPU)."""

    def __init__(self, onnx_path: str, threads: int = 0, spinning: bool = False) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        model = last_position_logits(onnx_path)
        self.session = ort.InferenceSession(model or onnx_path, options, providers=["CPUExecutionProvider"])
        self.past_names = [i.name for i in self.session.get_inputs() if i.name.startswith("past_key_values.")]
        self.layers = len(self.past_names) // 2
        shape = next(i.shape for i in self.session.get_inputs() if i.name.startswith("past_key_values."))
        self.kv_heads, self.head_size = int(shape[1]), int(shape[3])
        self.outputs = ["logits"] + [
            f"present.{n}.{kv}" for n in range(self.layers) for kv in ("key", "value")
        ]

    def _run(self, ids, mask, positions, past: list[np.ndarray]):
        feed = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
        feed.update(zip(self.past_names, past, strict=True))
        logits, *present = self.session.run(self.outputs, feed)
        return logits[:, -1, :], present

    def prefill(self, prompts: list[list[int]]):
        ids, mask, positions = left_pad(prompts)
        empty = np.zeros((len(prompts), self.kv_heads, 0, self.head_size), np.float32)
        logits, present = self._run(ids, mask, positions, [empty] * (2 * self.layers))
        width = ids.shape[1]
        caches = [
            [np.ascontiguousarray(t[i, :, width - len(p) :, :]) for t in present]
            for i, p in enumerate(prompts)
        ]
        return logits, caches

    def decode(self, tokens: list[int], caches: list[list[np.ndarray]], lengths: list[int]):
        mask, positions, past = decode_mask(lengths)
        batch = len(tokens)
        stacked = []
        for index in range(2 * self.layers):
            buffer = np.zeros((batch, self.kv_heads, past, self.head_size), np.float32)
            for i, length in enumerate(lengths):
                buffer[i, :, past - length :, :] = caches[i][index]
            stacked.append(buffer)
        ids = np.asarray(tokens, np.int64)[:, None]
        logits, present = self._run(ids, mask, positions, stacked)
        new = [
            [np.ascontiguousarray(t[i, :, past - length :, :]) for t in present]
            for i, length in enumerate(lengths)
        ]
        return logits, new


class TorchRunner:
    """transformers' causal LM (``AutoModelForCausalLM``) from the variant's ``hf/`` folder, on CUDA in bf16
    (the torch-cuda flavor) or on the CPU in float32 (tests)."""

    def __init__(self, hf_dir: str, device: str = "cuda", dtype: str = "bfloat16", threads: int = 0) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.device = torch.device(device)
        self.model = (
            AutoModelForCausalLM.from_pretrained(hf_dir, dtype=getattr(torch, dtype), local_files_only=True)
            .to(self.device)  # type: ignore[arg-type]  # transformers types .to by a functools.wraps mypy misreads
            .eval()
        )

    def _tensor(self, array):
        return self.torch.as_tensor(np.ascontiguousarray(array), device=self.device)

    def _forward(self, ids, mask, positions, past):
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer, (key, value) in enumerate(past or []):
            cache.update(key, value, layer)
        with self.torch.inference_mode():
            out = self.model(
                input_ids=self._tensor(ids),
                attention_mask=self._tensor(mask),
                position_ids=self._tensor(positions),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        present = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        return out.logits[:, -1, :].float().cpu().numpy(), present

    def prefill(self, prompts: list[list[int]]):
        ids, mask, positions = left_pad(prompts)
        logits, present = self._forward(ids, mask, positions, None)
        width = ids.shape[1]
        caches = [
            [(k[i, :, width - len(p) :], v[i, :, width - len(p) :]) for k, v in present]
            for i, p in enumerate(prompts)
        ]
        return logits, caches

    def decode(self, tokens: list[int], caches: list, lengths: list[int]):
        torch = self.torch
        mask, positions, past = decode_mask(lengths)
        stacked = []
        for layer in range(len(caches[0])):
            pair = []
            for which in (0, 1):
                parts = []
                for cache, length in zip(caches, lengths, strict=True):
                    t = cache[layer][which]
                    pad = t.new_zeros((t.shape[0], past - length, t.shape[2]))
                    parts.append(torch.cat([pad, t], dim=1))
                pair.append(torch.stack(parts))
            stacked.append(tuple(pair))
        ids = np.asarray(tokens, np.int64)[:, None]
        logits, present = self._forward(ids, mask, positions, stacked)
        new = [
            [(k[i, :, past - n :], v[i, :, past - n :]) for k, v in present] for i, n in enumerate(lengths)
        ]
        return logits, new
