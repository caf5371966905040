"""Triton models for generative variants (task text-generation): plan the decoupled python-backend model.

The model (``llm_model.py`` → ``model.py``, with ``llm_engine.py`` beside it) streams tokens with an
iteration-level scheduler. Flavor ``local`` runs ``model.onnx`` on ONNX Runtime (CPU); ``torch-cuda`` runs the
variant's ``hf/`` checkpoint with transformers on CUDA in bf16 (``--set device=cpu --set dtype=float32``
runs it on a CPU). Tensor names are fixed (LLM contract §4, docs/llm.md "Serving").
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError
from accelbench.serving import pbconfig
from accelbench.serving.plans import ModelPlan, ServingDefaults

TASK = "text-generation"
LLM_KEYS = ("max_sequences", "max_context", "max_prefill_tokens")
DEFAULT_MAX_SEQUENCES = 16
DEFAULT_MAX_PREFILL_TOKENS = 2048
# name, Triton type, dims, optional
INPUTS = (
    ("text_input", "TYPE_STRING", (1,)),
    ("input_ids", "TYPE_INT64", (-1,)),
    ("max_tokens", "TYPE_INT32", (1,)),
    ("ignore_eos", "TYPE_BOOL", (1,)),
    ("temperature", "TYPE_FP32", (1,)),
)
OUTPUTS = (
    ("text_output", "TYPE_STRING", (1,)),
    ("output_ids", "TYPE_INT64", (-1,)),
    ("input_tokens", "TYPE_INT32", (1,)),
)


def is_generative(manifest: VariantManifest) -> bool:
    return manifest.card.get("task") == TASK


def generative_mismatch(config: dict) -> str | None:
    """The first way a served config (JSON form) differs from the generative model's fixed tensors, or None."""
    if not (config.get("model_transaction_policy") or {}).get("decoupled"):
        return "the model is not decoupled (it cannot stream tokens)"
    for key, tensors in (("input", INPUTS), ("output", OUTPUTS)):
        served = {t["name"]: t.get("data_type") for t in config.get(key) or []}
        for tensor_name, data_type, _ in tensors:
            if key == "output" and served.get(tensor_name) != data_type:
                return (
                    f"output {tensor_name} is {served.get(tensor_name)}, a generative model sends {data_type}"
                )
            if key == "input" and tensor_name in served and served[tensor_name] != data_type:
                return f"input {tensor_name} is {served[tensor_name]}, a generative model takes {data_type}"
    return None


def plan_generative(
    variant_dir: Path,
    manifest: VariantManifest,
    flavor: str,
    name: str,
    defaults: ServingDefaults,
    overrides: dict,
) -> ModelPlan:
    """The ModelConfig and the files of one generative variant (pure: no writes)."""
    if flavor == "ngc":
        raise BadInputError(
            f"{variant_dir}: generative variants are served by the local or torch-cuda flavor "
            "(the NGC recipes are TensorRT-LLM's, see the variant's build script)"
        )
    generative = manifest.card.get("generative") or {}
    params = _params(manifest, generative, flavor, defaults, overrides)
    copies: list[tuple[Path, str]] = [(_template(), "1/model.py"), (_engine(), "1/llm_engine.py")]
    copies += _folder(variant_dir / "tokenizer", "1/tokenizer", required=True)
    if flavor == "torch-cuda":
        copies += _folder(variant_dir / "hf", "1/hf", required=True)
    else:
        onnx_file = variant_dir / manifest.model_file
        if not onnx_file.is_file():
            raise BadInputError(f"{variant_dir}: no {onnx_file.name} to serve")
        copies.append((onnx_file, "1/model.onnx"))
        data = onnx_file.with_name(onnx_file.name + ".data")
        if data.is_file():
            copies.append((data, f"1/{data.name}"))
    return ModelPlan(name, _config(name, params, defaults, overrides), tuple(copies), "python")


def _params(
    manifest: VariantManifest, generative: dict, flavor: str, defaults: Any, overrides: dict
) -> dict[str, str]:
    context = int(generative.get("context_length") or 2048)
    values = {
        "max_sequences": DEFAULT_MAX_SEQUENCES,
        "max_context": context,
        "max_prefill_tokens": DEFAULT_MAX_PREFILL_TOKENS,
    }
    for key in LLM_KEYS:
        if key in overrides:
            value = overrides[key]
            if not isinstance(value, int) or value < 1:
                raise BadInputError(f"serving override {key}={value!r}: expected a positive integer")
            values[key] = value
    if values["max_context"] > context:
        raise BadInputError(
            f"max_context {values['max_context']} exceeds the model's context length {context}"
        )
    params = {key: str(value) for key, value in values.items()}
    params["intra_op_threads"] = str(pbconfig.threads(defaults, overrides))
    params["tokenizer_dir"] = "tokenizer"
    if generative.get("eos_token_id") is not None:
        params["eos_token_id"] = str(generative["eos_token_id"])
    if flavor == "torch-cuda":
        params.update(engine="torch", hf_dir="hf", device=str(overrides.get("device") or "cuda"))
        params["dtype"] = str(overrides.get("dtype") or _torch_dtype(manifest.precision))
    else:
        params.update(engine="onnxruntime", onnx_file="model.onnx")
    return params


def _torch_dtype(precision: str) -> str:
    # an fp32 variant is served in bf16 on the GPU (the checkpoint is cast at load), like vLLM's "auto"
    return {"fp16": "float16", "fp32": "bfloat16", "bf16": "bfloat16"}.get(precision, "bfloat16")


def _config(name: str, params: dict[str, str], defaults: Any, overrides: dict) -> Any:
    pb = pbconfig.pb_module()
    config = pb.ModelConfig(name=name, backend="python", max_batch_size=0)
    config.model_transaction_policy.decoupled = True
    for tensor_name, data_type, dims in INPUTS:
        tensor = config.input.add(name=tensor_name, data_type=pb.DataType.Value(data_type), optional=True)
        tensor.dims.extend(dims)
    for tensor_name, data_type, dims in OUTPUTS:
        tensor = config.output.add(name=tensor_name, data_type=pb.DataType.Value(data_type))
        tensor.dims.extend(dims)
    # one instance: the scheduler batches inside it (a second instance would split the running batch)
    config.instance_group.add(kind=pb.ModelInstanceGroup.Kind.Value("KIND_CPU"), count=1)
    for key, value in params.items():
        config.parameters[key].string_value = value
    # numeric tensors cross by DLPack under numpy 2; the BYTES ones then are left out (llm_model.py)
    config.parameters["tensor_transport"].string_value = "dlpack"
    return config


def _folder(src: Path, dest: str, required: bool) -> list[tuple[Path, str]]:
    if not src.is_dir():
        if required:
            raise BadInputError(f"{src.parent}: the generative variant has no {src.name}/ folder")
        return []
    return [(path, f"{dest}/{path.name}") for path in sorted(src.iterdir()) if path.is_file()]


def _template() -> Path:
    return Path(str(resources.files("accelbench.serving") / "llm_model.py"))


def _engine() -> Path:
    return Path(str(resources.files("accelbench.serving") / "llm_engine.py"))
