"""CLI commands for the quantize (models) stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("quantize")
@click.argument("model")
@click.option("--target", "target_id", required=True, help="Catalog target id (see `accelbench targets`).")
@click.option(
    "--precision",
    type=click.Choice(["fp32", "fp16", "bf16", "int8", "int4", "fp8"]),
    default=None,
    help="Variant precision; default: the target toolchain's (int8 for CPU and TensorRT, bf16 for Neuron; "
    "fp32 for a generative model, which also takes int4 and int8 on CPU targets; on accelerators its recipe's: "
    "fp8 on Ada/Hopper, int4 on A100 and Jetson Orin, bf16 on Inferentia2).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="variants",
    show_default=True,
    help="Folder that receives one variant folder per (model, target, precision).",
)
@click.option(
    "--recipe",
    default=None,
    help="Override the default recipe: ort-dynamic-int8-per-channel, ort-static-qdq-int8 (CPU); "
    "qdq-int8-symmetric-smoothquant, qdq-int8-symmetric (TensorRT INT8). See docs/quantization.md.",
)
@click.option(
    "--reference",
    type=click.Path(dir_okay=False),
    default=None,
    help="The float graph of a MODEL that is already quantized: its FP32 variant and the gate's reference.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the manifests as JSON.")
@click.pass_context
def quantize_command(
    ctx: click.Context,
    model: str,
    target_id: str,
    precision: str | None,
    out_dir: str,
    recipe: str | None,
    reference: str | None,
    as_json: bool,
) -> None:
    """Quantize MODEL (builtin:NAME, a card .toml, hf:ID_OR_DIR or an .onnx) for one hardware target.

    Writes the FP32 reference and the requested variant, each with an accuracy verdict against FP32.
    """
    from accelbench.documents import Accuracy, to_dict
    from accelbench.models.quantize import QuantizeRequest, quantize

    request = QuantizeRequest(
        model=model,
        target=target_id,
        precision=precision,
        out_dir=Path(out_dir),
        recipe=recipe,
        catalog_path=(ctx.obj or {}).get("catalog_path"),
        reference=Path(reference) if reference else None,
    )
    manifests = quantize(request)
    if precision and recipe is None and reference is None:  # what `accelbench run` would make: it reuses them
        from accelbench.experiment.pipeline import record_variants

        record_variants(Path(out_dir), model, target_id, precision, manifests)
    if as_json:
        click.echo(json.dumps([to_dict(m) for m in manifests], indent=2, sort_keys=True))
        return
    for m in manifests:
        acc = m.accuracy or Accuracy()
        click.echo(
            f"{m.name}: {m.recipe} → {Path(out_dir) / m.name / m.model_file}  "
            f"accuracy {acc.metric} {acc.value} (tolerance {acc.tolerance}) {acc.verdict}"
        )
        if m.engine and m.engine.status == "must-build-on-target":
            click.echo(
                f"  engine NOT built here: it must be built on {m.engine.host_requirement}; "
                f"run {Path(out_dir) / m.name / (m.engine.script or '')} there"
            )


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
    group.add_command(quantize_command)
