"""A decoupled model with known timing: each request gets its tokens from its own thread, on schedule."""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = {k: v["string_value"] for k, v in json.loads(args["model_config"])["parameters"].items()}
        self.ttft_s = float(params["ttft_ms"]) / 1000
        self.itl_s = float(params["itl_ms"]) / 1000
        self.per_response = int(params["tokens_per_response"])
        self.max_context = int(params["max_context"])

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._answer, args=(request, time.monotonic()), daemon=True).start()
        return None

    def _answer(self, request, arrived):
        sender = request.get_response_sender()
        ids = pb_utils.get_input_tensor_by_name(request, "input_ids")
        ids = ids.as_numpy().reshape(-1) if ids is not None else np.zeros(1, dtype=np.int64)
        asked = pb_utils.get_input_tensor_by_name(request, "max_tokens")
        n_out = int(asked.as_numpy().reshape(-1)[0]) if asked is not None else 16
        if len(ids) + n_out > self.max_context:
            error = pb_utils.TritonError(
                f"prompt of {len(ids)} tokens + max_tokens {n_out} is beyond max_context {self.max_context}"
            )
            sender.send(
                pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            )
            return
        sent = 0
        while sent < n_out:
            k = min(self.per_response, n_out - sent)
            due = arrived + self.ttft_s + (sent + k - 1) * self.itl_s
            time.sleep(max(0.0, due - time.monotonic()))
            out = np.arange(sent, sent + k, dtype=np.int64) + 1000
            sent += k
            tensors = [
                pb_utils.Tensor("output_ids", out),
                pb_utils.Tensor("text_output", np.array([" ".join(["w"] * k).encode()], dtype=np.object_)),
                pb_utils.Tensor("input_tokens", np.array([len(ids)], dtype=np.int32)),
            ]
            sender.send(pb_utils.InferenceResponse(output_tensors=tensors))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
