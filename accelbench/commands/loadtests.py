"""CLI commands for the loadtests stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import dataclasses
import sys

import click

from accelbench.commands import catalog_of
from accelbench.commands.load_options import (
    build,
    flagged,
    knob_options,
    load_options,
    stack,
    take,
    take_plan,
    workload_options,
)
from accelbench.hardware.catalog_schema import PRECISIONS
from accelbench.loadtests.distributed import MASTER_SILENCE_S
from accelbench.loadtests.knobs import ProfileError
from accelbench.loadtests.profiles import Search, Workload, offered_label


def _progress(json_mode: bool):
    """A live rich line (step, requests/s, p99) on a terminal; plain lines otherwise; nothing with --json."""
    from accelbench.loadtests.events import Event, StepProgress

    if json_mode:
        return None, lambda event: None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(stderr=True), refresh_per_second=4, transient=True)

        def on_event(event: Event) -> None:
            line = _line(event)
            if line is not None and isinstance(event, StepProgress):
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
        return (
            f"step {event.index} {offered_label(event.offered)}  t={event.elapsed_s:.0f}s  "
            f"{event.rps:.0f} req/s  p99 {event.p99_us} µs"
        )
    if isinstance(event, ev.StepFinished):
        return _step_line(event.step)
    if isinstance(event, ev.RepeatStarted):
        return f"run {event.repeat} of {event.repeats}"
    if isinstance(event, ev.WorkersWaiting):  # workers come from other hosts
        return (
            f"master on {event.master}: waiting up to {event.timeout_s:g} s for {event.expect_workers} "
            f"workers (accelbench loadtest-worker --master {event.master})"
        )
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


def _ms(latency) -> str:
    return f"{latency.p50 / 1000:.1f}" if latency is not None and latency.p50 is not None else "-"


def _step_line(step) -> str:
    """One line per finished step (a ``documents.Step``)."""
    from accelbench.documents import to_dict

    lat = step.latency_us
    errors = sum(to_dict(step.errors).values()) if step.errors else 0
    if step.generative is not None:
        g = step.generative
        text = (
            f"step {step.index} {offered_label(to_dict(step.offered))}: {step.throughput_rps:.2f} req/s  "
            f"{(g.output_tokens_per_s.value if g.output_tokens_per_s else 0) or 0:.1f} tok/s  "
            f"TTFT p50 {_ms(g.ttft_us)} ms  ITL p50 {_ms(g.itl_us)} ms  TPOT p50 {_ms(g.tpot_us)} ms  "
            f"errors {errors}  {step.verdict}"
        )
        return text + (f" ({'; '.join(step.reasons)})" if step.reasons else "")
    text = (
        f"step {step.index} {offered_label(to_dict(step.offered))}"
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


def _none_valid(doc, path) -> None:
    """A generative sweep whose every step is INVALID measured nothing that can be trusted: exit 5 (the
    document is written and printed first)."""
    from accelbench.errors import MeasurementError

    if doc.steps and all(s.verdict == "INVALID" for s in doc.steps):
        first = doc.steps[0]
        why = "; ".join(first.reasons or []) or first.aborted or "no reason recorded"
        raise MeasurementError(f"every step is INVALID (step {first.index}: {why[:200]}); see {path}")


# where the model is served (a local repository or a running Triton) and what it is
server_options = stack(
    click.option("--url", help="A running Triton's HTTP URL instead of a local repository."),
    click.option("--grpc-url", help="The running Triton's gRPC HOST:PORT (default: HTTP port + 1)."),
    click.option("--model", required=True, help="The Triton model name (the variant name)."),
    click.option("--manifest", "manifest_path", type=click.Path(), help="Variant folder or manifest.json."),
    click.option("--card", "card_uri", help="Model card for request payloads when no manifest is found."),
    click.option(
        "--target",
        help="Catalog target id the server runs on, for a model without a manifest (with --precision).",
    ),
    click.option(
        "--precision",
        type=click.Choice(PRECISIONS),
        help="What the served model computes in, for a model without a manifest (with --target).",
    ),
    click.option("--tritonserver", type=click.Path(dir_okay=False), help="tritonserver binary to run REPO."),
    click.option(
        "--server-log",
        type=click.Path(dir_okay=False),
        default=None,
        help="Append the log of the tritonserver started for REPO here.",
    ),
)
# load from worker processes on other hosts (docs/loadtests.md)
distributed_options = stack(
    click.option(
        "--master-bind",
        help="Listen for workers on other hosts at HOST:PORT (with "
        "--expect-workers); workers run `accelbench loadtest-worker --master HOST:PORT`.",
    ),
    click.option("--expect-workers", type=int, help="With --master-bind: worker processes to wait for."),
    click.option(
        "--worker-timeout",
        type=float,
        default=120.0,
        show_default=True,
        help="With --master-bind: seconds to wait for the workers.",
    ),
)


def _is_generative(gen: dict, repo, url, model: str) -> bool:
    """A workload option given, or (Triton) the served model streams (a decoupled config)."""
    if gen:
        return True
    from accelbench.loadtests import generative

    if repo is not None:
        return generative.repository_generative(repo, model)
    return url is not None and generative.triton_generative(url.rstrip("/"), model) is not None


def _search_of(given: dict, options: dict) -> Search | None:
    """The search asked for (``--search MODE`` and its options), with the load levels it plans itself."""
    if not given:
        return None
    from accelbench.errors import BadInputError

    if "mode" not in given:
        raise BadInputError("the --search-* options go with --search concurrency|rate")
    for flag in ("concurrency", "rate"):
        if options.get(flag) is not None:
            raise BadInputError(f"--search plans its own load levels; drop --{flag}")
    search = build(Search, given)
    options["concurrency" if search.mode == "concurrency" else "rate"] = "1"  # replaced by searching()
    return search


def _run_live(json_mode: bool, measure) -> tuple:
    """``measure(on_event)`` with the progress display of ``_progress`` around it."""
    live, on_event = _progress(json_mode)
    try:
        if live is not None:
            live.start()
        return measure(on_event)
    finally:
        if live is not None:
            live.stop()


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""

    @group.command("loadtest")
    @click.argument("repo", required=False, type=click.Path(file_okay=False))
    @server_options
    @load_options
    @distributed_options
    @workload_options
    @knob_options(Search, defaults=False)
    @click.option("--out", "out_dir", default="results", show_default=True, type=click.Path(file_okay=False))
    @click.option("--json", "json_mode", is_flag=True, help="Print the result document as JSON.")
    @click.pass_context
    def loadtest(ctx, repo, out_dir, json_mode, **options) -> None:
        """Load-test a model with Locust: a concurrency or request-rate sweep with exact µs latencies; for a
        generative model (--api, or a streaming Triton model) TTFT, ITL, TPOT and tokens/s per step."""
        from accelbench.loadtests.verdict import Limits

        where = {
            k: options.pop(k)
            for k in (
                "url",
                "grpc_url",
                "model",
                "manifest_path",
                "tritonserver",
                "server_log",
                "target",
                "precision",
            )
        }
        card_uri = options.pop("card_uri")
        if where["target"] is not None:
            catalog_of(ctx).get(where["target"])  # an unknown id stops here
        bind = _master_bind(
            options.pop("master_bind"),
            options.pop("expect_workers"),
            options.pop("worker_timeout"),
            options.get("processes") or 1,
        )
        gen = take(Workload, options)
        search = _search_of(take(Search, options), options)
        plan = take_plan(options, **({"processes": bind.expect_workers} if bind is not None else {}))
        if search is not None:
            plan = dataclasses.replace(plan, profile=plan.profile.searching(search))
        common = dict(
            model=where.pop("model"),
            out_dir=out_dir,
            repo=repo,
            repeats=plan.repeats,
            command=" ".join(["accelbench", *sys.argv[1:]]),
            master_bind=bind,
            limits=Limits(retries=plan.retries),
            **where,
        )
        generative = _is_generative(gen, repo, where["url"], common["model"])
        if search is not None and not generative:
            from accelbench.errors import BadInputError

            raise BadInputError(
                "--search finds a generative model's TTFT/TPOT capacity: give --api (or serve a "
                "streaming model)"
            )
        if generative:
            from accelbench.loadtests.generative import run as run_generative

            gen.setdefault("api", "triton-grpc" if plan.profile.protocol == "grpc" else "triton")
            workload = build(Workload, gen)
            try:
                plan.profile.streaming(
                    dataclasses.replace(workload, trace_sha256="-")
                )  # combinations, no I/O
            except ProfileError as err:
                raise flagged(err, Workload, flags={"search": "--search"}) from None
            doc, path = _run_live(
                json_mode,
                lambda on_event: run_generative(
                    profile=plan.profile, workload=workload, card_uri=card_uri, on_event=on_event, **common
                ),
            )
            _finish(doc, path, json_mode, plan.repeats)
            _none_valid(doc, path)
            return
        else:
            from accelbench.loadtests.api import loadtest as run

            doc, path = _run_live(
                json_mode,
                lambda on_event: run(profile=plan.profile, card_uri=card_uri, on_event=on_event, **common),
            )
        _finish(doc, path, json_mode, plan.repeats)

    @group.command("loadtest-worker")
    @click.option("--master", required=True, help="The master's HOST:PORT (its --master-bind).")
    @click.option(
        "--processes", type=int, default=1, show_default=True, help="Worker processes on this host."
    )
    @click.option(
        "--connect-timeout",
        type=float,
        default=120.0,
        show_default=True,
        help="Seconds to keep trying to reach the master (in 5 s steps).",
    )
    @click.option(
        "--master-silence",
        type=click.FloatRange(min=1),
        default=MASTER_SILENCE_S,
        show_default=True,
        help="Seconds without the master's heartbeat before giving up (master killed or cut off: exit 5).",
    )
    def loadtest_worker(master, processes, connect_timeout, master_silence) -> None:
        """Send load for an `accelbench loadtest --master-bind` master: it sends model, target and payloads."""
        from accelbench.loadtests.distributed import run_workers
        from accelbench.loadtests.events import WorkerConfigured, WorkerConnected, WorkerEvent

        def on_event(worker: WorkerEvent) -> None:
            event = worker.event
            if isinstance(event, WorkerConfigured):
                click.echo(
                    f"worker {worker.process}: index {event.index}, {event.kind} loop, "
                    f"{event.protocol} {event.url} model {event.model}"
                )
            elif isinstance(event, WorkerConnected):
                click.echo(f"worker {worker.process}: connected to {event.master}")

        last = run_workers(master, processes, connect_timeout, on_event, master_silence)
        click.echo(
            f"{len(last)} worker process(es) finished: the master ended the run; what it measured is in its "
            "result document"
        )
