"""Triton model repositories from quantized variants: plan each model's ``ModelConfig`` (pure), then write
``<repo>/<name>/config.pbtxt`` (protobuf text format, never string templates) and ``1/<model file>``.

Flavours: ``local`` wraps the ONNX in a python-backend ``model.py`` for the embedded tritonserver (python
backend only); ``ngc`` uses the native backends of the NGC container on the target (onnxruntime with the
TensorRT accelerator for GPU targets shipping QDQ ONNX, tensorrt for a built plan, onnxruntime on CPU);
``torch-cuda`` is a python-backend ``model.py`` that runs the ONNX graph with PyTorch on the GPU (bf16/fp16,
CUDA graphs), for the embedded server on a GPU host without TensorRT (accelbench.serving.torch_flavor).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import Catalog, HardwareTarget, load_catalog
from accelbench.serving import llm_repository, pbconfig, torch_flavor
from accelbench.serving.plans import ModelPlan, ServingDefaults
from accelbench.util import atomic_write_text, sha256_file

FLAVORS = ("local", "ngc", "torch-cuda")
GPU_KINDS = ("datacenter-gpu", "edge-gpu")
OVERRIDE_KEYS = (
    "max_batch_size",
    "instance_kind",
    "instance_count",
    "preferred_batch_sizes",
    "max_queue_delay_us",
    "intra_op_threads",
    "warmup",
    "precision_mode",
    "model_root",
    "device",  # torch-cuda: cuda | cpu
    "dtype",  # torch-cuda: bfloat16 | float16 | float32
    "torch_mode",  # torch-cuda: cuda_graphs | compile | eager
    "max_sequences",  # generative: sequences in the running batch
    "max_context",  # generative: prompt + output tokens allowed
    "max_prefill_tokens",  # generative: prompt tokens prefilled together
    "tensor_transport",  # local: dlpack | numpy (how tensors cross the python-backend stub)
)
_PRECISION_MODE = {"int8": "INT8", "fp16": "FP16", "bf16": "BF16"}


@dataclass(frozen=True)
class RepoModel:
    """One model of a written repository."""

    name: str
    path: Path  # <repo>/<name>
    variant_dir: Path
    backend: str
    config_pbtxt: str
    manifest_hash: str | None
    files: dict[str, str] = field(default_factory=dict)  # relative path in model dir -> sha256
    notes: tuple[str, ...] = ()


def read_variant_manifest(variant_dir: str | os.PathLike) -> VariantManifest:
    """The variant's manifest.json, validated (models.manifest.read_manifest)."""
    from accelbench.models.manifest import read_manifest

    return read_manifest(variant_dir)


def check_overrides(overrides: dict | None) -> dict:
    """Validate user overrides; unknown keys are an error that lists the allowed ones."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(OVERRIDE_KEYS))
    if unknown:
        raise BadInputError(f"unknown serving override(s) {unknown}; allowed: {', '.join(OVERRIDE_KEYS)}")
    kind = overrides.get("instance_kind")
    if kind is not None and kind not in ("KIND_CPU", "KIND_GPU", "KIND_AUTO", "KIND_MODEL"):
        raise BadInputError(f"instance_kind {kind!r}: expected KIND_CPU, KIND_GPU, KIND_AUTO or KIND_MODEL")
    preferred = overrides.get("preferred_batch_sizes")
    if preferred is not None and not (
        isinstance(preferred, list | tuple) and all(isinstance(b, int) and b > 0 for b in preferred)
    ):
        raise BadInputError(
            f"preferred_batch_sizes={preferred!r}: expected a list of positive integers, e.g. [4,8]"
        )
    mode = overrides.get("precision_mode")
    if mode is not None and mode not in ("FP32", "FP16", "BF16", "INT8"):
        raise BadInputError(f"precision_mode {mode!r}: expected FP32, FP16, BF16 or INT8")
    transport = overrides.get("tensor_transport")
    if transport is not None and transport not in ("dlpack", "numpy"):
        raise BadInputError(f"tensor_transport {transport!r}: expected dlpack or numpy")
    torch_flavor.check_torch_overrides(overrides)
    for key in ("max_batch_size", "instance_count", "max_queue_delay_us", "intra_op_threads"):
        value = overrides.get(key)
        if value is not None and (not isinstance(value, int) or value < 0):
            raise BadInputError(f"serving override {key}={value!r}: expected a non-negative integer")
    return overrides


def target_defaults(target: HardwareTarget | None, flavor: str) -> ServingDefaults:
    """Defaults for one catalog target (``HardwareTarget`` or None) in one flavour."""
    triton = getattr(target, "triton", None)
    kind = getattr(target, "kind", "cpu")

    def pick(name: str, default: Any) -> Any:
        value = getattr(triton, name, None) if triton is not None else None
        return default if value is None else value

    preferred = tuple(int(b) for b in pick("preferred_batch_sizes", ()))
    base = ServingDefaults(
        instance_kind=pick("instance_kind", "KIND_GPU" if kind in GPU_KINDS else "KIND_CPU"),
        instance_count=int(pick("instance_count", 1)),
        preferred_batch_sizes=preferred,
        max_queue_delay_us=int(pick("max_queue_delay_us", 0)),
        max_batch_size=int(pick("max_batch_size", max(preferred + (8,)))),
    )
    if flavor == "local" and kind != "cpu":
        # The embedded server runs everything on this host's CPU: a GPU target's instance layout and
        # queue delay would only distort the measurement here.
        return ServingDefaults(max_batch_size=base.max_batch_size)
    return base


def model_name(manifest: VariantManifest) -> str:
    # Triton model names become URL path segments; the manifest already maps "." to "-", this guards it
    name = manifest.name
    if not name:
        raise BadInputError("variant manifest has no name")
    return name.replace(".", "-").replace("/", "-")


def plan_model(
    variant_dir: Path,
    manifest: VariantManifest,
    flavor: str,
    target: HardwareTarget | None = None,
    overrides: dict | None = None,
) -> ModelPlan:
    """Pure planning step: the ModelConfig and the files for one variant (no writes)."""
    if flavor not in FLAVORS:
        raise BadInputError(f"flavor {flavor!r}: expected one of {', '.join(FLAVORS)}")
    overrides = check_overrides(overrides)
    defaults = target_defaults(target, flavor)
    name = model_name(manifest)
    if llm_repository.is_generative(manifest):
        return llm_repository.plan_generative(variant_dir, manifest, flavor, name, defaults, overrides)
    fmt = manifest.format
    model_file = variant_dir / manifest.model_file
    onnx_file = model_file if fmt == "onnx" else variant_dir / "model.onnx"
    shapes = _reference_shapes(variant_dir)
    why_not = unbatched_reason(manifest)
    io = pbconfig.IoSpec.from_manifest(manifest, shapes, batched=why_not is None)
    notes: list[str] = []
    if why_not is not None:
        notes.append(f"max_batch_size 0 with full shapes: {why_not}; the sweep varies concurrency only")
    if flavor == "local":
        if not onnx_file.is_file():
            raise BadInputError(
                f"{variant_dir}: the local flavor serves ONNX and this {fmt} variant has no model.onnx"
            )
        config = pbconfig.local_config(name, io, defaults, overrides)
        copies = ((onnx_file, "1/model.onnx"), *_external_data(onnx_file), (_template_path(), "1/model.py"))
        return ModelPlan(name, config, copies, "python", tuple(notes))
    is_gpu = getattr(target, "kind", "cpu") in GPU_KINDS
    if flavor == "torch-cuda":
        plan = _plan_torch(name, variant_dir, manifest, onnx_file, io, shapes, defaults, overrides, is_gpu)
        return dataclasses.replace(plan, notes=(*notes, *plan.notes))
    if fmt == "tensorrt-plan" and model_file.is_file():
        config = pbconfig.tensorrt_config(name, io, defaults, overrides)
        return ModelPlan(name, config, ((model_file, "1/model.plan"),), "tensorrt", tuple(notes))
    if fmt == "neuron":
        raise BadInputError(f"{variant_dir}: Neuron variants are not served by the ngc flavor yet")
    if not onnx_file.is_file():
        raise BadInputError(f"{variant_dir}: no {model_file.name} and no model.onnx to serve")
    if fmt == "tensorrt-plan":
        notes.append(
            "engine not built yet: serving the QDQ ONNX through onnxruntime's TensorRT accelerator, "
            "which builds and caches the engine on the target at load (model_warmup hides the build)"
        )
    precision = manifest.precision
    mode = (overrides.get("precision_mode") or _PRECISION_MODE.get(precision)) if is_gpu else None
    root = str(overrides.get("model_root") or "/models")
    config = pbconfig.onnxruntime_config(name, io, defaults, overrides, trt_precision=mode, model_root=root)
    copies = ((onnx_file, "1/model.onnx"), *_external_data(onnx_file))
    return ModelPlan(name, config, copies, "onnxruntime", tuple(notes))


def unbatched_reason(manifest: VariantManifest) -> str | None:
    """Why the variant's model cannot batch on the first axis (its card: a fixed batch, a batch axis
    elsewhere, fixed values), or None when Triton may batch its requests."""
    if not manifest.card:
        return None
    from accelbench.models.cards import card_from_dict

    return card_from_dict(manifest.card, f"{manifest.name} manifest card").batch_note


def _external_data(onnx_file: Path) -> tuple[tuple[Path, str], ...]:
    """The external-data file a large variant keeps beside its model.onnx (accelbench.models.intake)."""
    data = onnx_file.with_name(onnx_file.name + ".data")
    return ((data, f"1/{data.name}"),) if data.is_file() else ()


def _plan_torch(
    name: str,
    variant_dir: Path,
    manifest: VariantManifest,
    onnx_file: Path,
    io: Any,
    shapes: dict,
    defaults: ServingDefaults,
    overrides: dict,
    is_gpu: bool,
) -> ModelPlan:
    if not onnx_file.is_file():
        raise BadInputError(
            f"{variant_dir}: the torch-cuda flavor runs ONNX and this variant has no model.onnx"
        )
    overrides = dict(overrides, instance_kind=torch_flavor.instance_kind(overrides, defaults))
    threads = pbconfig.threads(defaults, overrides)
    params = torch_flavor.torch_params(
        manifest, io, shapes, defaults, overrides, "cuda" if is_gpu else "cpu", threads
    )
    config = pbconfig.torch_config(name, io, defaults, overrides, params)
    notes = () if params["static_dims"] else ("input shapes not fixed by the reference inputs: runs eager",)
    return ModelPlan(name, config, torch_flavor.copies(onnx_file), "python", notes)


def _reference_shapes(variant_dir: Path) -> dict[str, tuple[int, ...]]:
    """Concrete input shapes from the variant's reference inputs (warmup needs dims without -1)."""
    path = variant_dir / "reference" / "inputs.npz"
    if not path.is_file():
        return {}
    import numpy as np

    try:
        with np.load(path) as data:
            return {key: tuple(int(d) for d in data[key].shape) for key in data.files}
    except (OSError, ValueError):
        return {}


def _template_path() -> Path:
    return Path(str(resources.files("accelbench.serving") / "local_model.py"))


def write_repository(
    variant_dirs: list[str | os.PathLike],
    out_dir: str | os.PathLike,
    flavor: str = "local",
    overrides: dict | None = None,
    *,
    catalog: Catalog | None = None,
) -> list[RepoModel]:
    """Write one Triton model per variant under ``out_dir``; rerunning rewrites only what changed.

    ``catalog`` supplies per-target defaults; by default the packaged hardware catalog.
    """
    if not variant_dirs:
        raise BadInputError("no variant folders given")
    out = Path(out_dir)
    plans: list[tuple[Path, VariantManifest, ModelPlan]] = []
    for variant in variant_dirs:
        vdir = Path(variant)
        if not vdir.is_dir():
            raise BadInputError(f"{vdir}: no such variant folder")
        manifest = read_variant_manifest(vdir)
        target = _lookup_target(catalog, manifest.target)
        plans.append((vdir, manifest, plan_model(vdir, manifest, flavor, target, overrides)))
    names = [plan.name for _, _, plan in plans]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise BadInputError(f"two variants would share the Triton model name(s) {duplicates}")
    return [_write_model(out, vdir, manifest, plan) for vdir, manifest, plan in plans]


def _lookup_target(catalog: Catalog | None, target_id: str | None) -> HardwareTarget | None:
    if not target_id:
        return None
    return (catalog or load_catalog()).get(target_id)


def _write_model(out: Path, vdir: Path, manifest: VariantManifest, plan: ModelPlan) -> RepoModel:
    from google.protobuf import text_format

    model_dir = out / plan.name
    text = text_format.MessageToString(plan.config)
    files: dict[str, str] = {}
    for source, rel in plan.copies:
        dest = model_dir / rel
        digest = sha256_file(source)
        if not (dest.is_file() and sha256_file(dest) == digest):
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.tmp")
            shutil.copyfile(source, tmp)
            os.replace(tmp, dest)
        files[rel] = digest
    atomic_write_text(model_dir / "config.pbtxt", text)
    return RepoModel(
        name=plan.name,
        path=model_dir,
        variant_dir=vdir,
        backend=plan.backend,
        config_pbtxt=text,
        manifest_hash=manifest.manifest_hash,
        files=files,
        notes=plan.notes,
    )
