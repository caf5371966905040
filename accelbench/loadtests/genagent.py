"""The generative side of a load process: streamed requests, timed per token (imported only in Locust
processes, after runner.py has monkey-patched the standard library).

``GenerativeAgent`` is the classic Agent (phases, e2e samples, error counts, CPU) plus, per completed
request: TTFT, every inter-token gap, TPOT, e2e, input and output tokens, in completion order
(genstats.Record). The Locust users (users.ClosedLoopUser / OpenLoopUser) drive it unchanged.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from accelbench.loadtests import genstats, streams, users, workloads
from accelbench.loadtests.edge import LoadConfig
from accelbench.loadtests.profiles import Workload
from accelbench.loadtests.streams import NotStreaming, StreamAnswer, output_counts
from accelbench.loadtests.tokens import DEFAULT_TOKENIZER
from accelbench.loadtests.wire import WrongOutput


class GenRequestPool:
    """Per prompt: the request encoded once (HTTP bytes or a serialized gRPC message), its ISL and OSL."""

    def __init__(self, config: LoadConfig, payloads: list[dict[str, np.ndarray]]) -> None:
        w = _workload(config)
        self.requests: list[GenRequest] = []
        for payload in payloads:
            prompt = workloads.from_payload(payload)
            if w.api == "triton-grpc":
                raw = streams.grpc_stream_request(config.model, prompt, w.ignore_eos)
            else:
                raw = streams.build_request(w.api, config.url, config.model, prompt, w.ignore_eos)
            self.requests.append((raw, len(prompt["input_ids"]), prompt["osl"]))
        self.position = 0

    def next(self) -> GenRequest:
        req = self.requests[self.position]
        self.position = (self.position + 1) % len(self.requests)
        return req


GenRequest = tuple[bytes, int, int]  # the encoded request, its ISL and its OSL


def _workload(config: LoadConfig) -> Workload:
    if config.workload is None:
        raise ValueError("a generative agent needs the profile's workload")
    return config.workload


class GenerativeAgent(users.Agent[GenRequest]):
    def __init__(self, config: LoadConfig, pool: GenRequestPool, free_running: bool = True) -> None:
        self.workload = _workload(config)
        super().__init__(config, pool, free_running)

    def _reset(self) -> None:
        super()._reset()
        self.record = genstats.Record()

    def make_client(self, concurrency: int = 1):
        return streams.make_stream_client(self.workload.api, self.config.url, self.config.profile.timeout_s)

    def check(self, answer: Any) -> BaseException | None:
        return None  # a streamed answer is checked while it is read (events, tokens), see issue

    def issue(self, client: Any, request: GenRequest, start_ns: int | None = None) -> BaseException | None:
        """One streamed request; latencies count from ``start_ns`` (open loop: the intended send time)."""
        epoch, counted = self.epoch, self.measuring
        raw, isl, osl = request
        self.in_flight += 1
        t0 = time.perf_counter_ns()
        start_ns = t0 if start_ns is None else min(start_ns, t0)
        exc: BaseException | None = None
        answer: StreamAnswer | None = None
        try:
            answer = client.exchange(raw)
            if not answer.times_ns:
                raise WrongOutput("the stream ended without a token")
        except NotStreaming as err:
            exc = WrongOutput(str(err))
        except Exception as err:  # every failure is classified and counted, never raised into Locust
            exc = err
        end_ns = time.perf_counter_ns()
        self.in_flight -= 1
        e2e_us = (end_ns - start_ns) // 1000
        if counted and epoch == self.epoch:
            self._count(e2e_us, exc)
            if exc is None and answer is not None:
                counts, total, mismatch, source = output_counts(
                    answer, self.workload.tokenizer or DEFAULT_TOKENIZER
                )
                n_in = answer.input_tokens or (answer.usage or {}).get("prompt_tokens") or isl
                self.record.add(start_ns, answer.times_ns, counts, total, end_ns, int(n_in), isl, osl, mismatch,
                                genstats.extra(answer, counts, source))  # fmt: skip
        if self.environment is not None:
            self.environment.events.request.fire(
                request_type=f"llm-{self.workload.api}", name=self.config.model,
                response_time=e2e_us / 1000.0, response_length=len(answer.times_ns) if answer else 0,
                response=None, context={}, exception=exc,
            )  # fmt: skip
        return exc

    def pause(self, timeout_s: float) -> dict[str, Any]:
        totals = super().pause(timeout_s)
        totals["generative"] = self.record.encode(self.workload.to_dict())
        return totals


def make_agent(config: LoadConfig, payloads: list[dict[str, np.ndarray]]) -> GenerativeAgent:
    return GenerativeAgent(config, GenRequestPool(config, payloads), free_running=False)
