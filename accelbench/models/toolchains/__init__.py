"""Per-target quantization toolchains, each a module with the same small function set.

Every toolchain module (``onnxruntime``, ``tensorrt``, ``neuron``) exposes:

    available() -> str | None                       # None when usable here, else why not (one line)
    default_precision(target) -> str
    precisions(target) -> tuple[str, ...]
    make_variant(resolved, target, precision, out_dir, options) -> VariantResult

``make_variant`` writes the model file (and any build script) into ``out_dir`` and says how it was made;
the caller (``accelbench.models.quantize``) adds the reference data, the accuracy gate and the manifest.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from accelbench.errors import ToolchainMissingError
from accelbench.hardware.catalog import HardwareTarget

# catalog toolchain name -> module in this package
_MODULES = {"onnxruntime-cpu": "onnxruntime", "tensorrt": "tensorrt", "neuron": "neuron"}


@dataclass
class VariantOptions:
    """What a toolchain needs besides the model: calibration samples and the user's choices."""

    recipe: str | None = None  # None: the toolchain's default for this model kind
    calibration: list[dict[str, Any]] = field(default_factory=list)  # feeds, model input name -> array
    calibration_seed: int = 0
    calibration_method: str | None = None  # MinMax | Entropy | Percentile
    work_dir: Path | None = None  # scratch for pre-processed graphs; out_dir's parent when None
    probe: dict[str, Any] | None = None  # host probe (GPU name, compute capability); None → probe here
    build_engine: bool = True  # try to build the engine when the host is the target
    require_engine: bool = False  # fail (instead of writing the script) when the engine cannot be built here
    dla_core: int | None = None  # Jetson Orin: build for this DLA core with GPU fallback
    input_shapes: dict[str, list[int]] | None = (
        None  # the card's input shapes (-1 dynamic): fixes exporters' dims
    )


@dataclass
class VariantResult:
    """How a variant was made; becomes the recipe/format/toolchain/calibration/engine of the manifest."""

    precision: str
    recipe: str
    format: str  # onnx | tensorrt-plan | neuron
    model_file: str
    toolchain: dict[str, str]
    calibration: dict[str, Any] | None = None
    engine: dict[str, Any] | None = None
    runs_on_ort_cpu: bool = True  # the accuracy gate can run model_file with ORT CPU here
    notes: list[str] = field(default_factory=list)  # lines for the user (e.g. "build on an L4")
    attempts: list[dict[str, str]] = field(default_factory=list)  # recipes tried: recipe, outcome, reason


def toolchain_for(target: HardwareTarget) -> ModuleType:
    """The toolchain module for a catalog target; xla (TPU) has none."""
    name = getattr(target, "toolchain", None)
    if name not in _MODULES:
        raise ToolchainMissingError(
            f"target {getattr(target, 'id', target)} uses toolchain {name!r}, which accelbench cannot "
            "quantize for (project-only target: figures come from the roofline, not a variant)"
        )
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")
