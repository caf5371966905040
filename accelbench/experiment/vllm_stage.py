"""``engine = "vllm"`` in ``accelbench run``: the variant vLLM serves, and where it is served.

A generative model served by vLLM is not quantized by accelbench: vLLM reads the Hugging Face checkpoint and
casts or quantizes it itself. Its variant folder (``<model>__<target>__<precision>``, like the others) holds
``hf/`` (checkpoint, tokenizer, a chat template for builtins) and a manifest whose ``engine`` block records
``serving_engine = "vllm"``, vLLM's version and the engine arguments the spec decides (``model.json``).

Where: a cpu target runs vLLM's CPU build inside the bundled Triton (accelbench's python-backend model,
``serving/vllm_model.py``, in a numpy<2 stub environment over the vLLM venv); an NVIDIA datacenter GPU gets
the same repository written for the NGC ``<yy.mm>-vllm-python-py3`` container and the command that serves
it (nothing runs here), or is measured at its ``url`` once served there. GPU targets use vLLM for
generative models unless the spec names another engine (the TensorRT-LLM recipe: ``engine = "trtllm"``).
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError
from accelbench.experiment.spec import DEFAULT_ENGINE, ExperimentSpec, ModelSpec, TargetSpec
from accelbench.hardware.catalog import HardwareTarget

ENGINE = "vllm"
# the NGC Triton container that ships vLLM and the python backend (docs/serving.md "vLLM on a GPU")
NGC_IMAGE = "nvcr.io/nvidia/tritonserver"
NGC_TAG_SUFFIX = "vllm-python-py3"
NGC_RELEASE = "26.01"  # the Triton release whose OpenAI frontend left beta (LLM-NOTES.md, "Triton")
SERVE_SCRIPT = "serve_vllm.sh"
CONTAINER_REPOSITORY = "/models"
# what vLLM's CPU build needs at start (LLM-NOTES.md "vLLM's CPU build"): the KV cache in GiB, no hub
CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass(frozen=True)
class GpuLayout:
    """What ``run --target <gpu>`` wrote for vLLM: the repository, the script, the command in it."""

    target: str
    repository: Path
    script: Path
    command: str


def is_gpu(hw: HardwareTarget) -> bool:
    return getattr(hw, "kind", "") == "datacenter-gpu"


def uses_vllm(spec: ExperimentSpec, model: ModelSpec, target: TargetSpec, hw: HardwareTarget) -> bool:
    """Whether vLLM serves ``model`` on ``target``: named, or a generative model on an NVIDIA datacenter GPU
    whose spec names no engine (the TensorRT-LLM recipe is ``engine = "trtllm"``)."""
    from accelbench.models.toolchains.llm_recipes import vllm_serves

    engine = spec.engine_for(model, target)
    if engine == ENGINE:
        return vllm_serves(hw)
    return engine == DEFAULT_ENGINE and is_gpu(hw) and _generative(model.uri)


def _generative(uri: str) -> bool:
    from accelbench.models.cards import load_card

    try:
        return load_card(uri).task == "text-generation"
    except (BadInputError, OSError):
        return False


def engine_args(
    spec: ExperimentSpec, model: ModelSpec, name: str, precision: str, context: int, gpu: bool, hf: str
) -> dict[str, Any]:
    """``model.json``: the spec's precision, KV dtype, max batch and context as vLLM's engine arguments."""
    from accelbench.serving.vllm_engine import VllmArgs

    levels = [int(x) for x in spec.load.profile.levels] if spec.load.profile.kind == "closed" else []
    max_num_seqs = model.max_num_seqs or max([*levels, 1])
    max_model_len = model.max_model_len or context
    if max_model_len > context:
        raise BadInputError(
            f"{model.uri}: max_model_len {max_model_len} exceeds the model's context {context}"
        )
    args = VllmArgs.from_spec(
        hf,
        name,
        precision,
        max_num_seqs,
        max_model_len,
        model.kv_cache_dtype or "auto",
        gpu=gpu,
        enforce_eager=model.enforce_eager,
    )
    return args.model_json()


def write_variant(
    spec: ExperimentSpec, model: ModelSpec, hw: HardwareTarget, precision: str, variants_dir: Path
) -> VariantManifest:
    """The vLLM variant folder (hf/ and manifest.json) for (model, target, precision)."""
    from accelbench.models import accuracy
    from accelbench.models.cards import load_card
    from accelbench.models.manifest import variant_name, write_manifest
    from accelbench.models.toolchains.llm_recipes import checkpoint_of
    from accelbench.serving.install_vllm import VLLM_VERSION
    from accelbench.serving.vllm_engine import prepare_model_dir
    from accelbench.util import sha256_file, sha256_json

    card = load_card(model.uri)
    if card.task != "text-generation" or card.generative is None:
        raise BadInputError(
            f"{model.uri}: engine 'vllm' serves generative models (task text-generation) only"
        )
    hf_dir, tokenizer_dir = checkpoint_of(card)
    out = variants_dir / variant_name(card.name, hw.id, precision)
    out.mkdir(parents=True, exist_ok=True)
    prepare_model_dir(hf_dir, tokenizer_dir, out / "hf")
    # the load generator reads the tokenizer from the variant's tokenizer/ (loadtests.generative)
    if tokenizer_dir is not None:
        prepare_model_dir(hf_dir, tokenizer_dir, out / "tokenizer")
    gpu = is_gpu(hw)
    name = variant_name(card.name, hw.id, precision)
    context = int(card.generative.context_length or 2048)
    args = engine_args(spec, model, name, precision, context, gpu, "hf")
    digest = sha256_json({p.name: sha256_file(p) for p in sorted((out / "hf").iterdir()) if p.is_file()})
    metric = getattr(getattr(card, "accuracy", None), "metric", None) or "next_token_agreement"
    manifest = {
        "name": out.name,
        "model": card.name,
        "card": card.to_dict(),
        "source": {"uri": model.uri, "sha256": digest},
        "target": hw.id,
        "precision": precision,
        "recipe": f"vllm-{args['dtype']}",
        "format": "hf-checkpoint",
        "model_file": "hf",
        "toolchain": {"name": "vllm", "version": VLLM_VERSION},
        "inputs": [t.to_dict() for t in card.inputs],
        "outputs": [t.to_dict() for t in getattr(card, "outputs", ())],
        "calibration": None,
        "accuracy": accuracy.not_run(
            metric, 0.0, f"vLLM loads hf/ as it is ({args['dtype']}); no accelbench quantization to gate"
        ),
        "graph_cost": None,
        "engine": {
            "status": "must-build-on-target" if gpu else "built",
            "serving_engine": ENGINE,
            "tool": "vllm",
            "versions": {"vllm": VLLM_VERSION},
            "args": args,
        },
        "attempts": [{"recipe": f"vllm-{args['dtype']}", "outcome": "ok", "reason": "checkpoint for vLLM"}],
    }
    return write_manifest(out, manifest)


def is_vllm_variant(manifest: VariantManifest) -> bool:
    engine = manifest.engine
    return engine is not None and (engine.model_extra or {}).get("serving_engine") == ENGINE


def variant_args(manifest: VariantManifest) -> dict[str, Any]:
    assert manifest.engine is not None
    return dict((manifest.engine.model_extra or {}).get("args") or {})


def write_repository(
    variant_dirs: list[Path], manifests: list[VariantManifest], repo: Path, gpu: bool
) -> None:
    """One Triton model per vLLM variant in ``repo`` (the local stub's paths, or the container's)."""
    from accelbench.serving.vllm_engine import write_vllm_model

    repo.mkdir(parents=True, exist_ok=True)
    for folder, manifest in zip(variant_dirs, manifests, strict=True):
        args = variant_args(manifest)
        write_vllm_model(repo, manifest.name, folder / "hf", args, gpu=gpu)


def stub_environment() -> tuple[Path, tuple[Path, ...], dict[str, str]]:
    """(stub environment, library folders first, variables) for a Triton that serves vLLM models here.

    The embedded stub links the system's libpython3.11 but takes its standard library from the ``python3``
    first on PATH (the stub environment's, i.e. this interpreter's): their versions must agree, else
    ``_ssl`` fails (``undefined symbol: _PyModule_Add`` with Debian's 3.11.2 beside a 3.11.7 stdlib), so
    this interpreter's own libpython goes first (docs/serving.md "vLLM")."""
    from accelbench.serving.install_vllm import build_vllm_stub_env

    stub = build_vllm_stub_env()
    libdir = Path(str(sysconfig.get_config_var("LIBDIR") or ""))
    soname = str(sysconfig.get_config_var("INSTSONAME") or "")
    libs = (libdir,) if soname.startswith("libpython") and (libdir / soname).is_file() else ()
    return stub, libs, dict(CPU_ENV)


def write_gpu_layout(
    variant_dirs: list[Path], manifests: list[VariantManifest], target: str, out: Path
) -> GpuLayout:
    """The repository and ``serve_vllm.sh`` a GPU host runs in the NGC vLLM container (nothing runs here)."""
    repo = out / "repository" / target
    write_repository(variant_dirs, manifests, repo, gpu=True)
    image = f"{NGC_IMAGE}:{NGC_RELEASE}-{NGC_TAG_SUFFIX}"
    command = (
        f"docker run --rm --gpus all --shm-size=1g -p 8000:8000 -p 8001:8001 -p 8002:8002 "
        f'-v "$(cd "$(dirname "$0")" && pwd)/repository/{target}:{CONTAINER_REPOSITORY}" {image} '
        f"tritonserver --model-repository={CONTAINER_REPOSITORY}"
    )
    script = out / f"{SERVE_SCRIPT.removesuffix('.sh')}-{target}.sh"
    lines = [
        "#!/usr/bin/env bash",
        f"# Serves {', '.join(m.name for m in manifests)} with vLLM in Triton's NGC container on this GPU host.",
        '# Then measure it from any host: accelbench run SPEC with this target\'s mode = "url",',
        '# url = "http://GPU-HOST:8000" (or: accelbench loadtest --api triton --url http://GPU-HOST:8000 ...).',
        "set -euo pipefail",
        command,
        "",
    ]
    script.write_text("\n".join(lines))
    script.chmod(0o755)
    return GpuLayout(target, repo, script, command)


def provenance_engine(manifest: VariantManifest, version: str) -> dict[str, Any]:
    """The result's ``provenance.engine``: name, version, the engine arguments served."""
    return {"name": ENGINE, "version": version, "args": variant_args(manifest)}


def describe(layout: GpuLayout) -> str:
    return f"{layout.target}: wrote {layout.repository} and {layout.script} (run it on the GPU host)"
