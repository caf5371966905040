"""accelbench's Triton users for Locust's own tools (web UI, ``--headless``, ``--processes``, distributed).

    locust -f accelbench/loadtests/locustfile.py --host http://127.0.0.1:8000 \
        --triton-model identity__cpu-local__fp32 --triton-card builtin:identity [--triton-protocol grpc]

Options also come from the environment: ACCELBENCH_MODEL, ACCELBENCH_CARD, ACCELBENCH_PROTOCOL,
ACCELBENCH_BATCH, ACCELBENCH_SEED. Each request is a closed-loop call (Locust's users each keep one
request in flight). Locust's own statistics stay millisecond-bucketed; exact µs percentiles (workers'
histograms merged on the master) are printed when the test stops.
"""

from __future__ import annotations

import os

from locust import events

from accelbench.loadtests import histogram, users

users.init_grpc_gevent()  # before any channel exists, or gRPC users share one request at a time

_WORKER_HISTOGRAMS: dict[str, str] = {}


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
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


@events.init.add_listener
def _init(environment, **_kw) -> None:
    from locust.runners import MasterRunner

    if isinstance(environment.runner, MasterRunner):
        return  # the master sends no requests; it only merges the workers' histograms
    opts = environment.parsed_options
    if not opts.triton_model:
        raise SystemExit("locustfile: set --triton-model (or ACCELBENCH_MODEL)")
    from accelbench.models.cards import load_card
    from accelbench.models.inputs import make_inputs

    card = load_card(opts.triton_card)
    cfg = {
        "protocol": opts.triton_protocol,
        "url": environment.host or opts.host,
        "model": opts.triton_model,
        "batch_size": opts.triton_batch,
        "expected_outputs": [o.to_dict() for o in card.outputs],
        "timeout_s": 30.0,
        "window_s": 1.0,
        "max_in_flight": 1,
        "seed": opts.triton_seed,
    }
    agent = users.Agent(cfg, free_running=True)
    payloads = make_inputs(card, cfg["batch_size"], 64, cfg["seed"])
    agent.pool = users.RequestPool(
        cfg["protocol"], payloads, [o.name for o in card.outputs], cfg["model"], cfg["url"]
    )
    agent.environment = environment
    users.AGENT = agent


@events.report_to_master.add_listener
def _send_histogram(client_id, data, **_kw) -> None:
    if users.AGENT is not None:
        data["accelbench_hist_us"] = histogram.encode(
            users.AGENT.hist
        )  # cumulative: the master keeps the latest


@events.worker_report.add_listener
def _keep_histogram(client_id, data, **_kw) -> None:
    if data.get("accelbench_hist_us"):
        _WORKER_HISTOGRAMS[client_id] = data["accelbench_hist_us"]


@events.quitting.add_listener
def _print_exact(environment, **_kw) -> None:
    from locust.runners import WorkerRunner

    if isinstance(environment.runner, WorkerRunner):
        return
    encoded = list(_WORKER_HISTOGRAMS.values())
    if users.AGENT is not None:
        encoded.append(histogram.encode(users.AGENT.hist))
    merged = histogram.merge(encoded)
    summary = histogram.summary_us(merged)
    print(f"accelbench exact latency (µs, {merged.get_total_count()} successful requests): " +
          "  ".join(f"{k} {v}" for k, v in summary.items()))  # fmt: skip


class TritonUser(users.ClosedLoopUser):
    """One Triton inference per task, no wait; model and protocol from the options above."""
