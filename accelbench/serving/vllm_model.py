"""Triton python-backend model written by accelbench for ``engine = "vllm"``: vLLM's async engine, streamed.

The same shape as Triton's own vLLM backend (github.com/triton-inference-server/vllm_backend, src/model.py):
``model.json`` beside this file holds ``AsyncEngineArgs`` keywords; ``initialize`` starts ``AsyncLLM`` on an
asyncio loop in its own thread; ``execute`` hands each request to that loop and returns; each request's
coroutine sends one decoupled response per engine output (``RequestOutputKind.DELTA``: the new tokens) and
the last one with ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``; a cancelled request is aborted in the engine.
The tensors are accelbench's generative contract (serving/llm_repository.py: input_ids or text_input,
max_tokens, ignore_eos, temperature in; text_output, output_ids, input_tokens out), so ``loadtest --api
triton`` measures it as it measures the built-in engine. On a GPU host the NGC ``-vllm-python-py3``
container serves the same ``model.json`` with its own backend (``backend: "vllm"``, docs/serving.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import locale
import os
import threading
import uuid
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

DEFAULT_MAX_TOKENS = 16
ENGINE_ARGS_FILE = "model.json"


def _scalar(request: Any, name: str, default: Any) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    array = tensor.as_numpy().reshape(-1)
    return array[0] if array.size else default


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        # the 2.51 stub starts its interpreter in the C locale whatever the environment says (PYTHONUTF8 and
        # LC_ALL are not read), and torch's inductor reads its templates with the locale's codec: ascii fails
        with contextlib.suppress(locale.Error):  # a host without that locale keeps its own
            locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        version_dir = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(version_dir, ENGINE_ARGS_FILE)) as handle:
            engine_args = json.load(handle)
        if not os.path.isabs(engine_args["model"]) and os.path.isdir(
            os.path.join(version_dir, engine_args["model"])
        ):
            engine_args["model"] = os.path.join(version_dir, engine_args["model"])
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="vllm-loop", daemon=True)
        self.thread.start()

        async def start() -> Any:
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args))

        self.engine = asyncio.run_coroutine_threadsafe(start(), self.loop).result()
        self.tokenizer = None

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            sender = request.get_response_sender()
            try:
                prompt, params = self._request(request)
            except Exception as err:  # a malformed request gets its own error; the others go on
                self._error(sender, f"bad request: {err}")
                continue
            asyncio.run_coroutine_threadsafe(self._generate(prompt, params, sender), self.loop)
        return None

    def _request(self, request: Any) -> tuple[Any, Any]:
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        given = pb_utils.get_input_tensor_by_name(request, "input_ids")
        ids = None if given is None else given.as_numpy().reshape(-1)
        if ids is not None and ids.size:
            prompt: Any = TokensPrompt(prompt_token_ids=[int(t) for t in ids])
        else:
            text = _scalar(request, "text_input", None)
            if text is None:
                raise ValueError("send text_input or input_ids")
            prompt = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        params = SamplingParams(
            max_tokens=int(_scalar(request, "max_tokens", DEFAULT_MAX_TOKENS)),
            ignore_eos=bool(_scalar(request, "ignore_eos", False)),
            temperature=float(_scalar(request, "temperature", 0.0)),
            output_kind=RequestOutputKind.DELTA,
        )
        return prompt, params

    async def _generate(self, prompt: Any, params: Any, sender: Any) -> None:
        request_id = uuid.uuid4().hex
        try:
            async for output in self.engine.generate(prompt, params, request_id):
                if sender.is_cancelled():
                    await self.engine.abort(request_id)
                    self._error(sender, "cancelled")
                    return
                done = output.outputs[0]
                tensors = [
                    pb_utils.Tensor("text_output", np.array([done.text.encode("utf-8")], dtype=np.object_)),
                    pb_utils.Tensor("output_ids", np.asarray(list(done.token_ids), dtype=np.int64)),
                    pb_utils.Tensor(
                        "input_tokens", np.array([len(output.prompt_token_ids or ())], dtype=np.int32)
                    ),
                ]
                flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if output.finished else 0
                sender.send(pb_utils.InferenceResponse(output_tensors=tensors), flags=flags)
        except Exception as err:
            self._error(sender, f"vLLM: {err}")

    def _error(self, sender: Any, message: str) -> None:
        sender.send(
            pb_utils.InferenceResponse(error=pb_utils.TritonError(message)),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )

    def finalize(self) -> None:
        self.engine.shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
