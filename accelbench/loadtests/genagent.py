"""The generative side of a load process: streamed requests, timed per token (imported only in Locust
processes, after runner.py has monkey-patched the standard library).

``GenerativeAgent`` is the classic Agent (phases, e2e samples, error counts, CPU) plus, per completed
request: TTFT, every inter-token gap, TPOT, e2e, input and output tokens, in completion order
(genstats.Record). The Locust users (users.ClosedLoopUser / OpenLoopUser) drive it unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gevent
import numpy as np

from accelbench.loadtests import genstats, streams, users, workloads
from accelbench.loadtests.edge import LoadConfig
from accelbench.loadtests.profiles import Workload
from accelbench.loadtests.streams import NotStreaming, StreamAnswer, output_counts
from accelbench.loadtests.tokens import DEFAULT_TOKENIZER
from accelbench.loadtests.wire import WrongOutput


@dataclass(frozen=True)
class Conversation:
    """A multi-turn conversation: its questions, in order, and the output length asked of each answer."""

    turns: tuple[str, ...]
    isl: int
    osl: int


GenRequest = tuple[bytes, int, int]  # the encoded request, its ISL and its OSL


class GenRequestPool:
    """Per prompt: the request encoded once (HTTP bytes or a serialized gRPC message), its ISL and OSL; a
    conversation's questions (encoded turn by turn, as the history grows); a trace's arrival times."""

    def __init__(self, config: LoadConfig, payloads: list[dict[str, np.ndarray]]) -> None:
        w = _workload(config)
        self.requests: list[GenRequest | Conversation] = []
        self.arrivals: list[float] = []
        for payload in payloads:
            prompt = workloads.from_payload(payload)
            isl, osl = len(prompt["input_ids"]), 0 if w.api == "openai-embeddings" else prompt["osl"]
            if "at_s" in prompt:
                self.arrivals.append(prompt["at_s"])
            if "turns" in prompt:
                self.requests.append(Conversation(tuple(prompt["turns"]), isl, osl))
                continue
            if w.api == "triton-grpc":
                raw = streams.grpc_stream_request(config.model, prompt, w.ignore_eos)
            else:
                raw = streams.build_request(w.api, config.url, config.model, prompt, w.ignore_eos)
            self.requests.append((raw, isl, osl))
        self.position = 0

    def next(self) -> GenRequest | Conversation:
        req = self.requests[self.position]
        self.position = (self.position + 1) % len(self.requests)
        return req

    def replay(self, rate_rps: float, index: int = 0, processes: int = 1) -> Iterator[tuple[float, Any]]:
        """A trace's requests with their send times (s after the replay starts), scaled so the trace's mean
        rate is ``rate_rps`` (all processes together; this one sends every ``processes``-th request), lap
        after lap (the next lap starts one mean gap after the last request)."""
        own_rate = (len(self.arrivals) - 1) / self.arrivals[-1]
        scale = own_rate / rate_rps
        lap_s = self.arrivals[-1] + 1 / own_rate
        lap = 0
        while True:
            for i in range(index, len(self.requests), processes):
                yield (lap * lap_s + self.arrivals[i]) * scale, self.requests[i]
            lap += 1


class Cancelled(Exception):
    """A request's cancellation delay passed (workload ``cancel_after_ms``)."""


def _workload(config: LoadConfig) -> Workload:
    if config.workload is None:
        raise ValueError("a generative agent needs the profile's workload")
    return config.workload


class GenerativeAgent(users.Agent[Any]):
    def __init__(self, config: LoadConfig, pool: GenRequestPool, free_running: bool = True) -> None:
        self.workload = _workload(config)
        super().__init__(config, pool, free_running)

    def _reset(self) -> None:
        super()._reset()
        self.record = genstats.Record()
        self.sent = getattr(self, "sent", 0)  # requests drawn for cancellation, across phases

    def make_client(self, concurrency: int = 1) -> streams.GrpcStreamClient | streams.SseClient:
        return streams.make_stream_client(self.workload.api, self.config.url, self.config.profile.timeout_s)

    def check(self, answer: Any) -> BaseException | None:
        return None  # a streamed answer is checked while it is read (events, tokens), see issue

    def issue(
        self, client: Any, request: GenRequest | Conversation, start_ns: int | None = None
    ) -> BaseException | None:
        """One streamed request (or a whole conversation, turn after turn); latencies count from
        ``start_ns`` (open loop: the intended send time)."""
        if isinstance(request, Conversation):
            return self.converse(client, request, start_ns)
        return self.one(client, request, start_ns)[0]

    def converse(self, client: Any, conv: Conversation, start_ns: int | None) -> BaseException | None:
        """Each turn sends the history (every earlier question and the answer streamed to it) and the next
        question; the user thinks ``think_time_s`` between an answer and its next turn. A conversation stops
        early when its phase ends (the step's drain) or a turn fails."""
        epoch = self.epoch
        history: list[dict[str, str]] = []
        exc: BaseException | None = None
        w = self.workload
        for k, question in enumerate(conv.turns):
            if k and (not self.running.is_set() or self.epoch != epoch):
                break
            history.append({"role": "user", "content": question})
            raw = streams.build_request(
                w.api,
                self.config.url,
                self.config.model,
                {"text": question, "osl": conv.osl},
                w.ignore_eos,
                history,
            )
            exc, answer = self.one(client, (raw, conv.isl, conv.osl), start_ns if k == 0 else None)
            if exc is not None or answer is None:
                break
            history.append({"role": "assistant", "content": "".join(answer.texts)})
            if k + 1 < len(conv.turns) and w.think_time_s:
                gevent.sleep(float(w.think_time_s))
        return exc

    def _cancel_s(self) -> float | None:
        """Seconds after which this request is cancelled, or None; ``cancel_fraction`` of them, evenly."""
        after = self.workload.cancel_after_ms
        if after is None:
            return None
        self.sent += 1
        fraction = float(self.workload.cancel_fraction or 1.0)
        return after / 1000 if int(self.sent * fraction) > int((self.sent - 1) * fraction) else None

    def one(
        self, client: Any, request: GenRequest, start_ns: int | None = None
    ) -> tuple[BaseException | None, StreamAnswer | None]:
        epoch, counted = self.epoch, self.measuring
        raw, isl, osl = request
        cancel_s = self._cancel_s()
        self.in_flight += 1
        t0 = time.perf_counter_ns()
        start_ns = t0 if start_ns is None else min(start_ns, t0)
        exc: BaseException | None = None
        answer: StreamAnswer | None = None
        try:
            with gevent.Timeout(cancel_s, Cancelled):  # None: no timeout
                answer = client.exchange(raw)
            if not answer.times_ns:
                raise WrongOutput("the stream ended without a token")
        except Cancelled:  # on purpose: the client closed the connection (SseClient.exchange)
            self.in_flight -= 1
            if counted and epoch == self.epoch:
                self.record.cancelled += 1
            return None, None
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
                self.record.add(
                    start_ns,
                    answer.times_ns,
                    counts,
                    total,
                    end_ns,
                    int(n_in),
                    isl,
                    osl,
                    mismatch,
                    genstats.extra(answer, counts, source, self.loop_late_since(start_ns)),
                )
        if self.environment is not None:
            users.fire_request(
                self.environment,
                request_type=f"llm-{self.workload.api}",
                name=self.config.model,
                response_time=e2e_us / 1000.0,
                response_length=len(answer.times_ns) if answer else 0,
                response=None,
                context={},
                exception=exc,
            )
        return exc, answer

    def pause(self, timeout_s: float) -> users.Totals:
        totals = super().pause(timeout_s)
        totals["generative"] = self.record.encode(self.workload.to_dict())
        return totals


def make_agent(config: LoadConfig, payloads: list[dict[str, np.ndarray]]) -> GenerativeAgent:
    return GenerativeAgent(config, GenRequestPool(config, payloads), free_running=False)
