"""``accelbench quantize``: one accuracy-checked variant folder per (model, target, precision).

For a target the user asks for one precision (default: the toolchain's); the FP32 reference variant is always
written beside it. Each folder gets the held-out FP32 reference data, the accuracy gate's verdict and a
manifest (``accelbench.variant/1``). A rerun with the same source, recipe and toolchain reuses a folder whose
files still match their hashes.

Samples follow the card's batch (one run of the model each: its fixed batch, or one sample); recurrent state
inputs (``state_from``) are chained through the FP32 model, so calibration and the gate see the states of a
stream. A source graph that is already quantized (``intake.quantized_ops``) is kept as the INT8 variant,
not quantized again; it has no FP32 variant and the gate no float reference unless one is given
(``--reference FP32.onnx`` or the card's ``reference``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.hardware.catalog import HardwareTarget, load_catalog
from accelbench.models import accuracy
from accelbench.models.inputs import make_inputs
from accelbench.models.intake import check_onnx_file, copy_model, quantized_ops
from accelbench.models.loader import generative_card, resolve_model
from accelbench.models.manifest import variant_name, write_manifest
from accelbench.models.quantize_llm import quantize_generative
from accelbench.models.roofline_report import model_graph_cost
from accelbench.models.toolchains import VariantOptions, VariantResult, llm_recipes, toolchain_for
from accelbench.models.toolchains import onnxruntime as ort_toolchain
from accelbench.models.variants import QuantizeRequest, progress, reusable_variant
from accelbench.util import sha256_file

CALIBRATION_SEED = 0
HELD_OUT_SEED = 1  # must differ from the calibration seed: the gate judges on samples it was not tuned on
AS_QUANTIZED_RECIPE = "as-quantized"  # the INT8 variant of a source that is already quantized


def quantize(request: QuantizeRequest) -> list[VariantManifest]:
    """Write the FP32 reference and the requested variant; returns their manifests (reference first)."""
    target = load_catalog(request.catalog_path).get(request.target)
    if (card := generative_card(request.model)) is not None:
        if llm_recipes.wants_recipe(target, request.precision, request.engine):
            return _generative_recipe(request, target, card)
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
    quantized = already_quantized(resolved.onnx_path)
    float_path = _float_reference(request, card, quantized, precision, resolved.onnx_path)
    # Neuron without its SDK ends in the one line that says where to compile: no progress noise before it
    quiet = target.toolchain == "neuron" and toolchain.available() is not None
    runs = not card.batchable  # one run per sample: reference data stacked on a new first axis
    stream_model = float_path or resolved.onnx_path
    held_out = accuracy.stack(_make_inputs(card, request.held_out_samples, HELD_OUT_SEED, stream_model), runs)
    options = VariantOptions(
        recipe=request.recipe,
        calibration_seed=CALIBRATION_SEED,
        # the sizes the card fixes; a -1 (a token sequence length) stays dynamic in the variant
        input_shapes={spec.name: list(spec.shape) for spec in card.inputs},
        **request.options,
    )
    ctx = _Context(request, resolved, target, held_out, quiet, float_path=float_path, runs=runs)

    manifests = []
    # the requested variant first: a missing SDK (Neuron) then fails before any other work, in one line
    if quantized and precision == "int8":
        manifests.append(ctx.variant(precision, _AsQuantized(quantized, toolchain), options))
    elif precision != "fp32" or request.recipe:
        if _needs_calibration(toolchain, precision, request.recipe):
            options.calibration = _make_inputs(
                card, request.calibration_samples, CALIBRATION_SEED, stream_model
            )
        manifests.append(ctx.variant(precision, toolchain, options))
    if float_path is None:
        progress(f"{card.name}: no FP32 variant: the source is already quantized ({', '.join(quantized)})")
        return manifests
    fp32_source = dataclasses.replace(resolved, onnx_path=float_path)
    manifests.insert(
        0, ctx.variant("fp32", ort_toolchain, VariantOptions(recipe="fp32-reference"), fp32_source)
    )
    return manifests


def _generative_recipe(request: QuantizeRequest, target: HardwareTarget, card: Any) -> list[VariantManifest]:
    """A generative model for an accelerator: the recipe folder (docs/quantization.md), built on the target."""
    hf_dir, tokenizer_dir = llm_recipes.checkpoint_of(card)
    manifest, recipe = llm_recipes.write_recipe(
        card, hf_dir, tokenizer_dir, target, request.precision, Path(request.out_dir), request.model
    )
    script = Path(request.out_dir) / manifest.name / llm_recipes.SCRIPT_FILE
    if target.toolchain == "neuron" and shutil.which("inference_demo") is None:
        # as for classic Neuron variants: the folder is written, and one line says where to build it
        raise ToolchainMissingError(
            f"NxD Inference (inference_demo) is not installed here; run {script} on an {target.name} "
            "(Neuron DLAMI NxD Inference venv)"
        )
    for note in recipe.notes:
        progress(f"{manifest.name}: {note}")
    return [manifest]


def already_quantized(onnx_path: os.PathLike) -> list[str]:
    """The quantized op types of a source graph (empty for a float one)."""
    return quantized_ops(onnx.load(str(onnx_path), load_external_data=False))


def _float_reference(
    request: QuantizeRequest, card: Any, quantized: list[str], precision: str, source: Path
) -> Path | None:
    """The float graph the gate compares against: the source, or for an already-quantized source the one
    given (``--reference``, the card's ``reference``), else None (then only its INT8 variant exists)."""
    given = request.reference
    if given is None and card.reference:
        given = card.resolve_path(card.reference.removeprefix("onnx:"))
    if given is not None:
        check_onnx_file(Path(given))
        if already_quantized(given):
            raise BadInputError(f"--reference {given}: it is quantized too; give the float graph")
        if not quantized:
            progress(
                f"{card.name}: the source is a float graph; the reference {given} is the gate's FP32 instead"
            )
        return Path(given)
    if not quantized:
        return Path(source)
    if precision != "int8":
        raise BadInputError(
            f"{card.name} is already quantized ({', '.join(quantized)}): it has no {precision} variant without "
            "its float graph; ask for --precision int8 (the graph as it is) or give --reference FP32.onnx"
        )
    return None


@dataclass
class _AsQuantized:
    """A 'toolchain' that keeps an already-quantized source graph as the INT8 variant."""

    ops: list[str]
    toolchain: Any

    def make_variant(
        self, resolved: Any, target: HardwareTarget, precision: str, out_dir: Path, options: VariantOptions
    ) -> VariantResult:
        if self.toolchain is not ort_toolchain:
            raise BadInputError(
                f"{resolved.card.name} is already quantized ({', '.join(self.ops)}): accelbench serves such a "
                f"graph with ONNX Runtime only, not on {target.id} ({target.toolchain})"
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        copy_model(resolved.onnx_path, out_dir / ort_toolchain.MODEL_FILE)
        reason = f"the source graph is already quantized ({', '.join(self.ops)}): kept as it is"
        return VariantResult(
            precision=precision,
            recipe=AS_QUANTIZED_RECIPE,
            format="onnx",
            model_file=ort_toolchain.MODEL_FILE,
            toolchain={"name": "onnxruntime", "version": ort_toolchain.version()},
            calibration=None,
            attempts=[{"recipe": AS_QUANTIZED_RECIPE, "outcome": "ok", "reason": reason}],
            notes=[f"{reason}, the INT8 variant; not quantized again"],
        )


@dataclass
class _Context:
    request: QuantizeRequest
    resolved: Any
    target: HardwareTarget
    held_out: dict[str, np.ndarray]
    quiet: bool = False
    float_path: Path | None = None  # the FP32 graph the gate compares with; None: there is none
    runs: bool = False  # reference data holds one run per index (a model that cannot batch)
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
            model = self.float_path or self.resolved.onnx_path  # without a float graph: the source's own
            self._reference = accuracy.run_onnx_cpu(model, self.held_out, runs=self.runs)
        return self._reference

    def variant(
        self, precision: str, toolchain: Any, options: VariantOptions, resolved: Any = None
    ) -> VariantManifest:
        resolved = resolved or self.resolved
        card = resolved.card
        name = variant_name(card.name, self.target.id, precision)
        out = Path(self.request.out_dir) / name
        source = {"uri": self.request.model, "sha256": sha256_file(self.resolved.onnx_path)}
        if self.float_path is not None and Path(self.float_path) != Path(self.resolved.onnx_path):
            source["reference_sha256"] = sha256_file(self.float_path)  # a new reference remakes the variants
        reused = reusable_variant(out, source, options.recipe)
        if reused is not None:
            progress(f"{name}: up to date, reused")
            return reused
        options.work_dir = options.work_dir or Path(self.request.out_dir) / ".work" / card.name
        # reference data first: scripts written for other hosts (compile_neuron.py) trace with its inputs
        accuracy.write_reference(out, self.held_out, self.reference_outputs)
        if not (self.target.toolchain == "neuron" and toolchain.available() is not None):
            progress(f"{name}: making the {precision} variant ({options.recipe or 'default recipe'}) …")
        result: VariantResult = toolchain.make_variant(resolved, self.target, precision, out, options)
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
            "graph_cost": _graph_cost(card, resolved.onnx_path, precision),
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
        if self.float_path is None:
            return accuracy.not_run(
                metric,
                tolerance,
                "no float reference: the source graph is already quantized; give its FP32 graph with "
                "--reference FP32.onnx (or the card's reference) to judge it",
            )
        output = card.metric_output or next(iter(self.reference_outputs))
        gate = accuracy.gate(
            onnx_file, self.held_out, self.reference_outputs, metric, tolerance, output, runs=self.runs
        )
        if result.format != "onnx":
            gate["reason"] += f"; measured on the ONNX the {result.format} was built from"
        return gate


def _needs_calibration(toolchain: Any, precision: str, recipe: str | None) -> bool:
    # static INT8 (CPU static QDQ, TensorRT's QDQ) needs samples; a dynamic default may fall back to static,
    # and every recipe's result is test-run on a sample
    return precision == "int8"


def _make_inputs(card: Any, count: int, seed: int, model: os.PathLike) -> list[dict[str, np.ndarray]]:
    """One feed per run (the card's own batch); state inputs chained as a stream through ``model``."""
    feeds = make_inputs(card, batch_size=card.run_batch, count=count, seed=seed)
    states = {spec.name: spec.state_from for spec in card.inputs if spec.state_from}
    return accuracy.chain_states(model, feeds, states)


def _output_specs(card: Any, onnx_path: os.PathLike) -> list[dict[str, Any]]:
    if card.outputs:
        return [t.to_dict() for t in card.outputs]
    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    specs = []
    for value in graph.output:
        tt = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        specs.append(
            {
                "name": value.name,
                "dtype": onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name,
                "shape": [-1, *dims[1:]] if dims and card.batchable else dims,
            }
        )
    return specs


def _graph_cost(card: Any, onnx_path: os.PathLike, precision: str) -> dict[str, Any]:
    # the card fixes dynamic non-batch dims (e.g. the sequence length of an hf: export)
    return model_graph_cost(card, onnx_path, 1, precision).to_dict()  # the manifest's block, as it is
