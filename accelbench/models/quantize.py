"""``accelbench quantize``: one accuracy-checked variant folder per (model, target, precision).

For a target the user asks for one precision (default: the toolchain's); the FP32 reference variant is always
written beside it. Each folder gets the held-out FP32 reference data, the accuracy gate's verdict and a
manifest (``accelbench.variant/1``). A rerun with the same source, recipe and toolchain reuses a folder whose
files still match their hashes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.errors import BadInputError
from accelbench.models import accuracy
from accelbench.models.manifest import Manifest, read_manifest, variant_name, verify_files, write_manifest
from accelbench.models.toolchains import VariantOptions, VariantResult, toolchain_for
from accelbench.models.toolchains import onnxruntime as ort_toolchain
from accelbench.util import sha256_file

CALIBRATION_SEED = 0
HELD_OUT_SEED = 1  # must differ from the calibration seed: the gate judges on samples it was not tuned on
CALIBRATION_SAMPLES = 32
HELD_OUT_SAMPLES = 32


@dataclass
class QuantizeRequest:
    model: str  # builtin:NAME, a card .toml, hf:..., or an .onnx file
    target: str  # catalog id
    precision: str | None = None
    out_dir: Path = Path("variants")
    recipe: str | None = None
    catalog_path: str | None = None
    calibration_samples: int = CALIBRATION_SAMPLES
    held_out_samples: int = HELD_OUT_SAMPLES
    options: dict[str, Any] = field(
        default_factory=dict
    )  # extra VariantOptions fields (probe, dla_core, ...)


def quantize(request: QuantizeRequest) -> list[Manifest]:
    """Write the FP32 reference and the requested variant; returns their manifests (reference first)."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.models.loader import generative_card, resolve_model

    target = load_catalog(request.catalog_path).get(request.target)
    if (card := generative_card(request.model)) is not None:
        from accelbench.models.quantize_llm import quantize_generative  # torch/optimum for these only

        return quantize_generative(request, target, card)
    toolchain = toolchain_for(target)  # before any work: a TPU target fails fast
    resolved = resolve_model(request.model)
    precision = request.precision or toolchain.default_precision(target)
    if precision not in toolchain.precisions(target):
        raise BadInputError(
            f"precision {precision!r} is not available for {target.id} ({target.toolchain}); "
            f"choose one of {', '.join(toolchain.precisions(target))}"
        )
    card = resolved.card
    # Neuron without its SDK ends in the one line that says where to compile: no progress noise before it
    quiet = target.toolchain == "neuron" and toolchain.available() is not None
    held_out = _stack(_make_inputs(card, request.held_out_samples, HELD_OUT_SEED))
    options = VariantOptions(
        recipe=request.recipe,
        calibration_seed=CALIBRATION_SEED,
        # the sizes the card fixes; a -1 (a token sequence length) stays dynamic in the variant
        input_shapes={spec.name: list(spec.shape) for spec in card.inputs},
        **request.options,
    )
    ctx = _Context(request, resolved, target, held_out, quiet)

    manifests = []
    # the requested variant first: a missing SDK (Neuron) then fails before any other work, in one line
    if precision != "fp32" or request.recipe:
        if _needs_calibration(toolchain, precision, request.recipe):
            options.calibration = _make_inputs(card, request.calibration_samples, CALIBRATION_SEED)
        manifests.append(ctx.variant(precision, toolchain, options))
    manifests.insert(0, ctx.variant("fp32", ort_toolchain, VariantOptions(recipe="fp32-reference")))
    return manifests


def progress(line: str) -> None:
    """Progress for long steps goes to stderr so that --json output stays clean."""
    print(f"accelbench: {line}", file=sys.stderr, flush=True)


@dataclass
class _Context:
    request: QuantizeRequest
    resolved: Any
    target: Any
    held_out: dict[str, np.ndarray]
    quiet: bool = False
    _reference: dict[str, np.ndarray] | None = None

    @property
    def reference_outputs(self) -> dict[str, np.ndarray]:
        """FP32 outputs on the held-out samples, computed when a variant is first made (a rerun that
        reuses every folder never runs the model)."""
        if self._reference is None:
            if not self.quiet:
                progress(
                    f"{self.resolved.card.name}: FP32 reference outputs on "
                    f"{len(next(iter(self.held_out.values())))} held-out samples …"
                )
            self._reference = accuracy.run_onnx_cpu(self.resolved.onnx_path, self.held_out)
        return self._reference

    def variant(self, precision: str, toolchain: Any, options: VariantOptions) -> Manifest:
        card = self.resolved.card
        name = variant_name(card.name, self.target.id, precision)
        out = Path(self.request.out_dir) / name
        source = {"uri": self.request.model, "sha256": sha256_file(self.resolved.onnx_path)}
        reused = reusable_variant(out, source, options.recipe)
        if reused is not None:
            progress(f"{name}: up to date, reused")
            return reused
        options.work_dir = options.work_dir or Path(self.request.out_dir) / ".work" / card.name
        # reference data first: scripts written for other hosts (compile_neuron.py) trace with its inputs
        accuracy.write_reference(out, self.held_out, self.reference_outputs)
        if not (self.target.toolchain == "neuron" and toolchain.available() is not None):
            progress(f"{name}: making the {precision} variant ({options.recipe or 'default recipe'}) …")
        result: VariantResult = toolchain.make_variant(self.resolved, self.target, precision, out, options)
        gate = self._gate(out, result)
        progress(
            f"{name}: accuracy {gate['metric']} {gate['value']} (worst {gate['worst']}) → {gate['verdict']}"
        )
        for note in result.notes:
            progress(f"{name}: {note}")
        manifest = {
            "name": name,
            "model": card.name,
            "card": card.to_dict(),
            "source": source,
            "target": self.target.id,
            "precision": precision,
            "recipe": result.recipe,
            "format": result.format,
            "model_file": result.model_file,
            "toolchain": result.toolchain,
            "inputs": [t.to_dict() for t in card.inputs],
            "outputs": _output_specs(card, self.resolved.onnx_path),
            "calibration": result.calibration,
            "accuracy": gate,
            "graph_cost": _graph_cost(card, self.resolved.onnx_path, precision),
            "engine": result.engine,
            "attempts": result.attempts,
        }
        return write_manifest(out, manifest)

    def _gate(self, out: Path, result: VariantResult) -> dict[str, Any]:
        card = self.resolved.card
        metric, tolerance = card.accuracy.metric, card.accuracy.tolerance
        onnx_file = out / "model.onnx"
        if not onnx_file.is_file():
            return accuracy.not_run(metric, tolerance, f"{result.format} cannot run on this host")
        output = card.metric_output or next(iter(self.reference_outputs))
        gate = accuracy.gate(onnx_file, self.held_out, self.reference_outputs, metric, tolerance, output)
        if result.format != "onnx":
            gate["reason"] += f"; measured on the ONNX the {result.format} was built from"
        return gate


def reusable_variant(out: Path, source: dict[str, str], recipe: str | None) -> Manifest | None:
    """The existing manifest when the folder was made from the same source and recipe and is intact."""
    if not (out / "manifest.json").is_file():
        return None
    try:
        old = read_manifest(out)
    except BadInputError:
        return None
    same = old["source"] == source and (recipe is None or old["recipe"] == recipe)
    return old if same and not verify_files(out, old) else None


def _needs_calibration(toolchain: Any, precision: str, recipe: str | None) -> bool:
    # static INT8 (CPU static QDQ, TensorRT's QDQ) needs samples; a dynamic default may fall back to static,
    # and every recipe's result is test-run on a sample
    return precision == "int8"


def _make_inputs(card: Any, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    from accelbench.models.inputs import make_inputs

    return make_inputs(card, batch_size=1, count=count, seed=seed)


def _stack(feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([f[name] for f in feeds]) for name in feeds[0]}


def _output_specs(card: Any, onnx_path: os.PathLike) -> list[dict[str, Any]]:
    if card.outputs:
        return [t.to_dict() for t in card.outputs]
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    specs = []
    for value in graph.output:
        tt = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        specs.append(
            {
                "name": value.name,
                "dtype": onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name,
                "shape": [-1, *dims[1:]] if dims else [],
            }
        )
    return specs


def _graph_cost(card: Any, onnx_path: os.PathLike, precision: str) -> dict[str, Any] | None:
    from accelbench.models.roofline_report import model_graph_cost

    # the card fixes dynamic non-batch dims (e.g. the sequence length of an hf: export)
    cost = model_graph_cost(card, onnx_path, 1, precision).to_dict()
    keys = ("params", "flops_per_inference", "weight_bytes", "activation_bytes_per_inference", "precision")
    return {k: cost[k] for k in keys if k in cost}
