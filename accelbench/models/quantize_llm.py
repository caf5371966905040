"""``accelbench quantize`` for generative models: one variant folder per (model, target, precision).

Each folder (LLM contract §3) holds ``model.onnx`` (with its KV cache inputs), ``tokenizer/``, ``hf/`` (the
checkpoint, for the torch-cuda flavor and the accelerator recipes) and the manifest, whose ``graph_cost`` has
the per-token costs and whose ``accuracy`` is the text-generation gate (accelbench.models.accuracy_llm).

CPU recipes (ONNX Runtime, weight-only; the block size and bits go into the manifest's ``calibration``):

- ``fp32-reference``: the optimum export, unchanged.
- ``ort-int4-weight-only-b32`` (fallback ``ort-int4-weight-only-b128``): ``MatMulNBits`` via
  ``onnxruntime.quantization.matmul_nbits_quantizer``: every constant-weight MatMul (the LM head included) in
  symmetric blocks of 32 weights with one float scale each; activations stay float32.
- ``ort-int8-weight-only-b32``: the same quantizer with 8 bits (ORT ≥ 1.20); fallback ``ort-dynamic-int8``
  (MatMul weights INT8 per tensor, activations quantized per run).
- ``ort-int4-b32-int8-compute`` (only with ``--recipe``): INT4 blocks of 32 at accuracy_level 4, i.e. the
  MatMuls compute in INT8 with activations quantized per block at run time: faster, not weight-only.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.models.accuracy_llm import eval_tokens, teacher_forced_logits, text_gate
from accelbench.models.cards import ModelCard
from accelbench.models.export_llm import GenerativeFiles, generative_files
from accelbench.models.generative import GenerativeSpec, kv_dtype
from accelbench.models.manifest import variant_name, write_manifest
from accelbench.models.toolchains import attempts
from accelbench.models.variants import QuantizeRequest, progress, reusable_variant
from accelbench.util import sha256_file

CPU_PRECISIONS = ("fp32", "int8", "int4")
GPU_PRECISIONS = ("fp32", "bf16", "fp16")  # served by torch-cuda from hf/; the accelerator recipes add more
DEFAULT_RECIPES = {
    "fp32": "fp32-reference",
    "int4": "ort-int4-weight-only-b32",
    "int8": "ort-int8-weight-only-b32",
}
FALLBACKS = {
    "ort-int4-weight-only-b32": ("ort-int4-weight-only-b128",),
    "ort-int8-weight-only-b32": ("ort-dynamic-int8",),
}
# MatMulNBits recipes: bits, block size, accuracy_level (0: float compute after dequantizing each block;
# 4: INT8 compute, activations quantized per block at run time, which ONNX Runtime GenAI uses on CPUs)
NBITS = {
    "ort-int4-weight-only-b32": (4, 32, 0),
    "ort-int4-weight-only-b128": (4, 128, 0),
    "ort-int8-weight-only-b32": (8, 32, 0),
    "ort-int4-b32-int8-compute": (4, 32, 4),
}
RECIPES = (
    *DEFAULT_RECIPES.values(),
    "ort-int4-weight-only-b128",
    "ort-int4-b32-int8-compute",
    "ort-dynamic-int8",
)
HF_FILES = (".json", ".safetensors", ".txt", ".model")
# what a tokenizer folder holds (a checkpoint folder that is also the tokenizer keeps its weights out of tokenizer/)
TOKENIZER_NAMES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "added_tokens.json",
)


def precisions(target: HardwareTarget) -> tuple[str, ...]:
    return CPU_PRECISIONS if getattr(target, "toolchain", "") == "onnxruntime-cpu" else GPU_PRECISIONS


def quantize_generative(
    request: QuantizeRequest, target: HardwareTarget, card: ModelCard
) -> list[VariantManifest]:
    """The unquantized variant and the requested one (unquantized first), each gated on the shipped text."""
    if card.generative is None:
        raise BadInputError(f"{card.name}: not a text-generation card")
    precision = request.precision or "fp32"
    allowed = precisions(target)
    if precision not in allowed:
        raise BadInputError(
            f"precision {precision!r} is not available for the generative model {card.name} on {target.id}; "
            f"choose one of {', '.join(allowed)}"
        )
    if request.recipe and request.recipe not in RECIPES:
        raise BadInputError(
            f"recipe {request.recipe!r}: a generative model takes one of {', '.join(RECIPES)}"
        )
    bits = 8 if request.recipe == "ort-dynamic-int8" else NBITS.get(request.recipe or "", (None,))[0]
    if bits is not None and f"int{bits}" != precision:
        raise BadInputError(f"recipe {request.recipe} makes an int{bits} variant, not {precision}")
    ctx = _Context(request, target, card, card.generative, generative_files(card))
    manifests = [ctx.variant("fp32")]
    if precision != "fp32":
        manifests.append(ctx.variant(precision))
    return manifests


@dataclass
class _Context:
    request: QuantizeRequest
    target: HardwareTarget
    card: ModelCard
    spec: GenerativeSpec
    files: GenerativeFiles
    _tokens: np.ndarray | None = None
    _reference: np.ndarray | None = None

    @property
    def tokens(self) -> np.ndarray:
        if self._tokens is None:
            self._tokens = eval_tokens(self.files.tokenizer_dir, self.spec.context_length)
        return self._tokens

    @property
    def reference_logits(self) -> np.ndarray:
        if self._reference is None:
            progress(
                f"{self.card.name}: unquantized logits on {len(self.tokens)} tokens of the evaluation text …"
            )
            self._reference = teacher_forced_logits(self.files.onnx_path, self.tokens)
        return self._reference

    def variant(self, precision: str) -> VariantManifest:
        name = variant_name(self.card.name, self.target.id, precision)
        out = Path(self.request.out_dir) / name
        source = {"uri": self.request.model, "sha256": sha256_file(self.files.onnx_path)}
        recipe = (self.request.recipe if precision != "fp32" else None) or DEFAULT_RECIPES.get(
            precision, f"{precision}-cast-at-load"
        )
        reused = reusable_variant(out, source, recipe if self.request.recipe else None)
        if reused is not None:
            progress(f"{name}: up to date, reused")
            return reused
        out.mkdir(parents=True, exist_ok=True)
        _copy_folder(self.files.tokenizer_dir, out / "tokenizer", names=TOKENIZER_NAMES)
        _copy_folder(self.files.hf_dir, out / "hf", HF_FILES)
        progress(f"{name}: making the {precision} variant ({recipe}) …")
        made, tried, calibration = self._model_file(precision, recipe, out / "model.onnx")
        gate = text_gate(
            self.reference_logits,
            out / "model.onnx",
            self.tokens,
            precision if made != "fp32-reference" else "fp32",
            self.spec.gate,
            trained=self.card.source_scheme != "builtin",
        )
        progress(
            f"{name}: next-token agreement {gate['value']}, mean KL {gate['kl_divergence']} → {gate['verdict']}"
        )
        manifest = {
            "name": name,
            "model": self.card.name,
            "card": self.card.to_dict(),
            "source": source,
            "target": self.target.id,
            "precision": precision,
            "recipe": made,
            "format": "onnx",
            "model_file": "model.onnx",
            "toolchain": {"name": "onnxruntime", "version": _ort_version()},
            "inputs": [t.to_dict() for t in self.card.inputs],
            "outputs": [t.to_dict() for t in self.card.outputs],
            "calibration": calibration,
            "accuracy": gate,
            "graph_cost": self.spec.graph_cost(
                precision, weight_bytes=weight_bytes_read(out / "model.onnx"), kv_dtype=kv_dtype(precision)
            ),
            "engine": None,
            "attempts": tried,
        }
        return write_manifest(out, manifest)

    def _model_file(self, precision: str, recipe: str, dst: Path) -> tuple[str, list, dict | None]:
        if precision not in ("int4", "int8"):
            # fp32, and bf16/fp16 for the GPU flavor (torch casts hf/ at load): the export as it is
            _link_or_copy(self.files.onnx_path, dst)
            ok = {"recipe": recipe, "outcome": "ok", "reason": "the unquantized export"}
            return recipe, [ok], None
        chain = (self.request.recipe,) if self.request.recipe else (recipe, *FALLBACKS.get(recipe, ()))
        sample = _sample_feed(self.files.onnx_path)
        made, calibration, tried = attempts.try_in_order(
            chain, lambda r: _quantize(self.files.onnx_path, dst, r), dst, sample, dst.parent.name
        )
        return made, tried, calibration


def _quantize(src: Path, dst: Path, recipe: str) -> dict[str, Any]:
    """Write the ``recipe`` variant of ``src`` to ``dst``; returns the manifest's calibration block."""
    import onnx

    if recipe == "ort-dynamic-int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
        return {"method": "dynamic-int8", "samples": 0, "bits": 8, "per_channel": False}
    bits, block, level = NBITS[recipe]
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    model = onnx.load(str(src))
    _fold_transposed_weights(model.graph)
    quantizer = MatMulNBitsQuantizer(
        model, bits=bits, block_size=block, is_symmetric=True, accuracy_level=level
    )
    quantizer.process()
    quantizer.model.save_model_to_file(str(dst), use_external_data_format=False)
    return {
        "method": "weight-only" if level == 0 else "int4-weights-int8-compute",
        "samples": 0,
        "bits": bits,
        "block_size": block,
        "symmetric": True,
        "accuracy_level": level,
        "quantizer": "onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer",
    }


def _fold_transposed_weights(graph: Any) -> None:
    """Give each MatMul whose weight is ``Transpose(initializer)`` its own transposed initializer.

    A tied LM head exports as ``MatMul(x, Transpose(embed_tokens))`` (transformers 4.57 with torch 2.13), a
    weight the MatMulNBits quantizer does not see as constant ("MatMul doesn't have const weight"), so the
    head, a third of llama-tiny's weights, stayed float32. The embedding table itself stays, for its Gather."""
    from onnx import numpy_helper

    inits = {t.name: t for t in graph.initializer}
    transposed = {
        n.output[0]: n
        for n in graph.node
        if n.op_type == "Transpose"
        and n.input[0] in inits
        and len(inits[n.input[0]].dims) == 2
        and [list(a.ints) for a in n.attribute if a.name == "perm"] in ([], [[1, 0]])
    }
    for node in graph.node:
        if node.op_type == "MatMul" and len(node.input) == 2 and node.input[1] in transposed:
            source = transposed[node.input[1]].input[0]
            name = f"{source}.transposed"
            if name not in inits:
                array = np.ascontiguousarray(numpy_helper.to_array(inits[source]).T)
                inits[name] = numpy_helper.from_array(array, name)
                graph.initializer.append(inits[name])
            node.input[1] = name
    used = {name for n in graph.node for name in n.input} | {o.name for o in graph.output}
    for t in [n for n in transposed.values() if n.output[0] not in used]:
        graph.node.remove(t)


def weight_bytes_read(onnx_path: Path) -> int:
    """Bytes of the initializers a decode step reads: all but the tables only gathered from (embeddings)."""
    import onnx

    model = onnx.load(str(onnx_path))
    consumers: dict[str, set[str]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, set()).add(node.op_type)
    total = 0
    for init in model.graph.initializer:
        if consumers.get(init.name, set()) == {"Gather"}:
            continue
        total += int(onnx.numpy_helper.to_array(init).nbytes)
    return total


def _sample_feed(onnx_path: Path) -> dict[str, np.ndarray]:
    """A two-token prefill with an empty KV cache: what the quantized graph must run."""
    import onnx

    feed: dict[str, np.ndarray] = {
        "input_ids": np.array([[101, 1037]], np.int64),
        "attention_mask": np.ones((1, 2), np.int64),
        "position_ids": np.arange(2, dtype=np.int64)[None],
    }
    for value in onnx.load(str(onnx_path), load_external_data=False).graph.input:
        if value.name.startswith("past_key_values."):
            dims = value.type.tensor_type.shape.dim
            feed[value.name] = np.zeros((1, dims[1].dim_value, 0, dims[3].dim_value), np.float32)
    return feed


def _copy_folder(src: Path, dst: Path, suffixes: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.iterdir()):
        wanted = (not suffixes or path.name.endswith(suffixes)) and (not names or path.name in names)
        if path.is_file() and wanted:
            _link_or_copy(path, dst / path.name)


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)  # a checkpoint can be GBs: a hard link when the cache is on the same disk
    except OSError:
        shutil.copyfile(src, dst)


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__
