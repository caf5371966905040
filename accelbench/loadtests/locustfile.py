"""accelbench's Triton users for Locust's own tools (web UI, ``--headless``, ``--processes``, distributed).

    locust -f accelbench/loadtests/locustfile.py --host http://127.0.0.1:8000 \
        --triton-model identity__cpu-local__fp32 --triton-card builtin:identity [--triton-protocol grpc]

A generative model streams (docs/llm.md): ``--llm-api openai-chat|openai-completions|triton|triton-grpc``
with ``--llm-isl``, ``--llm-osl`` and ``--llm-tokenizer``; the exact TTFT / ITL / TPOT / e2e percentiles are
printed at the end, merged across workers (checked in one process; for several load processes use
``accelbench loadtest --processes N`` or ``--master-bind``, whose merge is tested).

Options also come from the environment: ACCELBENCH_MODEL, ACCELBENCH_CARD, ACCELBENCH_PROTOCOL,
ACCELBENCH_BATCH, ACCELBENCH_SEED. Each request is a closed-loop call (Locust's users each keep one
request in flight). Locust's own statistics stay millisecond-bucketed; exact µs percentiles (workers'
histograms merged on the master) are printed when the test stops.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from locust import events
from locust.env import Environment
from locust.event import EventHook

from accelbench.loadtests import histogram, users
from accelbench.loadtests.edge import LoadConfig
from accelbench.loadtests.jsonwire import LocustMessage
from accelbench.loadtests.profiles import LoadProfile, Workload

users.init_grpc_gevent()  # before any channel exists, or gRPC users share one request at a time


def _listen(hook: EventHook, handler: Callable[..., None]) -> None:
    add: Callable[[Callable[..., None]], None] = hook.add_listener  # Locust's EventHook is untyped
    add(handler)


def _options(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--triton-model", default=env("ACCELBENCH_MODEL", ""), help="Triton model name")
    parser.add_argument(
        "--triton-card", default=env("ACCELBENCH_CARD", "builtin:identity"), help="model card"
    )
    parser.add_argument(
        "--triton-protocol", default=env("ACCELBENCH_PROTOCOL", "http"), choices=["http", "grpc"]
    )
    parser.add_argument("--triton-batch", type=int, default=int(env("ACCELBENCH_BATCH", "1")))
    parser.add_argument("--triton-seed", type=int, default=int(env("ACCELBENCH_SEED", "0")))
    parser.add_argument("--llm-api", default=env("ACCELBENCH_API", ""), help="generative: the streaming API")
    parser.add_argument("--llm-isl", type=int, default=128, help="generative: prompt tokens")
    parser.add_argument("--llm-osl", type=int, default=64, help="generative: output tokens asked")
    parser.add_argument("--llm-tokenizer", default="builtin:minilm-wordpiece", help="generative: tokenizer")


def _init(environment: Environment, **_kw: Any) -> None:
    """This run's agent, bound to its user classes, and its exact histograms: no module global keeps either."""
    from locust.runners import MasterRunner, WorkerRunner

    merged = _Merged()
    if isinstance(environment.runner, MasterRunner):  # the master sends no requests; it merges the workers'
        _listen(environment.events.worker_report, merged.keep)
    else:
        opts = environment.parsed_options
        if opts is None or not opts.triton_model:
            raise SystemExit("locustfile: set --triton-model (or ACCELBENCH_MODEL)")
        agent = (_generative_agent if opts.llm_api else _agent)(environment, opts)
        merged.agent = agent
        environment.user_classes = [users.bind(cls, agent) for cls in environment.user_classes]
        _listen(environment.events.report_to_master, merged.send)
    if not isinstance(environment.runner, WorkerRunner):
        _listen(environment.events.quitting, merged.print_exact)


_listen(events.init_command_line_parser, _options)
_listen(events.init, _init)


def _agent(environment: Environment, opts: argparse.Namespace) -> users.Agent[bytes]:
    from accelbench.models.cards import load_card
    from accelbench.models.inputs import make_inputs

    card = load_card(opts.triton_card)
    profile = LoadProfile(
        kind="closed",
        levels=(1,),
        protocol=opts.triton_protocol,
        batch_size=opts.triton_batch,
        timeout_s=30.0,
        max_in_flight=1,
        seed=opts.triton_seed,
    )
    cfg = LoadConfig(
        profile, opts.triton_model, environment.host or opts.host, tuple(o.to_dict() for o in card.outputs)
    )
    payloads = make_inputs(card, profile.batch_size, 64, profile.seed)
    pool = users.RequestPool(profile.protocol, payloads, [o.name for o in card.outputs], cfg.model, cfg.url)
    agent = users.Agent(cfg, pool, free_running=True)
    agent.environment = environment
    return agent


def _generative_agent(environment: Environment, opts: argparse.Namespace) -> users.Agent[Any]:
    from accelbench.loadtests import genagent, workloads

    workload = Workload(api=opts.llm_api, isl=opts.llm_isl, osl=opts.llm_osl, tokenizer=opts.llm_tokenizer)
    profile = LoadProfile(
        kind="closed",
        levels=(1,),
        protocol="grpc" if workload.api == "triton-grpc" else "http",
        timeout_s=120.0,
        max_in_flight=1,
        seed=opts.triton_seed,
        workload=workload,
    )
    cfg = LoadConfig(profile, opts.triton_model, environment.host or opts.host)
    payloads = workloads.as_payloads(workloads.synthetic_prompts(workload, seed=opts.triton_seed))
    agent = genagent.GenerativeAgent(cfg, genagent.GenRequestPool(cfg, payloads), free_running=True)
    agent.environment = environment
    return agent


class _Merged:
    """One run's exact histograms: this process's agent's, and (on a master) each worker's latest report
    (cumulative, so the latest replaces the one before)."""

    def __init__(self) -> None:
        self.agent: users.Agent[Any] | None = None
        self.latency: dict[str, str] = {}
        self.tokens: dict[str, dict[str, str]] = {}  # generative: each worker's TTFT/ITL/TPOT/e2e histograms

    def own_tokens(self) -> dict[str, str]:
        record = getattr(self.agent, "record", None)
        return {m: histogram.encode(h) for m, h in record.hists.items()} if record is not None else {}

    def send(self, client_id: str, data: LocustMessage, **_kw: Any) -> None:
        if self.agent is not None:
            data["accelbench_hist_us"] = histogram.encode(self.agent.hist)
            if tokens := self.own_tokens():
                data["accelbench_tokens_us"] = tokens

    def keep(self, client_id: str, data: LocustMessage, **_kw: Any) -> None:
        if data.get("accelbench_hist_us"):
            self.latency[client_id] = data["accelbench_hist_us"]
        if data.get("accelbench_tokens_us"):
            self.tokens[client_id] = data["accelbench_tokens_us"]

    def print_exact(self, environment: Environment, **_kw: Any) -> None:
        encoded = list(self.latency.values())
        if self.agent is not None:
            encoded.append(histogram.encode(self.agent.hist))
        merged = histogram.merge(encoded)
        summary = histogram.summary_us(merged)
        print(
            f"accelbench exact latency (µs, {merged.get_total_count()} successful requests): "
            + "  ".join(f"{k} {v}" for k, v in summary.items())
        )
        parts = [*self.tokens.values(), self.own_tokens()]
        for metric in ("ttft_us", "itl_us", "tpot_us", "e2e_us"):
            hist = histogram.merge(p.get(metric) for p in parts)
            if hist.get_total_count():
                print(
                    f"accelbench {metric[:-3].upper()} (µs, {hist.get_total_count()} samples): "
                    + "  ".join(f"{k} {v}" for k, v in histogram.summary_us(hist).items())
                )


class TritonUser(users.ClosedLoopUser):
    """One Triton inference per task, no wait; model and protocol from the options above."""
