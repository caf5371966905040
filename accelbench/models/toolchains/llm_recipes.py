"""Generative-model recipes for the accelerators: a script written into the variant folder, run on the target.

A decoder-only model is not quantized to an ONNX for TensorRT, Jetson or Inferentia: each vendor has its own
LLM stack that reads the Hugging Face checkpoint and builds its engine on the device (docs/quantization.md,
"Generative models on the accelerators"):

    NVIDIA datacenter GPUs  TensorRT-LLM (PyTorch backend) serving a ModelOpt-quantized checkpoint  trtllm.py
    Jetson Orin             TensorRT Edge-LLM: quantize, export ONNX, build the engine on the Orin  jetson_llm.py
    AWS Inferentia2         NxD Inference: compile the checkpoint for the NeuronCores              neuron_llm.py

``write_recipe`` writes ``<out>/<model>__<target>__<precision>/`` with the checkpoint in ``hf/`` (the script's
input), ``build_engine.sh`` (the command, the versions it expects, what the target must have; ``bash -n`` and
shellcheck clean) and ``manifest.json`` (``engine.status = must-build-on-target``). Nothing here needs a GPU.

Each target module exposes the same functions: ``precisions(target)``, ``default_precision(target)``,
``refusal(target, precision)`` (None, or the one line saying why that precision cannot run there), ``recipe(
target, precision, shape) -> Recipe`` and ``ENGINES`` (the serving engines the spec may name for it).
"""

from __future__ import annotations

import importlib
import json
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.processes import end_group, start_group

SCRIPT_FILE = "build_engine.sh"
HF_DIR = "hf"
ENGINE_DIR = "engine"
SERVING_ENGINES = ("triton-python", "trtllm", "vllm")
# files of a Hugging Face checkpoint the recipes read (weights, config, tokenizer); nothing else is copied
_HF_SUFFIXES = (".json", ".safetensors", ".model", ".txt", ".tiktoken", ".jinja")


@dataclass(frozen=True)
class RecipeModel:
    """What a recipe needs to know about the model: from the card's [generative] table and hf/config.json.
    Not the transformer's shape (``hardware.llm_memory.ModelShape``): its type, context, EOS, size, heads."""

    name: str
    model_type: str  # config.json "model_type" (llama, qwen2, ...)
    context_length: int
    eos_token_id: int | None = None
    params: int | None = None
    heads: int | None = None  # config.json num_attention_heads: tensor parallelism must divide it


@dataclass(frozen=True)
class Recipe:
    """One target's generative recipe: what it runs, what it expects, what it produces."""

    recipe: str  # e.g. trtllm-modelopt-fp8
    tool: str  # the stack, e.g. tensorrt-llm
    versions: dict[str, str]  # package -> the version the script was written against
    requires: list[str]  # what the target must have, one line each
    produces: str  # the engine, in words (and where it lands)
    commands: list[str]  # the documented tools the script calls (their options are checked in tests)
    serving_engine: str  # trtllm | vllm
    script: str  # the bash text of build_engine.sh
    sources: list[str] = field(default_factory=list)  # the documents the commands were taken from
    notes: list[str] = field(default_factory=list)


def target_module(target: HardwareTarget) -> ModuleType:
    """The recipe module for a catalog target (TensorRT GPUs, Jetson, Inferentia2)."""
    kind = getattr(target, "kind", "")
    name = {"datacenter-gpu": "trtllm", "edge-gpu": "jetson_llm", "inferentia": "neuron_llm"}.get(kind)
    if name is None or getattr(target, "toolchain", None) not in ("tensorrt", "neuron"):
        raise ToolchainMissingError(
            f"target {getattr(target, 'id', target)} ({kind or 'unknown kind'}) has no generative recipe; "
            "generative models run on cpu targets (ONNX Runtime), NVIDIA GPUs, Jetson Orin and Inferentia2"
        )
    return importlib.import_module(f"accelbench.models.toolchains.{name}")


def choose_precision(module: ModuleType, target: HardwareTarget, precision: str | None) -> str:
    """The precision to build: the asked one when the target can run it, else one clear line."""
    chosen = precision or module.default_precision(target)
    if chosen not in module.precisions(target):
        raise BadInputError(
            f"precision {chosen!r} has no generative recipe for {target.id}; "
            f"choose one of {', '.join(module.precisions(target))}"
        )
    why = module.refusal(target, chosen)
    if why:
        raise BadInputError(why)
    return chosen


def check_engine(target: HardwareTarget, engine: str) -> None:
    """BadInputError unless ``engine`` can serve generative models on ``target`` (spec validation)."""
    if engine not in SERVING_ENGINES:
        raise BadInputError(f"engine {engine!r} is not one of {', '.join(SERVING_ENGINES)}")
    if engine == "triton-python":
        return
    if engine == "vllm" and vllm_serves(target):
        return
    module = target_module(target)
    if engine not in module.ENGINES:
        raise BadInputError(
            f"engine {engine!r} does not run on {target.id}; it takes {', '.join(module.ENGINES)} "
            "(or triton-python)"
        )


def vllm_serves(target: HardwareTarget) -> bool:
    """Whether ``engine = "vllm"`` runs vLLM itself on ``target`` through Triton (serving/vllm_engine.py):
    its CPU build on cpu targets, the NGC ``-vllm-python-py3`` container on NVIDIA datacenter GPUs. (On
    Inferentia2, vllm is the Neuron recipe's serving engine.)"""
    return (
        getattr(target, "toolchain", None) == "onnxruntime-cpu"
        or getattr(target, "kind", "") == "datacenter-gpu"
    )


def recipe_model(card: Any, hf_dir: Path) -> RecipeModel:
    """The model's type and context length from hf/config.json and the card."""
    config_path = hf_dir / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInputError(f"{config_path}: the Hugging Face checkpoint has no config.json") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise BadInputError(f"{config_path}: not valid JSON ({err})") from None
    generative = getattr(card, "generative", None)
    context = getattr(generative, "context_length", None) or config.get("max_position_embeddings")
    eos = getattr(generative, "eos_token_id", None)
    if eos is None and isinstance(config.get("eos_token_id"), int):
        eos = config["eos_token_id"]
    if not isinstance(context, int) or context < 2:
        raise BadInputError(f"{config_path}: no context length (max_position_embeddings) for the recipe")
    return RecipeModel(
        name=card.name,
        model_type=str(config.get("model_type") or ""),
        context_length=context,
        eos_token_id=eos,
        params=getattr(generative, "params", None),
        heads=config.get("num_attention_heads")
        if isinstance(config.get("num_attention_heads"), int)
        else None,
    )


def copy_checkpoint(src: Path, dst: Path) -> list[str]:
    """Copy the checkpoint's config, weights and tokenizer files into ``dst``; returns the names copied."""
    if not (src / "config.json").is_file():
        raise BadInputError(f"{src}: not a Hugging Face checkpoint (no config.json)")
    if not any(src.glob("*.safetensors")):
        raise BadInputError(
            f"{src}: the checkpoint has no .safetensors weights (the recipes read safetensors)"
        )
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    copied = []
    for path in sorted(src.iterdir()):
        if path.is_file() and path.suffix in _HF_SUFFIXES:
            shutil.copyfile(path, dst / path.name)
            copied.append(path.name)
    return copied


def copy_tokenizer(src: Path, *destinations: Path) -> None:
    """The tokenizer files (tokenizer.json, tokenizer_config.json, vocab.txt, ...) into each destination."""
    for dst in destinations:
        dst.mkdir(parents=True, exist_ok=True)
        for path in sorted(src.iterdir()):
            if path.is_file() and path.suffix in _HF_SUFFIXES and not (dst / path.name).exists():
                shutil.copyfile(path, dst / path.name)


def engine_block(target: HardwareTarget, recipe: Recipe) -> dict[str, Any]:
    """The manifest's ``engine``: not built here, the script, and the recipe's facts (extra keys allowed)."""
    return {
        "status": "must-build-on-target",
        "script": SCRIPT_FILE,
        "host_requirement": recipe.requires[0],  # the device; `requires` has the whole list
        "requires": list(recipe.requires),
        "tool": recipe.tool,
        "versions": dict(recipe.versions),
        "produces": recipe.produces,
        "serving_engine": recipe.serving_engine,
        "commands": list(recipe.commands),
        "sources": list(recipe.sources),
    }


def write_script(out: Path, recipe: Recipe) -> Path:
    path = out / SCRIPT_FILE
    path.write_text(recipe.script, encoding="utf-8")
    path.chmod(0o755)
    return path


def script_header(
    target: HardwareTarget,
    recipe: str,
    versions: dict[str, str],
    requires: list[str],
    sources: list[str],
    usage: str,
) -> str:
    """The top of every build_engine.sh: what it builds, what it expects, where the commands come from."""
    lines = [
        "#!/usr/bin/env bash",
        f"# accelbench generative recipe {recipe} for {target.name} ({target.id}). Run it ON THE TARGET:",
        "# the engine is specific to the device and to the versions below, so it cannot be built ahead of time.",
        "#",
        "# Versions this script was written against:",
        *(f"#   {name} {version}" for name, version in versions.items()),
        "# The target must have:",
        *(f"#   - {line}" for line in requires),
        "# Commands and options from:",
        *(f"#   {source}" for source in sources),
        "#",
        f"# Usage: ./{SCRIPT_FILE} {usage}",
        "# Exit status: 0 done, 1 wrong device, 2 missing input, 3 toolchain missing (one line on stderr).",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        "",
        "die() {",
        f'  echo "{SCRIPT_FILE}: $2" >&2',
        '  exit "$1"',
        "}",
        "",
        "need() {  # need COMMAND HINT: exit 3 when COMMAND is not on PATH",
        '  command -v "$1" >/dev/null 2>&1 || die 3 "$1 not found: $2"',
        "}",
        "",
        f'[[ -f {HF_DIR}/config.json ]] || die 2 "{HF_DIR}/config.json is missing: rerun accelbench quantize"',
        "",
    ]
    return "\n".join(lines) + "\n"


def check_function(prerequisites: str = "preflight", ready: str = "toolchain ready") -> str:
    """``check``: run the prerequisites (device, tools) and say so; what the agent runs before ``build``."""
    return f'check() {{\n  {prerequisites}\n  echo "{SCRIPT_FILE}: {ready}" >&2\n}}\n'


def dispatch(actions: dict[str, str], default: str) -> str:
    """The ``case`` that runs one action (a bash function name) chosen by the first argument."""
    names = "|".join(actions)
    body = "\n".join(f"  {name}) {fn} ;;" for name, fn in actions.items())
    return (
        f'ACTION="${{1:-{default}}}"\n'
        'case "$ACTION" in\n'
        f"{body}\n"
        f"  *) die 2 \"unknown action '$ACTION' (one of: {names.replace('|', ', ')})\" ;;\n"
        "esac\n"
    )


# precisions accelbench's own torch-cuda Triton model serves from hf/ on a GPU (quantize_llm.GPU_PRECISIONS)
TORCH_CUDA_PRECISIONS = ("fp32", "bf16", "fp16")


def wants_recipe(target: HardwareTarget, precision: str | None, engine: str | None = None) -> bool:
    """Whether a generative model on ``target`` gets this module's recipe folder: every Inferentia2 variant,
    the quantized NVIDIA ones (fp8, int4, int8), and whatever a trtllm / vllm engine asks for."""
    toolchain = getattr(target, "toolchain", None)
    if toolchain not in ("tensorrt", "neuron"):
        return False
    if engine in ("trtllm", "vllm") or toolchain == "neuron":
        return True
    return precision is not None and precision not in TORCH_CUDA_PRECISIONS


def checkpoint_of(card: Any) -> tuple[Path, Path | None]:
    """(the Hugging Face checkpoint, the tokenizer folder) of a generative card, built for builtins; an
    hf:DIR checkpoint is read where it is (its tokenizer files are in it), nothing is exported."""
    if getattr(card, "source_scheme", "") == "builtin":
        from accelbench.models.export_llm import generative_files  # builds the fixed-seed checkpoint once

        files = generative_files(card)
        return files.hf_dir, files.tokenizer_dir
    spec = card.generative
    return Path(spec.hf_dir or card.resolve_path(card.source_value)), None


def write_recipe(
    card: Any,
    hf_dir: Path,
    tokenizer_dir: Path | None,
    target: HardwareTarget,
    precision: str | None,
    out_dir: Path,
    source_uri: str,
) -> tuple[VariantManifest, Recipe]:
    """Write the recipe folder (hf/, tokenizer/, build_engine.sh, manifest.json); returns (manifest, recipe)."""
    from accelbench.models import accuracy
    from accelbench.models.manifest import variant_name, write_manifest
    from accelbench.util import sha256_file, sha256_json

    module = target_module(target)
    chosen = choose_precision(module, target, precision)
    if not (Path(hf_dir) / "config.json").is_file():
        raise BadInputError(f"{hf_dir}: not a Hugging Face checkpoint (no config.json)")
    shape = recipe_model(card, Path(hf_dir))
    recipe = module.recipe(target, chosen, shape)  # before any file is written: a refusal leaves nothing
    out = Path(out_dir) / variant_name(card.name, target.id, chosen)
    out.mkdir(parents=True, exist_ok=True)
    copied = copy_checkpoint(Path(hf_dir), out / HF_DIR)
    if tokenizer_dir is not None:  # the recipes' tools read the tokenizer from the checkpoint folder
        copy_tokenizer(Path(tokenizer_dir), out / HF_DIR, out / "tokenizer")
    write_script(out, recipe)
    metric = getattr(getattr(card, "accuracy", None), "metric", None) or "next_token_agreement"
    tolerance = getattr(getattr(card, "accuracy", None), "tolerance", None) or 0.0
    digest = sha256_json({name: sha256_file(out / HF_DIR / name) for name in copied})
    manifest = {
        "name": out.name,
        "model": card.name,
        "card": card.to_dict(),
        "source": {"uri": source_uri, "sha256": digest},
        "target": target.id,
        "precision": chosen,
        "recipe": recipe.recipe,
        "format": "hf-checkpoint",
        "model_file": HF_DIR,
        "toolchain": {"name": recipe.tool, "version": next(iter(recipe.versions.values()))},
        "inputs": [t.to_dict() for t in card.inputs],
        "outputs": [t.to_dict() for t in getattr(card, "outputs", ())],
        "calibration": None,
        "accuracy": accuracy.not_run(
            metric, tolerance, f"the {chosen} engine is built on the target; gate it there against {HF_DIR}/"
        ),
        "graph_cost": None,
        "engine": engine_block(target, recipe),
        "attempts": [
            {"recipe": recipe.recipe, "outcome": "ok", "reason": "recipe written; build on the target"}
        ],
    }
    return write_manifest(out, manifest), recipe


def run_script(folder: Path, action: str, log: Any = None) -> tuple[int, str]:
    """Run ``build_engine.sh ACTION`` in ``folder`` in its own process group, each output line to ``log``;
    returns (exit status, the last line it printed). A stop (KeyboardInterrupt) ends the whole group."""
    proc = start_group(
        ["bash", str(folder / SCRIPT_FILE), action],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    last = ""
    try:
        for line in proc.stdout or ():
            line = line.rstrip()
            if line:
                last = line
                if log is not None:
                    log(line)
        proc.wait()
    finally:
        end_group(proc, first=None if proc.poll() is not None else signal.SIGTERM)
    return proc.returncode, last
