"""CLI commands for the loadtests stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import json
import sys

import click


def _progress(json_mode: bool):
    """A live rich line (step, requests/s, p99) on a terminal; plain lines otherwise; nothing with --json."""
    if json_mode:
        return None, lambda event: None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(stderr=True), refresh_per_second=4, transient=True)

        def on_event(event: dict) -> None:
            if event["event"] == "progress":
                live.update(_progress_line(event))
            elif event["event"] == "step":
                live.console.print(_step_line(event["step"]))

        return live, on_event

    # not a terminal: progress on stdout, so stderr carries only an error line
    def plain(event: dict) -> None:
        if event["event"] == "progress":
            click.echo(_progress_line(event))
        elif event["event"] == "step":
            click.echo(_step_line(event["step"]))

    return None, plain


def _offered(offered: dict) -> str:
    return f"c={offered['concurrency']}" if "concurrency" in offered else f"rate={offered['rate_rps']:g}/s"


def _progress_line(event: dict) -> str:
    return (
        f"step {event['index']} {_offered(event['offered'])}  t={event['elapsed_s']:.0f}s  "
        f"{event['rps']:.0f} req/s  p99 {event['p99_us']} µs"
    )


def _step_line(step: dict) -> str:
    lat = step["latency_us"]
    text = (
        f"step {step['index']} {_offered(step['offered'])}: {step['throughput_rps']:.1f} req/s  "
        f"p50 {lat['p50']} µs  p99 {lat['p99']} µs  errors {sum(step['errors'].values())}  {step['verdict']}"
    )
    return text + (f" ({'; '.join(step['reasons'])})" if step["reasons"] else "")


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""

    @group.command("loadtest")
    @click.argument("repo", required=False, type=click.Path(file_okay=False))
    @click.option("--url", help="A running Triton's HTTP URL instead of a local repository.")
    @click.option("--grpc-url", help="The running Triton's gRPC HOST:PORT (default: HTTP port + 1).")
    @click.option("--model", required=True, help="The Triton model name (the variant name).")
    @click.option("--manifest", "manifest_path", type=click.Path(), help="Variant folder or manifest.json.")
    @click.option("--card", "card_uri", help="Model card for request payloads when no manifest is found.")
    @click.option("--protocol", type=click.Choice(["http", "grpc"]), default="http", show_default=True)
    @click.option("--concurrency", help="Closed loop: comma-separated concurrencies, e.g. 1,2,4,8.")
    @click.option("--rate", help="Open loop: comma-separated Poisson rates in requests/s, e.g. 100,200,400.")
    @click.option(
        "--batch", "batch_size", type=int, default=1, show_default=True, help="Batch size per request."
    )
    @click.option(
        "--duration", type=float, help="Seconds measured per step (default: until stable, max 60 s)."
    )
    @click.option(
        "--max-duration",
        type=float,
        default=60.0,
        show_default=True,
        help="Without --duration: the longest a step may run while waiting to be stable.",
    )
    @click.option(
        "--warmup", type=float, default=2.0, show_default=True, help="Seconds of unmeasured warm-up."
    )
    @click.option("--processes", type=int, default=1, show_default=True, help="Locust load processes.")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--out", "out_dir", default="results", show_default=True, type=click.Path(file_okay=False))
    @click.option("--tritonserver", type=click.Path(dir_okay=False), help="tritonserver binary to run REPO.")
    @click.option("--json", "json_mode", is_flag=True, help="Print the result document as JSON.")
    def loadtest(repo, url, grpc_url, model, manifest_path, card_uri, protocol, concurrency, rate, batch_size,
                 duration, max_duration, warmup, processes, seed, out_dir, tritonserver, json_mode) -> None:  # fmt: skip
        """Load-test a model on Triton with Locust: a concurrency or request-rate sweep with exact µs latencies."""
        from accelbench.errors import BadInputError
        from accelbench.loadtests.api import loadtest as run
        from accelbench.loadtests.profiles import LoadProfile, parse_levels

        if (concurrency is None) == (rate is None):
            raise BadInputError("give exactly one of --concurrency or --rate")
        profile = LoadProfile(
            kind="closed" if concurrency else "open", protocol=protocol,
            levels=parse_levels(concurrency or rate), duration_s=duration, max_duration_s=max_duration, warmup_s=warmup,
            processes=processes, seed=seed, batch_size=batch_size,
        )  # fmt: skip
        live, on_event = _progress(json_mode)
        command = " ".join(["accelbench", *sys.argv[1:]])
        try:
            if live is not None:
                live.start()
            doc, path = run(model=model, profile=profile, out_dir=out_dir, repo=repo, url=url, grpc_url=grpc_url,
                            manifest_path=manifest_path, card_uri=card_uri, tritonserver=tritonserver,
                            command=command, on_event=on_event)  # fmt: skip
        finally:
            if live is not None:
                live.stop()
        if json_mode:
            click.echo(json.dumps(doc, indent=2, sort_keys=True))
        else:
            invalid = sum(1 for s in doc["steps"] if s["verdict"] != "VALID")
            click.echo(f"{path}: {len(doc['steps'])} steps, {invalid} INVALID")
