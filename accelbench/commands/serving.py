"""CLI commands for the serving stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import json
import os
import signal

import click

from accelbench.errors import BadInputError, ServerError


def _parse_set(values: tuple[str, ...]) -> dict:
    """``KEY=VALUE`` pairs; values are JSON when they parse as JSON (numbers, lists), else strings."""
    overrides: dict = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise BadInputError(f"--set {item!r}: expected KEY=VALUE")
        try:
            overrides[key.strip()] = json.loads(raw)
        except ValueError:
            overrides[key.strip()] = raw
    return overrides


@click.command("repository")
@click.argument("variant_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Repository folder to write."
)
@click.option(
    "--flavor",
    type=click.Choice(["local", "ngc", "torch-cuda"]),
    default="local",
    show_default=True,
    help="local: python backend (onnxruntime) for the embedded tritonserver; ngc: native backends for the NGC "
    "container; torch-cuda: python backend running the graph with PyTorch on the GPU (CUDA graphs, DLPack).",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a per-target default, e.g. max_batch_size=16, instance_count=2, "
    "preferred_batch_sizes=[4,8], max_queue_delay_us=500, intra_op_threads=2, warmup=false; torch-cuda: "
    "device=cpu, dtype=bfloat16, torch_mode=compile.",
)
def repository_cmd(
    variant_dirs: tuple[str, ...], out_dir: str, flavor: str, settings: tuple[str, ...]
) -> None:
    """Write a Triton model repository from quantized variant folders."""
    from accelbench.serving.repository import write_repository

    for model in write_repository(list(variant_dirs), out_dir, flavor, _parse_set(settings)):
        click.echo(f"{model.path}  ({model.backend})")
        for note in model.notes:
            click.echo(f"  note: {note}")


def _say_leftovers(line: str | None) -> None:
    if line:
        click.echo(f"accelbench: {line}", err=True)


_PORT = click.IntRange(1, 65535)  # out of range used to reach socket.bind and end in a traceback


@click.command("serve")
@click.argument("repo", type=click.Path(file_okay=False))
@click.option("--http-port", type=_PORT, default=None, help="HTTP port (default: a free one).")
@click.option("--grpc-port", type=_PORT, default=None, help="gRPC port (default: a free one).")
@click.option("--metrics-port", type=_PORT, default=None, help="Metrics port (default: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--tritonserver", "binary", type=click.Path(dir_okay=False), default=None, help="tritonserver to run."
)
@click.option("--model", "models", multiple=True, help="Load only this model (repeatable; default: all).")
@click.option("--log-file", type=click.Path(dir_okay=False), default=None, help="Append the server log here.")
def serve_cmd(
    repo: str,
    http_port: int | None,
    grpc_port: int | None,
    metrics_port: int | None,
    host: str,
    binary: str | None,
    models: tuple[str, ...],
    log_file: str | None,
) -> None:
    """Serve a model repository with tritonserver in the foreground until Ctrl-C."""
    from accelbench.processes import record_children_in
    from accelbench.serving.server import LocalTriton

    if os.path.isdir(repo):  # what a killed earlier `serve` of this repository left running ends first
        _say_leftovers(record_children_in(repo))
    # SIGTERM takes the same clean path as Ctrl-C, so the server is stopped in LocalTriton's finally
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    server = LocalTriton(
        repo,
        http_port,
        grpc_port,
        binary,
        host=host,
        metrics_port=metrics_port,
        models=list(models),
        log_path=log_file,
    )
    with server:
        # Ctrl-C is a clean stop from the first line on: a client that waits for the READY lines may send it
        # before the wait loop below has started (seen under load)
        try:
            click.echo(f"tritonserver {server.server_version} (pid {server.pid})")
            click.echo(f"HTTP     {server.http_url}")
            click.echo(f"gRPC     {server.grpc_url}")
            click.echo(f"metrics  {server.metrics_url}")
            for model in server.models():
                state = model.get("state") or "UNLOADED"
                click.echo(f"{state:<8} {model['name']} (version {model.get('version', '?')})")
            click.echo("serving; Ctrl-C stops", err=True)
            while not server.wait(1.0):
                pass
        except KeyboardInterrupt:
            click.echo("stopping tritonserver", err=True)
            return
        raise ServerError(f"tritonserver exited on its own: {server.exit_reason()}")


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
    group.add_command(repository_cmd)
    group.add_command(serve_cmd)
