"""Triton python-backend model written by accelbench for a generative variant: decoupled, streams tokens.

``execute`` only checks each request and queues it; a scheduler thread (llm_engine.Scheduler, copied beside
this file) owns the running batch, batches prefills, runs one decode step for all running sequences at a
time (in-flight batching) and answers each request token by token through its response sender; the last
response carries TRITONSERVER_RESPONSE_COMPLETE_FINAL. Tensors (docs/llm.md "Serving"):
inputs text_input (STRING [1]) or input_ids (INT64 [-1], wins), max_tokens (INT32 [1], default 16),
ignore_eos (BOOL [1]), temperature (FP32 [1], 0 = greedy); every response has text_output (STRING [1]: the
text of its new tokens), output_ids (INT64 [-1]) and input_tokens (INT32 [1]).
Parameters (config.pbtxt): engine (onnxruntime | torch), onnx_file, hf_dir, tokenizer_dir, max_sequences,
max_context, max_prefill_tokens, intra_op_threads, eos_token_id, device, dtype.
Tensors and numpy (docs/serving.md "numpy 2 and the python-backend stub"): with numpy 1 in the stub (its own
numpy<2 environment, which the server uses when it is built) every tensor takes the stub's numpy bridge. With
numpy 2 that bridge corrupts tensors, so the numeric ones cross through DLPack and the BYTES ones cannot cross
at all: a text_input request gets an error naming input_ids, and responses carry no text_output (the load
generator sends input_ids and counts output_ids).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

import numpy as np
import numpy.typing as npt
import triton_python_backend_utils as pb_utils

DEFAULT_MAX_TOKENS = 16
# the stub's numpy bridge (as_numpy, Tensor(name, array)) is only sound under numpy 1
BRIDGE = int(np.__version__.split(".")[0]) < 2
NO_TEXT = (
    "text_input is a BYTES tensor, which the python-backend stub cannot read beside numpy 2: send input_ids, "
    "or serve with the stub's numpy<2 environment (python -m accelbench.serving.install)"
)


class _Unreadable:
    """What a BYTES input becomes beside numpy 2 (see TritonPythonModel.initialize)."""

    def reshape(self, *dims: int) -> _Unreadable:
        return self


def _array(tensor: pb_utils.Tensor) -> npt.NDArray[Any]:
    return tensor.as_numpy() if BRIDGE else np.from_dlpack(tensor)


def _tensor(name: str, array: npt.NDArray[Any]) -> pb_utils.Tensor:
    return pb_utils.Tensor(name, array) if BRIDGE else pb_utils.Tensor.from_dlpack(name, array)


def _scalar(request: pb_utils.InferenceRequest, name: str, default: Any) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    array = _array(tensor).reshape(-1)
    return array[0] if array.size else default


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        if not BRIDGE:
            # the stub deserializes every BYTES input from its corrupt numpy view before execute() runs and dies
            # on the garbage lengths; a placeholder keeps it alive, and _sequence answers with NO_TEXT
            pb_utils.deserialize_bytes_tensor = lambda _: _Unreadable()
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        sys.path.insert(0, version_dir)  # llm_engine.py lies beside this file
        llm_engine = importlib.import_module("llm_engine")
        from tokenizers import Tokenizer

        self.engine_module = llm_engine
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        threads = int(params.get("intra_op_threads") or 0)
        if params.get("engine") == "torch":
            runner = llm_engine.TorchRunner(
                os.path.join(version_dir, params.get("hf_dir") or "hf"),
                device=params.get("device") or "cuda",
                dtype=params.get("dtype") or "bfloat16",
                threads=threads,
            )
        else:
            runner = llm_engine.OrtRunner(
                os.path.join(version_dir, params.get("onnx_file") or "model.onnx"), threads
            )
        self.tokenizer = Tokenizer.from_file(
            os.path.join(version_dir, params.get("tokenizer_dir") or "tokenizer", "tokenizer.json")
        )
        # a tokenizer.json made for an encoder may pad or truncate to a fixed length (MiniLM's: 128)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        eos = params.get("eos_token_id")
        self.scheduler = llm_engine.Scheduler(
            runner,
            max_sequences=int(params.get("max_sequences") or 8),
            max_context=int(params.get("max_context") or 2048),
            eos_token_id=int(eos) if eos not in (None, "") else None,
            max_prefill_tokens=int(params.get("max_prefill_tokens") or 2048),
        )
        # responses are sent from the scheduler thread as each step ends: a separate sender thread was tried and
        # made tokens arrive in bursts on a busy host (it waits for the GIL), which distorts the measured ITL
        self.scheduler.start()

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> None:
        for request in requests:
            sender = request.get_response_sender()
            try:
                sequence = self._sequence(request, sender)
            except Exception as err:  # a malformed request gets its own error; the others go on
                self._error(sender, f"bad request: {err}")
                continue
            problem = self.scheduler.check(sequence)
            if problem:
                self._error(sender, problem)
                continue
            self.scheduler.submit(sequence)
        return None

    def _sequence(self, request: pb_utils.InferenceRequest, sender: pb_utils.ResponseSender) -> Any:
        given = pb_utils.get_input_tensor_by_name(request, "input_ids")
        ids = None if given is None else _array(given).reshape(-1)
        if ids is not None and ids.size:
            prompt = [int(t) for t in ids]
        else:
            if not BRIDGE and pb_utils.get_input_tensor_by_name(request, "text_input") is not None:
                raise ValueError(NO_TEXT)
            text = _scalar(request, "text_input", None)
            if text is None:
                raise ValueError("send text_input or input_ids")
            text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
            prompt = self.tokenizer.encode(text, add_special_tokens=False).ids
        return self.engine_module.Sequence(
            prompt=prompt,
            max_tokens=int(_scalar(request, "max_tokens", DEFAULT_MAX_TOKENS)),
            ignore_eos=bool(_scalar(request, "ignore_eos", False)),
            temperature=float(_scalar(request, "temperature", 0.0)),
            emit=self._emit,
            fail=self._fail,
            cancelled=getattr(sender, "is_cancelled", None),
            tag={"sender": sender, "text": ""},
        )

    def _emit(self, sequence: Any, tokens: list[int], final: bool) -> None:
        state = sequence.tag
        text = self.tokenizer.decode(sequence.generated)
        # the new text is what decoding all tokens so far adds (WordPiece joins "##" pieces to the word before)
        new_text = text[len(state["text"]) :] if text.startswith(state["text"]) else text
        state["text"] = text
        tensors = [
            _tensor("output_ids", np.asarray(tokens, dtype=np.int64)),
            _tensor("input_tokens", np.array([len(sequence.prompt)], dtype=np.int32)),
        ]
        if BRIDGE:
            tensors.insert(
                0, pb_utils.Tensor("text_output", np.array([new_text.encode("utf-8")], dtype=np.object_))
            )
        response = pb_utils.InferenceResponse(output_tensors=tensors)
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        state["sender"].send(response, flags=flags)

    def _fail(self, sequence: Any, message: str) -> None:
        self._error(sequence.tag["sender"], message)

    def _error(self, sender: pb_utils.ResponseSender, message: str) -> None:
        sender.send(
            pb_utils.InferenceResponse(error=pb_utils.TritonError(message)),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )

    def finalize(self) -> None:
        self.scheduler.stop()
        steps = self.scheduler.steps
        rows = steps["decode_rows"] / max(steps["decode"], 1)
        pb_utils.Logger.log_info(
            f"llm scheduler: {steps['prefill']} prefill steps ({steps['prefill_rows']} sequences, "
            f"{steps['prefill_s']:.2f} s), {steps['decode']} decode steps ({rows:.2f} sequences per step, "
            f"{steps['decode_s']:.2f} s)"
        )
