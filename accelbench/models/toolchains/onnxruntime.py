"""ONNX Runtime toolchain: FP32 reference, INT8 dynamic and static QDQ, FP16; also makes TensorRT's QDQ ONNX.

Recipes (the ``recipe`` field of the manifest):

- ``fp32-reference``: the source graph, unchanged.
- ``ort-dynamic-int8-per-channel``: MatMul weights INT8 per channel, activations quantized per run. The CPU
  default for transformers (FIELD-NOTES on MiniLM: cosine 0.993 where static QDQ of everything gave 0.39).
- ``ort-static-qdq-int8``: static QDQ calibrated on card samples, U8 activations, S8 per-channel weights. The
  CPU default for CNNs (Conv needs static). Per-channel Q/DQ needs opset 13: older graphs are upgraded first.
  The nodes after the last compute op (a detector's decode) stay float (``float_tail``). For transformers only the constant-weight MatMuls are quantized,
  minus the FFN-output MatMuls fed by GELU (their input has outliers), plus attention's Q·Kᵀ; softmax·V
  stays float (node selection by name in ``transformer_qdq``).
- ``qdq-int8-symmetric``: what TensorRT consumes: S8 activations and weights, both symmetric (zero point 0),
  per-channel weights, QDQ format; same node selection as above. TensorRT's INT8 default for CNNs.
- ``qdq-int8-symmetric-smoothquant``: the same plus SmoothQuant (α 0.5) on the FFN-input MatMuls, which
  then stay quantized. TensorRT's INT8 default for transformers (real MiniLM: cosine 0.995, docs/quantization.md).
- ``ort-static-qdq-int8-per-tensor``: the same with one scale per weight tensor (any opset ≥ 10).
- ``ort-dynamic-int8``: MatMul, Gemm and Conv weights INT8 per tensor, activations quantized per run.
- ``qdq-int8-symmetric-per-tensor``: ``qdq-int8-symmetric`` with one scale per weight tensor: TensorRT's
  fallback when the per-channel recipe fails.
- ``fp16``: float16 weights and compute, float32 inputs and outputs (keep_io_types).

Without ``--recipe`` an INT8 variant tries the default recipe, then its fallbacks (``attempts.FALLBACKS``)
until one gives a graph that passes the ONNX checker and runs; every attempt goes into the manifest.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any

import onnx

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.models import intake
from accelbench.models.toolchains import VariantOptions, VariantResult, attempts
from accelbench.models.toolchains import transformer_qdq as tq
from accelbench.models.toolchains.transformer_qdq import gelu_fed_matmuls, weight_matmuls  # noqa: F401

RECIPES = (
    "fp32-reference",
    "ort-dynamic-int8-per-channel",
    "ort-static-qdq-int8",
    "ort-static-qdq-int8-per-tensor",
    "ort-dynamic-int8",
    "qdq-int8-symmetric",
    "qdq-int8-symmetric-per-tensor",
    "qdq-int8-symmetric-smoothquant",
    "fp16",
)
SYMMETRIC_RECIPES = ("qdq-int8-symmetric", "qdq-int8-symmetric-per-tensor", "qdq-int8-symmetric-smoothquant")
PER_TENSOR_RECIPES = ("ort-static-qdq-int8-per-tensor", "qdq-int8-symmetric-per-tensor")
MODEL_FILE = "model.onnx"

log = logging.getLogger(__name__)


def available() -> str | None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return "onnxruntime is not installed: pip install onnxruntime"
    return None


def version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def precisions(target: HardwareTarget | None = None) -> tuple[str, ...]:
    return ("fp32", "int8", "fp16")


def default_precision(target: HardwareTarget | None = None) -> str:
    return "int8"


def default_recipe(precision: str, kind: str) -> str:
    """The recipe a CPU target gets for a precision and model kind (``cnn`` | ``transformer`` | ``other``)."""
    if precision == "fp32":
        return "fp32-reference"
    if precision == "fp16":
        return "fp16"
    return "ort-static-qdq-int8" if kind == "cnn" else "ort-dynamic-int8-per-channel"


def make_variant(
    resolved: Any, target: HardwareTarget, precision: str, out_dir: str | Path, options: VariantOptions
) -> VariantResult:
    """Write ``out_dir/model.onnx`` for a CPU target."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(resolved.onnx_path)
    recipes = attempts.chain(default_recipe(precision, model_kind(src)), options.recipe)
    sample = options.calibration[0] if options.calibration else None
    label = f"{precision} variant of {Path(out).name}"
    recipe, calibration, tried = attempts.try_in_order(
        recipes, lambda r: run_recipe(r, src, out / MODEL_FILE, options), out / MODEL_FILE, sample, label
    )
    notes = []
    if precision == "int8" and not intake.quantized_ops(_load(out / MODEL_FILE)):
        # silero-vad keeps every Conv inside If branches, where ORT's quantizers do not reach
        notes.append(f"{recipe} quantized no op of this graph: the INT8 variant computes in float")
    return VariantResult(
        precision=precision,
        recipe=recipe,
        format="onnx",
        model_file=MODEL_FILE,
        toolchain={"name": "onnxruntime", "version": version()},
        calibration=calibration,
        attempts=tried,
        notes=notes,
    )


def run_recipe(recipe: str, src: Path, dst: Path, options: VariantOptions) -> dict[str, Any] | None:
    """Make ``dst`` from ``src`` with a recipe; returns the calibration record (None when uncalibrated)."""
    if recipe not in RECIPES:
        raise BadInputError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    if recipe == "fp32-reference":
        intake.copy_model(src, dst)  # external data travels with it
        return None
    if recipe == "fp16":
        to_fp16(src, dst)
        return None
    work = Path(options.work_dir or dst.parent)
    src = with_fixed_dims(src, options.input_shapes, work / f"{src.stem}.fixed.onnx")
    pre = preprocess(src, work / f"{src.stem}.pre.onnx", symbolic=model_kind(src) != "cnn")
    if recipe in ("ort-dynamic-int8-per-channel", "ort-dynamic-int8"):
        quantize_dynamic_int8(pre, dst, per_channel=recipe == "ort-dynamic-int8-per-channel")
        return None
    kind = model_kind(pre)
    # Percentile (99.999) edged out MinMax on real MiniLM in both symmetric recipes measured (docs/quantization.md)
    method = options.calibration_method or ("MinMax" if kind == "cnn" else "Percentile")
    record: dict[str, Any] = {
        "method": method,
        "samples": len(options.calibration),
        "seed": options.calibration_seed,
    }
    excluded: Collection[str]  # node names that stay float
    if kind == "cnn":
        excluded = float_tail(_load(pre))
        record["float_tail_nodes"] = len(excluded)
    else:
        model = _load(pre)
        excluded = tq.exclusions(model)
        if recipe == "qdq-int8-symmetric-smoothquant":
            ffn_in = tq.ffn_in_matmuls(model)
            smoothed_path = work / f"{src.stem}.smoothquant.onnx"
            smoothed = tq.smooth_quant(pre, smoothed_path, ffn_in, options.calibration)
            pre = smoothed_path
            record["smoothquant"] = {"alpha": tq.SMOOTHQUANT_ALPHA, "nodes": smoothed}
        matmuls = [n.name for n in model.graph.node if n.op_type in ("MatMul", "Gemm")]
        record["matmuls"] = len(matmuls)
        record["quantized_matmuls"] = len([n for n in matmuls if n not in excluded])
        record["excluded_nodes"] = excluded
    symmetric = recipe in SYMMETRIC_RECIPES
    per_channel = recipe not in PER_TENSOR_RECIPES
    record["per_channel"] = per_channel
    if per_channel:
        pre = ensure_opset(pre, intake.PER_CHANNEL_MIN_OPSET, work / f"{src.stem}.opset13.onnx")
    quantize_qdq(
        pre,
        dst,
        options.calibration,
        symmetric=symmetric,
        method=method,
        nodes_to_exclude=list(excluded),
        per_channel=per_channel,
    )
    return record


COMPUTE_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


def float_tail(model: Any) -> list[str]:
    """Nodes after the last compute op (no Conv/MatMul/Gemm downstream): they stay float.

    A detector's decode concatenates pixel coordinates (0-640) with class probabilities (0-1) in one tensor,
    which one INT8 scale cannot hold: on NudeNet's YOLOv8 head, quantizing it gave cosine 0.18 against FP32,
    keeping it float 0.998, with every Conv still INT8."""
    feeds_compute: set[str] = set()
    for node in reversed(model.graph.node):  # graph nodes are topologically sorted
        if node.op_type in COMPUTE_OPS or any(o in feeds_compute for o in node.output):
            feeds_compute.update(node.input)
    return [
        n.name
        for n in model.graph.node
        if n.op_type not in COMPUTE_OPS and not any(o in feeds_compute for o in n.output)
    ]


def ensure_opset(path: Path, version: int, dst: Path) -> Path:
    """``path`` when its opset is at least ``version``, else its upgrade saved at ``dst``."""
    model = _load(path)
    if intake.opset(model) >= version:
        return path
    intake.save_model(intake.upgrade_opset(intake.load_full(path), version), dst)
    return dst


def _load(path: Path) -> onnx.ModelProto:
    return onnx.load(str(path), load_external_data=False)


def model_kind(path: str | Path) -> str:
    """``cnn`` when the graph has convolutions, ``transformer`` when it has weight MatMuls, else ``other``."""
    graph = onnx.load(str(path), load_external_data=False).graph
    ops = {node.op_type for node in graph.node}
    if "Conv" in ops:
        return "cnn"
    return "transformer" if ops & {"MatMul", "Gemm"} else "other"


def with_fixed_dims(src: Path, shapes: dict[str, list[int]] | None, dst: Path) -> Path:
    """``src``, or a copy at ``dst`` whose dynamic non-batch input sizes are the card's fixed ones."""
    if not shapes:
        return src
    model = _load(src)
    if any(n.op_type in ("If", "Loop", "Scan") for n in model.graph.node):
        # a branch may take other sizes than the card's (silero-vad's 8 kHz branch wants 256 samples, not
        # 512): fixed, its static inference fails and ORT cannot even load the graph
        return src
    if intake.has_external_data(model) or not intake.fix_input_dims(model, shapes):
        return src  # nothing to fix (or too big to copy for it)
    return intake.save_model(model, dst)


def preprocess(src: Path, dst: Path, symbolic: bool = True) -> Path:
    """ORT's quantization pre-processing (shape inference + basic optimisation), with node names filled in.

    ``symbolic``: ORT's symbolic shape inference, which transformers need; CNNs with fixed sizes do not."""
    from onnxruntime.quantization import quant_pre_process

    dst.parent.mkdir(parents=True, exist_ok=True)
    external = intake.has_external_data(_load(src))  # a >2 GB model must stay in external data

    def run(**kwargs: Any) -> None:
        quant_pre_process(str(src), str(dst), save_as_external_data=external, **kwargs)

    try:
        # symbolic shape inference suits transformers; optimum exports need it skipped (FIELD-NOTES)
        run(auto_merge=True) if symbolic else run(skip_symbolic_shape=True)
    except Exception:  # symbolic shape inference fails on some exporters' graphs; the rest still helps
        if not symbolic:
            raise
        run(skip_symbolic_shape=True)
    model = intake.load_full(dst)
    # ORT quantizes initializer weights only: Constant-node weights (paddle2onnx) must become initializers
    intake.promote_constants(model)
    # nodes_to_exclude works by name; unnamed nodes could not be excluded
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{i}"
    intake.save_model(model, dst, external=external or None)
    return dst


def quantize_dynamic_int8(pre: Path, dst: Path, per_channel: bool = True) -> None:
    """Per channel: MatMul only (the transformer recipe); per tensor: MatMul, Gemm and Conv."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    ops = ["MatMul"] if per_channel else ["MatMul", "Gemm", "Conv"]
    quantize_dynamic(
        str(pre), str(dst), op_types_to_quantize=ops, per_channel=per_channel, weight_type=QuantType.QInt8
    )


quantize_dynamic_per_channel = quantize_dynamic_int8  # the name tests and bench scripts know


def quantize_qdq(
    pre: Path,
    dst: Path,
    calibration: list[dict[str, Any]],
    symmetric: bool,
    method: str = "MinMax",
    nodes_to_exclude: list[str] | None = None,
    extra: dict[str, Any] | None = None,
    per_channel: bool = True,
) -> None:
    """Static QDQ INT8. ``symmetric``: S8 activations and weights, zero point 0 (what TensorRT needs)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    if not calibration:
        raise BadInputError("static INT8 needs calibration samples; the model card produced none")
    model = onnx.load(str(pre))
    if not {"MatMul", "Gemm", "Conv"} & {node.op_type for node in model.graph.node}:
        # ORT would fail deep inside calibration ("Histogram has not been collected")
        raise BadInputError(
            f"nothing to quantize in {pre.name}: it has no MatMul, Gemm or Conv node; "
            "INT8 would equal FP32 (use --precision fp32 or fp16)"
        )
    kind = model_kind(pre)
    extra_options = {"ActivationSymmetric": symmetric, "WeightSymmetric": True}
    ops = None
    if kind != "cnn":
        ops = ["MatMul", "Gemm"]
        if nodes_to_exclude is None:  # softmax·V and the FFN outputs stay float
            nodes_to_exclude = list(tq.exclusions(model))
    extra_options.update(extra or {})
    log.info("calibrating %s on %d samples (%s)", pre.name, len(calibration), method)
    quantize_static(
        str(pre),
        str(dst),
        FeedReader(calibration),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=ops,
        per_channel=per_channel,
        activation_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=nodes_to_exclude or [],
        calibrate_method=getattr(CalibrationMethod, method),
        extra_options=extra_options,
    )


def to_fp16(src: Path, dst: Path) -> None:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(src))
    # float32 at the edges so clients and the reference data stay float32
    converted = convert_float_to_float16(model, keep_io_types=True)
    # the converter appends its input casts after the nodes that read them; the ONNX checker (and any reader
    # that runs nodes in list order) wants them first
    nodes = _topological(converted.graph)
    del converted.graph.node[:]
    converted.graph.node.extend(nodes)
    onnx.save(converted, str(dst))


def _topological(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending, order = list(graph.node), list[onnx.NodeProto]()
    while pending:
        runnable = [n for n in pending if all(name in ready for name in n.input)]
        if not runnable:  # a value nothing produces: leave the rest as it was, the checker names it
            return order + pending
        order += runnable
        ready.update(out for n in runnable for out in n.output)
        done = {id(n) for n in runnable}
        pending = [n for n in pending if id(n) not in done]
    return order


class FeedReader:
    """An ``onnxruntime.quantization.CalibrationDataReader`` over a list of feeds."""

    def __init__(self, feeds: list[dict[str, Any]]):
        self._feeds = list(feeds)
        self._next = 0

    def get_next(self) -> dict[str, Any] | None:
        if self._next >= len(self._feeds):
            return None
        self._next += 1
        return self._feeds[self._next - 1]

    def rewind(self) -> None:
        self._next = 0

    def __iter__(self):
        return iter(self._feeds)
