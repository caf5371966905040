"""CLI commands for the models stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import json

import click

from accelbench.commands import catalog_of
from accelbench.hardware.catalog_schema import PRECISIONS

# the card module is light (stdlib only); its task list is the one source for --task
TASKS = ["embedding", "classification", "detection", "segmentation", "other"]


def _echo_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


_SHAPE_OPTION = click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="NAME:D1,D2,…",
    help="Fix a dynamic input size of a bare .onnx, e.g. x:1,3,640,640 (repeatable; the first size is the batch).",
)


@click.group("models")
def models_group() -> None:
    """Model cards, built-in benchmark models and their graph cost."""


@models_group.command("inspect")
@click.argument("model")
@click.option(
    "--batch", "batch", type=click.IntRange(min=1), default=1, show_default=True, help="Batch size."
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="fp32",
    show_default=True,
    help="Sets bytes per weight/activation element.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--top", type=click.IntRange(min=1), default=8, show_default=True, help="Op types to list.")
@_SHAPE_OPTION
def inspect_cmd(
    model: str, batch: int, precision: str, as_json: bool, top: int, shapes: tuple[str, ...]
) -> None:
    """Parameters, FLOPs and minimum bytes per inference of MODEL (builtin:NAME, card .toml, or .onnx)."""
    from accelbench.models.loader import generative_card, resolve_model
    from accelbench.models.roofline_report import model_graph_cost

    if not shapes and (card := generative_card(model)) is not None:
        _inspect_generative(card, precision, as_json)
        return
    resolved = resolve_model(model, shapes)
    cost = model_graph_cost(resolved.card, resolved.onnx_path, batch, precision)
    if as_json:
        _echo_json(
            {
                "model": resolved.card.name,
                "source": resolved.card.source,
                "onnx_path": str(resolved.onnx_path),
                "graph_cost": cost.to_detail_dict(),
            }
        )
        return
    click.echo(f"model        {resolved.card.name}  ({resolved.card.source})")
    click.echo(f"onnx         {resolved.onnx_path}")
    click.echo(f"params       {cost.params / 1e6:,.2f} M")
    click.echo(f"FLOPs        {cost.flops_per_inference / 1e9:,.3f} GFLOP per inference")
    click.echo(f"weights      {cost.weight_bytes / 1e6:,.1f} MB at {precision} (read once per batch)")
    click.echo(
        f"activations  {cost.activation_bytes_per_inference / 1e6:,.2f} MB per inference "
        f"(fused; unfused {cost.activation_bytes_unfused_per_inference / 1e6:,.1f} MB)"
    )
    click.echo(f"bytes/batch  {cost.bytes_per_batch / 1e6:,.1f} MB at batch {batch}")
    click.echo(f"ops          {cost.ops:,} that launch work, {cost.depth:,} in its longest chain (depth)")
    click.echo(f"\n{'op type':<22}{'nodes':>6}{'GFLOP':>10}{'% FLOPs':>9}{'weights MB':>12}{'act MB':>9}")
    total = cost.flops_per_inference or 1.0
    ops = sorted(cost.by_op_type.items(), key=lambda kv: (-kv[1].flops_per_inference, -kv[1].weight_bytes))
    for name, op in ops[:top]:
        click.echo(
            f"{name:<22}{op.nodes:>6}{op.flops_per_inference / 1e9:>10.3f}"
            f"{100 * op.flops_per_inference / total:>8.1f}%{op.weight_bytes / 1e6:>12.1f}"
            f"{op.activation_bytes_per_inference / 1e6:>9.2f}"
        )
    if cost.uncounted_op_types:
        click.echo(f"not counted (0 FLOPs assumed): {', '.join(cost.uncounted_op_types)}")


@models_group.command("card")
@click.argument("model", type=click.Path(dir_okay=False))
@_SHAPE_OPTION
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None, help="Write the card here.")
@click.option("--name", default=None, help="Model name (default: the file name).")
@click.option("--task", type=click.Choice(TASKS), default=None, help="Override the guessed task.")
@click.option(
    "--value",
    "values",
    multiple=True,
    metavar="NAME:V[,V…]",
    help="A fixed value for an input that is not data, e.g. sr:16000 (a sample rate; repeatable).",
)
def card_cmd(
    model: str,
    shapes: tuple[str, ...],
    out: str | None,
    name: str | None,
    task: str | None,
    values: tuple[str, ...],
) -> None:
    """Write a model card (TOML) for MODEL.onnx from its graph: tensors, batch, generator, accuracy metric."""
    from pathlib import Path

    from accelbench.models.card_writer import card_from_graph, write_card

    card_dir = Path(out).parent if out else None
    card = card_from_graph(model, shapes, name=name, task=task, card_dir=card_dir, values=values)
    text = write_card(card, out)
    if out:
        click.echo(f"card: {out}")
    else:
        click.echo(text, nl=False)


@models_group.command("rebatch")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "--out", "out", type=click.Path(dir_okay=False), required=True, help="Write the new graph here."
)
@_SHAPE_OPTION
def rebatch_cmd(model: str, out: str, shapes: tuple[str, ...]) -> None:
    """Make MODEL.onnx's fixed batch dynamic, proved by a batch of 2 against two batches of 1."""
    from accelbench.models.rebatch import rebatch

    done = rebatch(model, out, shapes)
    click.echo(
        f"{done.path}: batch {done.batch} → dynamic on {', '.join(done.tensors)}; "
        f"a batch of 2 matches two batches of 1 (max |difference| {done.max_abs_diff:.3g})"
    )


@click.command("roofline")
@click.argument("model")
@_SHAPE_OPTION
@click.option("--target", "targets", multiple=True, required=True, help="Catalog target id (repeatable).")
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True)
@click.option(
    "--batch",
    "batches",
    type=click.IntRange(min=1),
    multiple=True,
    help="Batch size (repeatable; default 1).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Write a roofline chart (PNG)."
)
@click.pass_context
def roofline_cmd(
    ctx: click.Context,
    model: str,
    targets: tuple[str, ...],
    precision: str,
    batches: tuple[int, ...],
    as_json: bool,
    plot_path: str | None,
    shapes: tuple[str, ...],
) -> None:
    """Projected roofline of MODEL per target and batch: intensity, bound, latency and throughput bounds."""
    from accelbench.models.loader import generative_card, resolve_model
    from accelbench.models.roofline_report import plot_roofline, roofline_document, roofline_points

    catalog = catalog_of(ctx)
    chosen = [catalog.get(t) for t in targets]  # unknown ids fail before any model work
    if not shapes and (card := generative_card(model)) is not None:
        _roofline_generative(card, chosen, list(batches or (1, 8)), precision, as_json)
        return
    resolved = resolve_model(model, shapes)
    cost, points = roofline_points(
        resolved.card, resolved.onnx_path, chosen, list(batches or (1,)), precision
    )
    if plot_path:
        plot_roofline(points, resolved.card.name, plot_path)
    if as_json:
        _echo_json(roofline_document(resolved.card, resolved.onnx_path, cost, points))
        return
    click.echo(
        f"{resolved.card.name}: {cost.flops_per_inference / 1e9:.3f} GFLOP/inference, "
        f"weights {cost.weight_bytes / 1e6:.1f} MB, activations "
        f"{cost.activation_bytes_per_inference / 1e6:.2f} MB/inference at {precision}"
    )
    click.echo("projected (roofline), not measured:")
    click.echo(
        f"{'target':<24}{'batch':>6}{'FLOP/B':>10}{'ridge':>9}{'bound':>9}{'latency≥ ms':>13}{'inf/s≤':>14}"
    )
    for p in points:
        click.echo(
            f"{p.target_id:<24}{p.batch:>6}{p.intensity:>10.1f}{p.ridge:>9.1f}{p.bound:>9}"
            f"{p.latency_lower_bound_s * 1e3:>13.4f}{p.throughput_upper_bound_ips:>14,.0f}"
        )
    if plot_path:
        click.echo(f"plot: {plot_path}")


def _inspect_generative(card, precision: str, as_json: bool) -> None:
    from accelbench.models.generative import kv_dtype
    from accelbench.models.llm_roofline import describe

    spec = card.generative
    cost = spec.graph_cost(precision, kv_dtype=kv_dtype(precision))
    if as_json:
        _echo_json(
            {"model": card.name, "source": card.source, "generative": spec.to_dict(), "graph_cost": cost}
        )
        return
    click.echo(f"model        {card.name}  ({card.source}, text-generation)")
    for line in describe(spec, precision, cost["weight_bytes"]):
        click.echo(line)


def _roofline_generative(card, targets: list, batches: list[int], precision: str, as_json: bool) -> None:
    from accelbench.models.generative import kv_dtype
    from accelbench.models.llm_roofline import phase_points

    spec = card.generative
    cost = spec.graph_cost(precision, kv_dtype=kv_dtype(precision))
    points = phase_points(spec, targets, batches, precision)
    if as_json:
        _echo_json(
            {
                "kind": "projected-roofline",
                "model": card.name,
                "graph_cost": cost,
                "points": [p.to_dict() for p in points],
            }
        )
        return
    click.echo(
        f"{card.name}: weights {cost['weight_bytes'] / 1e6:.1f} MB, KV cache "
        f"{cost['kv_cache_bytes_per_token']:,} B/token at {precision}; ISL {spec.reference_isl}, "
        f"decode context {spec.decode_context:.0f}"
    )
    click.echo("projected (roofline), not measured:")
    click.echo(f"{'target':<24}{'phase':<9}{'tokens':>7}{'bound':>9}{'latency≥ ms':>13}{'tokens/s≤':>14}")
    for p in points:
        what = "prompt" if p.phase == "prefill" else "seqs"
        latency = p.point.latency_lower_bound_s * 1e3
        click.echo(
            f"{p.point.target_id:<24}{p.phase:<9}{p.tokens:>7}{p.point.bound:>9}{latency:>13.4f}"
            f"{p.point.throughput_upper_bound_ips:>14,.0f}  ({p.tokens} {what})"
        )


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
    group.add_command(models_group)
    group.add_command(roofline_cmd)
