"""Projected roofline of a model on catalog targets: one point per (target, batch), and the classic chart.

Everything here is a projection from the graph cost and catalog peaks, labelled so; nothing is measured.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.roofline import RooflinePoint, roof_polyline, roofline_point
from accelbench.models.cards import ModelCard
from accelbench.models.graph_cost import GraphCost, graph_cost
from accelbench.util import atomic_write_bytes


def card_input_shapes(card: ModelCard) -> dict[str, list[int]]:
    """Input shapes from the card, a dynamic sequence dim filled from the tokens generator's seq_len."""
    seq = card.generator.seq_len if card.generator.kind == "tokens" else None
    shapes = {}
    for spec in card.inputs:
        dims = list(spec.shape)
        if len(dims) > 1 and dims[1] == -1 and seq and spec.batch_axis == 0:
            dims[1] = seq
        shapes[spec.name] = dims
    return shapes


def model_graph_cost(card: ModelCard, onnx_path: str | os.PathLike, batch: int, precision: str) -> GraphCost:
    """The graph cost at ``batch``; a model whose batch is fixed (or absent) is counted at its own."""
    if card.batchable:
        axes = None  # every input and output batches on axis 0
    else:
        batch = card.run_batch
        axes = {spec.name: spec.batch_axis for spec in card.inputs}
    values = {spec.name: spec.value for spec in card.inputs if spec.value is not None}
    return graph_cost(
        onnx_path,
        batch_size=batch,
        precision=precision,
        input_shapes=card_input_shapes(card),
        batch_axes=axes,
        values=values,
    )


def roofline_points(
    card: ModelCard,
    onnx_path: str | os.PathLike,
    targets: Sequence[HardwareTarget],
    batches: Sequence[int],
    precision: str,
) -> tuple[GraphCost, list[RooflinePoint]]:
    """Graph cost at the first batch (FLOPs and bytes per inference do not depend on it) and one point each."""
    cost = model_graph_cost(card, onnx_path, batches[0], precision)
    points = [
        roofline_point(
            cost.flops_per_inference,
            cost.activation_bytes_per_inference,
            batch,
            target,
            precision,
            weight_bytes=cost.weight_bytes,
        )
        for target in targets
        for batch in batches
    ]
    return cost, points


def roofline_document(
    card: ModelCard, onnx_path: Path, cost: GraphCost, points: list[RooflinePoint]
) -> dict[str, Any]:
    return {
        "kind": "projected-roofline",
        "model": card.name,
        "onnx_path": str(onnx_path),
        "graph_cost": cost.to_dict(),
        "points": [p.to_dict() for p in points],
    }


def plot_roofline(points: Sequence[RooflinePoint], model_name: str, path: str | os.PathLike) -> Path:
    """Log-log chart: per target a bandwidth slope and a compute ceiling, and the model's points per batch."""
    import matplotlib

    matplotlib.use("Agg")  # no display here; and never pick up an interactive backend in a server
    import io

    import matplotlib.pyplot as plt

    intensities = [p.intensity for p in points if math.isfinite(p.intensity)] + [p.ridge for p in points]
    lo, hi = min(intensities) / 10, max(intensities) * 10
    fig, ax = plt.subplots(figsize=(8, 5.5))
    by_target: dict[str, list[RooflinePoint]] = {}
    for p in points:
        by_target.setdefault(p.target_id, []).append(p)
    for i, (target_id, pts) in enumerate(by_target.items()):
        color = f"C{i % 10}"
        peak, bw = pts[0].peak_flops_per_s, pts[0].bandwidth_bytes_per_s
        xs, ys = zip(*roof_polyline(peak, bw, lo, hi), strict=True)
        ax.loglog(xs, [y / 1e12 for y in ys], color=color, label=f"{target_id} ({pts[0].precision})")
        for p in pts:
            attained = p.flops_per_batch / p.latency_lower_bound_s / 1e12
            ax.scatter([p.intensity], [attained], color=color, zorder=3)
            ax.annotate(
                f"b{p.batch}",
                (p.intensity, attained),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=8,
                color=color,
            )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"{model_name}: projected roofline (not measured)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    out = Path(path)
    atomic_write_bytes(out, buffer.getvalue())
    return out
