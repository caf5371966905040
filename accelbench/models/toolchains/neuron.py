"""AWS Neuron toolchain (Inferentia2): compile with torch-neuronx on an inf2 host.

``torch_neuronx.trace`` needs a torch module, fixed input shapes, and the Neuron SDK (from the Neuron pip
index, not PyPI). Where ``torch_neuronx`` imports, the variant is compiled here; elsewhere
``compile_neuron.py`` (self-contained: ONNX → torch via onnx2torch → trace) is written into the variant
folder and ToolchainMissingError says where to run it. The auto-cast flags are recorded in the recipe
because the compiler's default changed (``none`` since Neuron 2.27, ``matmult`` before; DOMAIN.md §4.3).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from accelbench.errors import ToolchainMissingError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.models.toolchains import VariantOptions, VariantResult

MODEL_FILE = "model.neuron.pt"
SCRIPT_FILE = "compile_neuron.py"
AUTO_CAST = {"bf16": ["--auto-cast", "matmult", "--auto-cast-type", "bf16"], "fp32": ["--auto-cast", "none"]}


def available() -> str | None:
    try:
        import torch_neuronx  # noqa: F401
    except ImportError:
        return "the Neuron SDK (torch-neuronx) is not installed here"
    return None


def precisions(target: HardwareTarget | None = None) -> tuple[str, ...]:
    return ("bf16", "fp32")


def default_precision(target: HardwareTarget | None = None) -> str:
    return "bf16"


def compiler_args(precision: str) -> list[str]:
    return list(AUTO_CAST[precision])


def make_variant(
    resolved: Any, target: HardwareTarget, precision: str, out_dir: str | Path, options: VariantOptions
) -> VariantResult:
    """Compile on a Neuron host; elsewhere write compile_neuron.py and raise ToolchainMissingError."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(resolved.onnx_path, out / "model.onnx")  # what compile_neuron.py converts and traces
    batch = max(getattr(getattr(target, "triton", None), "preferred_batch_sizes", (1,)) or (1,))
    script = compile_script(resolved.card, precision, batch)
    (out / SCRIPT_FILE).write_text(script)
    why = available()
    if why is not None:
        raise ToolchainMissingError(
            f"{why}; run {out / SCRIPT_FILE} on an inf2 instance (Neuron DLAMI, or pip install torch-neuronx "
            "onnx2torch --extra-index-url=https://pip.repos.neuron.amazonaws.com)"
        )
    version = compile_here(out, script)  # pragma: no cover - needs an Inferentia host
    return VariantResult(  # pragma: no cover
        precision=precision,
        recipe=f"neuron-{precision}",
        format="neuron",
        model_file=MODEL_FILE,
        toolchain={
            "name": "torch-neuronx",
            "version": version,
            "compiler_args": " ".join(compiler_args(precision)),
        },
        notes=[f"compiled for batch {batch} (Neuron needs fixed shapes)"],
    )


def compile_here(out: Path, script: str) -> str:  # pragma: no cover - needs an Inferentia host
    import runpy
    from importlib.metadata import version

    runpy.run_path(str(out / SCRIPT_FILE), run_name="__main__")
    return version("torch-neuronx")


def compile_script(card: Any, precision: str, batch: int) -> str:
    """A standalone script: ONNX → torch (onnx2torch) → torch_neuronx.trace at a fixed batch → model.neuron.pt."""
    specs = [(s.name, s.dtype, [batch, *s.shape[1:]]) for s in card.inputs]
    return f'''#!/usr/bin/env python3
"""Compile {card.name} for AWS Inferentia2 with torch-neuronx. Run on an inf2 instance, in this folder.

Neuron needs fixed shapes: this traces batch {batch}. Compiler args: {" ".join(compiler_args(precision))}
"""
import os
import sys

import numpy as np
import torch
import torch_neuronx
from onnx2torch import convert

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = {specs!r}  # (name, dtype, shape at the compiled batch)
COMPILER_ARGS = {compiler_args(precision)!r}


def example_inputs():
    ref = os.path.join(HERE, "reference", "inputs.npz")
    if os.path.exists(ref):
        data = np.load(ref)
        return tuple(torch.from_numpy(data[name][: shape[0]].astype(dtype)) for name, dtype, shape in INPUTS)
    return tuple(torch.zeros(shape, dtype=getattr(torch, dtype)) for _, dtype, shape in INPUTS)


def main():
    model = convert(os.path.join(HERE, "model.onnx")).eval()
    traced = torch_neuronx.trace(model, example_inputs(), compiler_args=COMPILER_ARGS)
    torch.jit.save(traced, os.path.join(HERE, "{MODEL_FILE}"))
    print("wrote", os.path.join(HERE, "{MODEL_FILE}"), file=sys.stderr)


if __name__ == "__main__":
    main()
'''
