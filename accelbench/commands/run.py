"""CLI commands for the run stage (init, run, validate, plan). Thin: parse options, call the library, print."""

from __future__ import annotations

import json
import sys

import click

from accelbench.commands import token_option
from accelbench.commands.console import library_output
from accelbench.commands.load_options import build, knob_options
from accelbench.loadtests.profiles import LoadPlan


@click.command("init")
@click.argument("path", required=False, default="accelbench.toml", type=click.Path())
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init_cmd(path: str, force: bool) -> None:
    """Write a commented example experiment spec (default ./accelbench.toml)."""
    from accelbench.experiment.spec import write_example_spec

    written = write_example_spec(path, force=force)
    click.echo(f"wrote {written}; edit it, then: accelbench run {written}")


@click.command("run")
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False), help="Output folder (overrides the spec's)."
)
@click.option("--target", "target_id", help="Run only this target of the spec, measured on this host.")
@click.option(
    "--quiet",
    is_flag=True,
    help="No progress lines; print only where the report is (as `accelbench -q run`).",
)
@click.option(
    "--push",
    "push_url",
    default=None,
    metavar="URL",
    help="Also send each result to this results server as its sweep finishes (accelbench server).",
)
@token_option("push")
@knob_options(LoadPlan, defaults=False, note=" Overrides the spec's load.{name}.")
@click.pass_context
def run_cmd(
    ctx: click.Context,
    spec: str | None,
    out_dir: str | None,
    target_id: str | None,
    quiet: bool,
    push_url: str | None,
    token: str | None,
    repeats: int | None,
    retries: int | None,
) -> None:
    """Quantize, accuracy-gate, serve, load-test and report, resuming what finished.

    Without SPEC, runs the built-in default: minilm-l6 and resnet50 (FP32, INT8) measured on this CPU
    through the bundled Triton, with the A100 baseline and L4, L40S, Jetson AGX Orin, inf2.xlarge projected.
    """
    from accelbench.experiment.pipeline import run_experiment
    from accelbench.experiment.progress import make_progress
    from accelbench.experiment.spec import load_spec

    experiment = load_spec(spec)
    if target_id:
        experiment = experiment.only_target(target_id)
    if repeats is not None or retries is not None:
        from dataclasses import replace

        given = {k: v for k, v in (("repeats", repeats), ("retries", retries)) if v is not None}
        experiment = replace(experiment, load=build(LoadPlan, {**experiment.load.__dict__, **given}))
    from accelbench.processes import record_children_in

    root = ctx.find_root().obj or {}
    quiet = quiet or bool(root.get("quiet"))
    if quiet:  # the model stage's progress records as well as the pipeline's lines
        library_output(quiet=True)
    progress = make_progress(quiet=quiet, verbose=bool(root.get("verbose")))
    # a killed earlier run on this folder may have left its tritonserver running: end it, say so
    left = record_children_in(out_dir or str(experiment.out))
    if left:
        click.echo(f"accelbench run: {left}", err=True)
    sink = None
    if push_url:
        import os

        from accelbench.client.push import PushSink

        results_dir = os.path.join(out_dir or str(experiment.out), "results")
        sink = PushSink(push_url, token, results_dir, lambda line: click.echo(line, err=True))
    try:
        outcome = run_experiment(
            experiment,
            out_dir=out_dir,
            catalog_path=(ctx.obj or {}).get("catalog_path"),
            progress=progress,
            command=" ".join(["accelbench", *sys.argv[1:]]),
            sink=sink,
        )
    finally:
        if sink is not None:
            sink.close()
    for line in outcome.written:  # engine = "vllm" on a GPU target: what that host runs
        click.echo(line)
    if outcome.result_paths or not outcome.written:
        click.echo(f"report: {outcome.report_path}")


@click.command("validate")
@click.argument("variant_dir", type=click.Path(exists=False, file_okay=False))
@click.option(
    "--target", "target_id", required=True, help="The Jetson catalog id, e.g. jetson-agx-orin-64gb."
)
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="Also write JUnit XML here.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.option("--latency-budget-ms", type=float, default=None, help="p99 budget at batch 1 (default: none).")
@click.option("--requests", "request_count", type=int, default=200, show_default=True, help="Timed requests.")
@click.option(
    "--tegrastats", "tegrastats_file", type=click.Path(dir_okay=False), help="Recorded tegrastats log."
)
@click.option("--nv-tegra-release", "release_file", type=click.Path(dir_okay=False), help="Recorded file.")
@click.option("--nvpmodel", "nvpmodel_file", type=click.Path(dir_okay=False), help="Recorded `nvpmodel -q`.")
@click.option(
    "--jetson-clocks", "clocks_file", type=click.Path(dir_okay=False), help="Recorded --show output."
)
@click.option(
    "--device-model", "model_file", type=click.Path(dir_okay=False), help="Recorded device-tree model."
)
@click.pass_context
def validate_cmd(
    ctx: click.Context,
    variant_dir: str,
    target_id: str,
    junit_path: str | None,
    as_json: bool,
    latency_budget_ms: float | None,
    request_count: int,
    tegrastats_file: str | None,
    release_file: str | None,
    nvpmodel_file: str | None,
    clocks_file: str | None,
    model_file: str | None,
) -> None:
    """Check a variant on a Jetson: versions, engine load, outputs, p99, memory, power. PASS or FAIL."""
    from accelbench.experiment.validate import JetsonInputs, render_text, validate_variant, write_junit

    inputs = JetsonInputs(
        nv_tegra_release=release_file,
        device_model=model_file,
        nvpmodel=nvpmodel_file,
        jetson_clocks=clocks_file,
        tegrastats=tegrastats_file,
    )
    verdict = validate_variant(
        variant_dir,
        target_id,
        inputs=inputs,
        latency_budget_ms=latency_budget_ms,
        request_count=request_count,
        catalog_path=(ctx.obj or {}).get("catalog_path"),
    )
    if junit_path:
        write_junit(verdict, junit_path)
    click.echo(json.dumps(verdict.to_dict(), indent=2, sort_keys=True) if as_json else render_text(verdict))
    ctx.exit(0 if verdict.passed else 1)


@click.group("plan")
def plan_group() -> None:
    """Plan runs on other hosts."""


@plan_group.command("cloud")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", default="sky-tasks", show_default=True, type=click.Path(file_okay=False))
@click.option(
    "--bucket", default=None, help="Object-store URI to collect results in (e.g. s3://my-bucket/ab)."
)
@click.option(
    "--accelbench-spec", "pip_spec", default=None, help="pip requirement for accelbench on the host."
)
@click.option(
    "--server",
    default=None,
    help="A results server running the campaign: tasks run `accelbench agent --once` against it, "
    "and a Kubernetes Job per target is written too.",
)
@click.pass_context
def plan_cloud_cmd(
    ctx: click.Context, spec: str, out_dir: str, bucket: str | None, pip_spec: str | None, server: str | None
) -> None:
    """Write one SkyPilot task YAML per cloud target in SPEC (run each with `sky launch FILE`).

    With --server, one task (and one Kubernetes Job) per measured target of SPEC, each running the campaign
    agent for its target; submit the campaign with `accelbench submit SPEC --server URL`.
    """
    if server and not server.startswith(("http://", "https://")):
        raise click.BadParameter(f"{server!r} is not an http(s) URL", param_hint="--server")
    from accelbench.experiment.cloud import write_cloud_plan
    from accelbench.experiment.spec import load_spec

    written = write_cloud_plan(
        load_spec(spec),
        spec,
        out_dir,
        bucket=bucket,
        pip_spec=pip_spec,
        catalog_path=(ctx.obj or {}).get("catalog_path"),
        server=server.rstrip("/") if server else None,
    )
    for path, why in written:
        click.echo(f"{path}" if why is None else f"skipped: {why}")


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
    for command in (init_cmd, run_cmd, validate_cmd, plan_group):
        group.add_command(command)
