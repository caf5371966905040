"""ONNX Runtime toolchain: FP32 reference, INT8 dynamic and static QDQ, FP16; also makes TensorRT's QDQ ONNX.

Recipes (the ``recipe`` field of the manifest):

- ``fp32-reference``: the source graph, unchanged.
- ``ort-dynamic-int8-per-channel``: MatMul weights INT8 per channel, activations quantized per run. The CPU
  default for transformers (FIELD-NOTES on MiniLM: cosine 0.993 where static QDQ of everything gave 0.39).
- ``ort-static-qdq-int8``: static QDQ calibrated on card samples, U8 activations, S8 per-channel weights. The
  CPU default for CNNs (Conv needs static). For transformers only the constant-weight MatMuls are quantized,
  minus the FFN-output MatMuls fed by GELU (their input has outliers), plus attention's Q·Kᵀ; softmax·V
  stays float (node selection by name in ``transformer_qdq``).
- ``qdq-int8-symmetric``: what TensorRT consumes: S8 activations and weights, both symmetric (zero point 0),
  per-channel weights, QDQ format; same node selection as above. TensorRT's INT8 default for CNNs.
- ``qdq-int8-symmetric-smoothquant``: the same plus SmoothQuant (α 0.5) on the FFN-input MatMuls, which
  then stay quantized. TensorRT's INT8 default for transformers (real MiniLM: cosine 0.995, docs/quantization.md).
- ``fp16``: float16 weights and compute, float32 inputs and outputs (keep_io_types).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.models.toolchains import VariantOptions, VariantResult
from accelbench.models.toolchains import transformer_qdq as tq
from accelbench.models.toolchains.transformer_qdq import gelu_fed_matmuls, weight_matmuls  # noqa: F401

RECIPES = (
    "fp32-reference",
    "ort-dynamic-int8-per-channel",
    "ort-static-qdq-int8",
    "qdq-int8-symmetric",
    "qdq-int8-symmetric-smoothquant",
    "fp16",
)
SYMMETRIC_RECIPES = ("qdq-int8-symmetric", "qdq-int8-symmetric-smoothquant")
MODEL_FILE = "model.onnx"


def available() -> str | None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return "onnxruntime is not installed: pip install onnxruntime"
    return None


def version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def precisions(target: Any = None) -> tuple[str, ...]:
    return ("fp32", "int8", "fp16")


def default_precision(target: Any = None) -> str:
    return "int8"


def default_recipe(precision: str, kind: str) -> str:
    """The recipe a CPU target gets for a precision and model kind (``cnn`` | ``transformer`` | ``other``)."""
    if precision == "fp32":
        return "fp32-reference"
    if precision == "fp16":
        return "fp16"
    return "ort-static-qdq-int8" if kind == "cnn" else "ort-dynamic-int8-per-channel"


def make_variant(
    resolved: Any, target: Any, precision: str, out_dir: str | Path, options: VariantOptions
) -> VariantResult:
    """Write ``out_dir/model.onnx`` for a CPU target."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(resolved.onnx_path)
    recipe = options.recipe or default_recipe(precision, model_kind(src))
    calibration = run_recipe(recipe, src, out / MODEL_FILE, options)
    return VariantResult(
        precision=precision,
        recipe=recipe,
        format="onnx",
        model_file=MODEL_FILE,
        toolchain={"name": "onnxruntime", "version": version()},
        calibration=calibration,
    )


def run_recipe(recipe: str, src: Path, dst: Path, options: VariantOptions) -> dict[str, Any] | None:
    """Make ``dst`` from ``src`` with a recipe; returns the calibration record (None when uncalibrated)."""
    if recipe not in RECIPES:
        raise BadInputError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    if recipe == "fp32-reference":
        shutil.copyfile(src, dst)
        return None
    if recipe == "fp16":
        to_fp16(src, dst)
        return None
    work = Path(options.work_dir or dst.parent)
    pre = preprocess(src, work / f"{src.stem}.pre.onnx")
    if recipe == "ort-dynamic-int8-per-channel":
        quantize_dynamic_per_channel(pre, dst)
        return None
    kind = model_kind(pre)
    # Percentile (99.999) edged out MinMax on real MiniLM in both symmetric recipes measured (docs/quantization.md)
    method = options.calibration_method or ("MinMax" if kind == "cnn" else "Percentile")
    record: dict[str, Any] = {
        "method": method,
        "samples": len(options.calibration),
        "seed": options.calibration_seed,
    }
    excluded = None
    if kind != "cnn":
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
    quantize_qdq(
        pre,
        dst,
        options.calibration,
        symmetric=symmetric,
        method=method,
        nodes_to_exclude=None if excluded is None else list(excluded),
    )
    return record


def _load(path: Path) -> Any:
    import onnx

    return onnx.load(str(path), load_external_data=False)


def model_kind(path: str | Path) -> str:
    """``cnn`` when the graph has convolutions, ``transformer`` when it has weight MatMuls, else ``other``."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    ops = {node.op_type for node in graph.node}
    if "Conv" in ops:
        return "cnn"
    return "transformer" if ops & {"MatMul", "Gemm"} else "other"


def preprocess(src: Path, dst: Path) -> Path:
    """ORT's quantization pre-processing (shape inference + basic optimisation), with node names filled in."""
    import onnx
    from onnxruntime.quantization import quant_pre_process

    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        # symbolic shape inference suits transformers; optimum exports need it skipped (FIELD-NOTES)
        quant_pre_process(str(src), str(dst), auto_merge=True)
    except Exception:  # symbolic shape inference fails on some exporters' graphs; the rest still helps
        quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
    model = onnx.load(str(dst))
    # nodes_to_exclude works by name; unnamed nodes could not be excluded
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{i}"
    onnx.save(model, str(dst))
    return dst


def quantize_dynamic_per_channel(pre: Path, dst: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(pre), str(dst), op_types_to_quantize=["MatMul"], per_channel=True, weight_type=QuantType.QInt8
    )


def quantize_qdq(
    pre: Path,
    dst: Path,
    calibration: list[dict[str, Any]],
    symmetric: bool,
    method: str = "MinMax",
    nodes_to_exclude: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Static QDQ INT8. ``symmetric``: S8 activations and weights, zero point 0 (what TensorRT needs)."""
    import onnx
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
    print(
        f"accelbench: calibrating {pre.name} on {len(calibration)} samples ({method})",
        file=sys.stderr,
    )
    quantize_static(
        str(pre),
        str(dst),
        FeedReader(calibration),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=ops,
        per_channel=True,
        activation_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=nodes_to_exclude or [],
        calibrate_method=getattr(CalibrationMethod, method),
        extra_options=extra_options,
    )


def to_fp16(src: Path, dst: Path) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(src))
    # float32 at the edges so clients and the reference data stay float32
    converted = convert_float_to_float16(model, keep_io_types=True)
    onnx.save(converted, str(dst))


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
