"""CLI commands for the hardware stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import click

from accelbench.commands import catalog_of

if TYPE_CHECKING:
    from accelbench.hardware.catalog import TargetSummary


def _echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, default=str))


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


@click.group("targets", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def targets_group(ctx: click.Context, as_json: bool) -> None:
    """List the hardware catalog (add or override entries with --catalog FILE)."""
    if ctx.invoked_subcommand is not None:
        return
    from accelbench.hardware.catalog import target_summary

    catalog = catalog_of(ctx)
    rows = [target_summary(t) for t in catalog.targets.values()]
    if as_json:
        _echo_json(
            {
                "schema": "accelbench.targets/1",
                "baseline": catalog.baseline_id,
                "files": list(catalog.files),
                "targets": [dataclasses.asdict(row) for row in rows],
            }
        )
        return
    _print_table(rows, catalog.baseline_id)


def _print_table(rows: list[TargetSummary], baseline_id: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"accelbench targets (baseline {baseline_id}; dense peaks; $/h per accelerator)")
    for header in ("id", "name", "mem GB", "GB/s", "INT8 TOPS", "FP16 TFLOPS", "$/hour", "basis", "as of"):
        table.add_column(header, no_wrap=header in ("id", "$/hour"))
    for row in rows:
        table.add_row(
            row.id,
            row.name,
            _fmt(row.memory_gb),
            _fmt(row.memory_bw_gbs),
            _fmt(row.int8_tops),
            _fmt(row.fp16_tflops),
            _fmt(row.usd_per_hour),
            row.cost_basis,
            row.cost_as_of or "-",
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # pipes and tests: do not wrap ids mid-word at 80 columns
    console.print(table)


@targets_group.command("show")
@click.argument("target_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def show_cmd(ctx: click.Context, target_id: str, as_json: bool) -> None:
    """Show one target with every figure and its source."""
    from accelbench.hardware.catalog import target_summary

    catalog = catalog_of(ctx)
    target = catalog.get(target_id)
    data = target.to_dict()
    published = [dataclasses.asdict(p) for p in catalog.published_for(target.id)]
    if as_json:
        _echo_json({**data, "summary": dataclasses.asdict(target_summary(target)), "published": published})
        return
    for key in (
        "id",
        "name",
        "vendor",
        "kind",
        "toolchain",
        "compute_capability",
        "memory_gb",
        "memory_bw_gbs",
        "tdp_w",
        "verification",
    ):
        if data.get(key) is not None:
            click.echo(f"{key:20} {data[key]}")
    click.echo(f"{'peak_tflops':20} " + ", ".join(f"{k} {v:g}" for k, v in data["peak_tflops"].items()))
    for block in ("price", "capex"):
        if data.get(block):
            click.echo(f"{block}:")
            for key, value in data[block].items():
                if value not in (None, "") and key != "target_id":
                    click.echo(f"  {key:28} {value}")
    if data["mig_profiles"]:
        click.echo("mig_profiles:        " + ", ".join(m["name"] for m in data["mig_profiles"]))
    click.echo(f"{'triton':20} {data['triton']}")
    for key, value in data["extra"].items():
        click.echo(f"{key:20} {value}")
    click.echo("sources:")
    for key, value in data["sources"].items():
        click.echo(f"  {key:28} {value}")
    none = "none (projections use its chip's, else its toolchain's)"
    click.echo(f"published results: {len(published) or none}")
    for p in published:
        click.echo(
            f"  {p['model']} {p['precision']} batch {p['batch']}: {p['throughput_ips']:g} inf/s "
            f"({p['software']}; {p['date']}) {p['source']}"
        )


@click.command("probe")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def probe_cmd(ctx: click.Context, as_json: bool) -> None:
    """Describe this host: CPU, memory, OS, packages, GPUs, Jetson, Neuron, and its catalog id."""
    from accelbench.hardware.probe import probe_host

    info = probe_host(known_ids=list(catalog_of(ctx).targets))
    if as_json:
        _echo_json(info)
        return
    cpu = info["cpu"]
    click.echo(
        f"cpu        {cpu['model']} ({cpu['cores_physical']} physical / {cpu['cores_logical']} logical)"
    )
    click.echo(f"memory     {(info['memory_total_bytes'] or 0) / 1e9:.1f} GB")
    click.echo(f"os         {info['os']['distribution'] or info['os']['platform']}")
    click.echo(f"python     {info['python']['version']}")
    present = {k: v for k, v in info["packages"].items() if v}
    click.echo("packages   " + ", ".join(f"{k} {v}" for k, v in present.items()))
    for section in ("nvidia", "jetson", "neuron"):
        part = info[section]
        click.echo(
            f"{section:10} "
            + (
                json.dumps({k: v for k, v in part.items() if k != "present"}, default=str)
                if part["present"]
                else part["reason"]
            )
        )
    match = info["catalog_match"]
    click.echo(f"catalog    {match['id']} ({match['reason']})")


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
    group.add_command(targets_group)
    group.add_command(probe_cmd)
