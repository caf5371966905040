"""CLI commands for the loadtests stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import sys

import click

from accelbench.commands import catalog_of
from accelbench.hardware.catalog_schema import PRECISIONS


def _progress(json_mode: bool):
    """A live rich line (step, requests/s, p99) on a terminal; plain lines otherwise; nothing with --json."""
    from accelbench.loadtests.events import StepProgress

    if json_mode:
        return None, lambda event: None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(stderr=True), refresh_per_second=4, transient=True)

        def on_event(event) -> None:
            line = _line(event)
            if isinstance(event, StepProgress):
                live.update(line)
            elif line is not None:
                live.console.print(line)

        return live, on_event

    # not a terminal: progress on stdout, so stderr carries only an error line
    def plain(event) -> None:
        line = _line(event)
        if line is not None:
            click.echo(line)

    return None, plain


def _line(event) -> str | None:
    """The line a sweep event prints, if any: windows, steps, repeats and the master's own notices."""
    from accelbench.loadtests import events as ev

    if isinstance(event, ev.StepProgress):
        return (f"step {event.index} {_offered(event.offered)}  t={event.elapsed_s:.0f}s  "
                f"{event.rps:.0f} req/s  p99 {event.p99_us} µs")  # fmt: skip
    if isinstance(event, ev.StepFinished):
        return _step_line(event.step)
    if isinstance(event, ev.RepeatStarted):
        return f"run {event.repeat} of {event.repeats}"
    if isinstance(event, ev.WorkersWaiting):  # workers come from other hosts
        return (f"master on {event.master}: waiting up to {event.timeout_s:g} s for {event.expect_workers} "
                f"workers (accelbench loadtest-worker --master {event.master})")  # fmt: skip
    if isinstance(event, ev.WorkersJoined):
        return "workers: " + ", ".join(f"{w.index}={w.host}/{w.pid}" for w in event.workers)
    return None


def _master_bind(master_bind: str | None, expect_workers: int | None, timeout_s: float, processes: int):
    from accelbench.errors import BadInputError
    from accelbench.loadtests.distributed import MasterBind, parse_host_port

    if master_bind is None and expect_workers is None:
        return None
    if master_bind is None or expect_workers is None:
        raise BadInputError("--master-bind HOST:PORT and --expect-workers N go together")
    if processes != 1:
        raise BadInputError("with --expect-workers the load processes are the workers; drop --processes")
    host, port = parse_host_port(master_bind, "--master-bind")
    return MasterBind(host, port, expect_workers, timeout_s)


def _offered(offered: dict) -> str:
    from accelbench.loadtests.profiles import offered_label

    return offered_label(offered)


def _ms(latency) -> str:
    return f"{latency.p50 / 1000:.1f}" if latency is not None and latency.p50 is not None else "-"


def _step_line(step) -> str:
    """One line per finished step (a ``documents.Step``)."""
    from accelbench.documents import to_dict

    lat = step.latency_us
    errors = sum(to_dict(step.errors).values()) if step.errors else 0
    if step.generative is not None:
        g = step.generative
        text = (f"step {step.index} {_offered(to_dict(step.offered))}: {step.throughput_rps:.2f} req/s  "
                f"{(g.output_tokens_per_s.value if g.output_tokens_per_s else 0) or 0:.1f} tok/s  "
                f"TTFT p50 {_ms(g.ttft_us)} ms  ITL p50 {_ms(g.itl_us)} ms  TPOT p50 {_ms(g.tpot_us)} ms  "
                f"errors {errors}  {step.verdict}")  # fmt: skip
        return text + (f" ({'; '.join(step.reasons)})" if step.reasons else "")
    text = (
        f"step {step.index} {_offered(to_dict(step.offered))}"
        + (f" (attempt {step.attempt})" if (step.attempt or 1) > 1 else "")
        + f": {step.throughput_rps:.1f} req/s  "
        f"p50 {lat.p50 if lat else None} µs  p99 {lat.p99 if lat else None} µs  errors {errors}  {step.verdict}"
    )
    return text + (f" ({'; '.join(step.reasons)})" if step.reasons else "")


def _finish(doc, path, json_mode: bool, repeats: int) -> None:
    if json_mode:
        from accelbench.documents import dump_json

        click.echo(dump_json(doc), nl=False)
    else:
        invalid = sum(1 for s in doc.steps if s.verdict == "INVALID")
        low = sum(1 for s in doc.steps if s.verdict == "LOW-PRECISION")
        runs = f" (run {repeats} of {repeats})" if repeats > 1 else ""
        click.echo(f"{path}: {len(doc.steps)} steps, {low} LOW-PRECISION, {invalid} INVALID{runs}")


_GENERATIVE = (  # (option, default) of the generative sweep; any of them given means a generative sweep
    ("isl", None), ("osl", None), ("isl_range", None), ("osl_range", None), ("prompts", None), ("tokenizer", None),
    ("slo_ttft_p99_ms", None), ("slo_tpot_p99_ms", None), ("no_ignore_eos", False),
)  # fmt: skip


def _generative_options(func):
    """The options of a generative (streaming) sweep (docs/llm.md)."""
    from accelbench.loadtests.workloads import API_CHOICES

    options = [
        click.option(
            "--api",
            type=click.Choice(API_CHOICES),
            help="Generative model: triton (HTTP "
            "generate_stream), triton-grpc (ModelStreamInfer), openai (= openai-chat), openai-completions. "
            "Default for a streaming Triton model: triton.",
        ),  # fmt: skip
        click.option("--isl", type=int, help="Prompt length in tokens (synthetic prompts; default 128)."),
        click.option("--osl", type=int, help="Output length asked (max_tokens; default 64)."),
        click.option("--isl-range", type=float, help="Prompt lengths uniform in [r*ISL, ISL] (default 1)."),
        click.option("--osl-range", type=float, help="Output lengths uniform in [r*OSL, OSL] (default 1)."),
        click.option(
            "--prompts",
            type=click.Path(dir_okay=False),
            help="Prompts file: JSONL {prompt, output_tokens} per line, or a ShareGPT JSON file.",
        ),  # fmt: skip
        click.option(
            "--tokenizer",
            help="Tokenizer folder (tokenizer.json) counting tokens (default: the card's, "
            "else builtin:minilm-wordpiece).",
        ),  # fmt: skip
        click.option("--slo-ttft-p99-ms", type=float, help="Goodput: a request's TTFT objective (ms)."),
        click.option("--slo-tpot-p99-ms", type=float, help="Goodput: a request's TPOT objective (ms)."),
        click.option("--no-ignore-eos", is_flag=True, help="Let the model stop at its end token."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _is_generative(gen: dict, repo, url, model: str) -> bool:
    """--api or a workload option given, or (Triton) the served model streams (a decoupled config)."""
    if gen.get("api") or any(gen.get(k) not in (None, default) for k, default in _GENERATIVE):
        return True
    from accelbench.loadtests import generative

    if repo is not None:
        return generative.repository_generative(repo, model)
    return url is not None and generative.triton_generative(url.rstrip("/"), model) is not None


def _generative_profile(gen: dict, protocol: str, profile_kw: dict):
    from accelbench.loadtests import generative, workloads
    from accelbench.loadtests.tokens import DEFAULT_TOKENIZER

    api = workloads.api_name(gen.get("api") or ("triton-grpc" if protocol == "grpc" else "triton"))
    workload = workloads.GenWorkload(
        api=api, isl=gen["isl"] or 128, osl=gen["osl"] or 64, isl_range=gen["isl_range"] or 1.0,
        osl_range=gen["osl_range"] or 1.0, ignore_eos=not gen["no_ignore_eos"],
        tokenizer=gen["tokenizer"] or DEFAULT_TOKENIZER, slo_ttft_p99_ms=gen["slo_ttft_p99_ms"],
        slo_tpot_p99_ms=gen["slo_tpot_p99_ms"],
    )  # fmt: skip
    return generative.workload_profile(workload, gen["prompts"], **profile_kw)


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""

    @group.command("loadtest")
    @click.argument("repo", required=False, type=click.Path(file_okay=False))
    @click.option("--url", help="A running Triton's HTTP URL instead of a local repository.")
    @click.option("--grpc-url", help="The running Triton's gRPC HOST:PORT (default: HTTP port + 1).")
    @click.option("--model", required=True, help="The Triton model name (the variant name).")
    @click.option("--manifest", "manifest_path", type=click.Path(), help="Variant folder or manifest.json.")
    @click.option("--card", "card_uri", help="Model card for request payloads when no manifest is found.")
    @click.option(
        "--input-data",
        help="Payloads from the server's model metadata: zero, random, or a perf_analyzer JSON data file "
        "(default without a card or manifest: random).",
    )
    @click.option(
        "--shape", "shapes", multiple=True,
        help="NAME:D1,D2 size of an input's dynamic dimensions, batch excluded (repeatable).",
    )  # fmt: skip
    @click.option(
        "--target", help="Catalog target id the server runs on, for a model without a manifest (with --precision).",
    )  # fmt: skip
    @click.option(
        "--precision", type=click.Choice(PRECISIONS),
        help="What the served model computes in, for a model without a manifest (with --target).",
    )  # fmt: skip
    @click.option("--protocol", type=click.Choice(["http", "grpc"]), default="http", show_default=True)
    @click.option("--concurrency", help="Closed loop: comma-separated concurrencies, e.g. 1,2,4,8.")
    @click.option("--rate", help="Open loop: comma-separated Poisson rates in requests/s, e.g. 100,200,400.")
    @click.option(
        "--batch", "batch_size", type=int, default=1, show_default=True, help="Batch size per request."
    )
    @click.option(
        "--duration",
        type=float,
        help="Least seconds measured per step; it then runs until p99's sample floor (max 60 s).",
    )
    @click.option(
        "--max-duration",
        type=float,
        default=60.0,
        show_default=True,
        help="The longest a step may run while waiting for its warm-up cut and sample floor.",
    )
    @click.option(
        "--warmup", type=float, default=2.0, show_default=True, help="Seconds of unmeasured warm-up."
    )
    @click.option("--processes", type=int, default=1, show_default=True, help="Locust load processes.")
    @click.option(
        "--master-bind",
        help="Listen for workers on other hosts at HOST:PORT (with --expect-workers); workers run "
        "`accelbench loadtest-worker --master HOST:PORT`.",
    )
    @click.option("--expect-workers", type=int, help="With --master-bind: worker processes to wait for.")
    @click.option(
        "--worker-timeout", type=float, default=120.0, show_default=True,
        help="With --master-bind: seconds to wait for the workers.",
    )  # fmt: skip
    @click.option(
        "--check-every", type=int, default=100, show_default=True,
        help="Decode every output fully on every Nth answer (and on each failed lean check).",
    )  # fmt: skip
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option(
        "--repeats", type=click.IntRange(min=1), default=1, show_default=True,
        help="Independent runs of the whole sweep, one result document each (the report combines them).",
    )  # fmt: skip
    @click.option(
        "--retries", type=click.IntRange(min=0), default=2, show_default=True,
        help="Re-measure a step judged INVALID for drift or no steady state up to N times; every attempt is kept.",
    )  # fmt: skip
    @click.option("--out", "out_dir", default="results", show_default=True, type=click.Path(file_okay=False))
    @click.option("--tritonserver", type=click.Path(dir_okay=False), help="tritonserver binary to run REPO.")
    @click.option("--server-log", type=click.Path(dir_okay=False), default=None,
                  help="Append the log of the tritonserver started for REPO here.")  # fmt: skip
    @click.option("--json", "json_mode", is_flag=True, help="Print the result document as JSON.")
    @_generative_options
    @click.pass_context
    def loadtest(ctx, repo, url, grpc_url, model, manifest_path, card_uri, input_data, shapes, target, precision,
                 protocol, concurrency, rate, batch_size, duration, max_duration, warmup, processes, master_bind,
                 expect_workers, worker_timeout, check_every, seed, repeats, retries, out_dir, tritonserver,
                 server_log, json_mode, **gen) -> None:  # fmt: skip
        """Load-test a model with Locust: a concurrency or request-rate sweep with exact µs latencies; for a
        generative model (--api, or a streaming Triton model) TTFT, ITL, TPOT and tokens/s per step."""
        from accelbench.errors import BadInputError
        from accelbench.loadtests.api import loadtest as run
        from accelbench.loadtests.profiles import LoadProfile, parse_levels
        from accelbench.loadtests.verdict import Limits

        if (concurrency is None) == (rate is None):
            raise BadInputError("give exactly one of --concurrency or --rate")
        if target is not None:
            catalog_of(ctx).get(target)  # an unknown id stops here
        bind = _master_bind(master_bind, expect_workers, worker_timeout, processes)
        if bind is not None:
            processes = bind.expect_workers
        command = " ".join(["accelbench", *sys.argv[1:]])
        if _is_generative(gen, repo, url, model):
            from accelbench.loadtests.generative import run as run_generative

            profile_kw = dict(kind="closed" if concurrency else "open", levels=parse_levels(concurrency or rate),
                              duration_s=duration, max_duration_s=max_duration, warmup_s=warmup, processes=processes,
                              seed=seed)  # fmt: skip
            profile = _generative_profile(gen, protocol, profile_kw)
            live, on_event = _progress(json_mode)
            try:
                if live is not None:
                    live.start()
                doc, path = run_generative(model=model, profile=profile, out_dir=out_dir, url=url, repo=repo,
                                           grpc_url=grpc_url, prompts_file=gen["prompts"], manifest_path=manifest_path,
                                           tritonserver=tritonserver, server_log=server_log, repeats=repeats,
                                           command=command, on_event=on_event, master_bind=bind, target=target,
                                           precision=precision)  # fmt: skip
            finally:
                if live is not None:
                    live.stop()
            _finish(doc, path, json_mode, repeats)
            return
        profile = LoadProfile(
            kind="closed" if concurrency else "open", protocol=protocol,
            levels=parse_levels(concurrency or rate), duration_s=duration, max_duration_s=max_duration, warmup_s=warmup,
            processes=processes, seed=seed, batch_size=batch_size, check_every=check_every,
            input_data=input_data, shapes=tuple(shapes),
        )  # fmt: skip
        live, on_event = _progress(json_mode)
        try:
            if live is not None:
                live.start()
            doc, path = run(model=model, profile=profile, out_dir=out_dir, repo=repo, url=url, grpc_url=grpc_url,
                            manifest_path=manifest_path, card_uri=card_uri, tritonserver=tritonserver,
                            command=command, on_event=on_event, master_bind=bind, server_log=server_log,
                            repeats=repeats, target=target, precision=precision,
                            limits=Limits(retries=retries))  # fmt: skip
        finally:
            if live is not None:
                live.stop()
        _finish(doc, path, json_mode, repeats)

    @group.command("loadtest-worker")
    @click.option("--master", required=True, help="The master's HOST:PORT (its --master-bind).")
    @click.option(
        "--processes", type=int, default=1, show_default=True, help="Worker processes on this host."
    )
    @click.option(
        "--connect-timeout", type=float, default=120.0, show_default=True,
        help="Seconds to keep trying to reach the master (in 5 s steps).",
    )  # fmt: skip
    def loadtest_worker(master, processes, connect_timeout) -> None:
        """Send load for an `accelbench loadtest --master-bind` master: it sends model, target and payloads."""
        from accelbench.loadtests.distributed import run_workers
        from accelbench.loadtests.events import WorkerConfigured, WorkerConnected, WorkerEvent

        def on_event(worker: WorkerEvent) -> None:
            event = worker.event
            if isinstance(event, WorkerConfigured):
                click.echo(f"worker {worker.process}: index {event.index}, {event.kind} loop, "
                           f"{event.protocol} {event.url} model {event.model}")  # fmt: skip
            elif isinstance(event, WorkerConnected):
                click.echo(f"worker {worker.process}: connected to {event.master}")

        last = run_workers(master, processes, connect_timeout, on_event)
        click.echo(f"{len(last)} worker process(es) finished; results are on the master")
