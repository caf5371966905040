"""NxD Inference on AWS Inferentia2: compile the Hugging Face checkpoint for the NeuronCores.

AWS serves LLMs on Inf2 through NxD Inference (``neuronx-distributed-inference``; the NxDI docs are marked
"relevant for Inf2, Trn1, Trn2"), and vLLM on Neuron loads NxDI's compiled artifacts. The recipe compiles
once with NxDI's ``inference_demo ... run --compile-only`` into ``engine/`` (NEFFs and the serialized
config, reusable on any inf2 with the same SDK); tensor parallelism spans the instance's NeuronCores (2 on an
inf2.xlarge). Neuron needs fixed shapes: batch size, context and sequence length are compiled in.
"""

from __future__ import annotations

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.models.toolchains import llm_recipes as common

ENGINES = ("vllm",)
VERSIONS = {
    "neuronx-distributed-inference": "0.9.0 (Neuron pip index; DLAMI venv aws_neuronx_venv_pytorch_*_nxd_inference)",
    "Neuron SDK": "2.2x with NxD Inference 0.9 (neuronx-cc, torch-neuronx, aws-neuronx-runtime-lib)",
}
# inference_demo --model-type choices (MODEL_TYPES in inference_demo.py at 4bcdc54)
MODEL_TYPES = ("llama", "mistral", "mixtral", "dbrx", "qwen2", "qwen3", "qwen3_moe", "gemma3")
TORCH_DTYPE = {"bf16": "bfloat16"}
BATCH_SIZE = 4
SOURCES = [
    "https://github.com/aws-neuron/neuronx-distributed-inference/blob/4bcdc54bf3b6ccdad490e5cd0680a3dc95270b8e/src/neuronx_distributed_inference/inference_demo.py"
    " (argparse, NxDI 0.9.0)",
    "https://github.com/aws-neuron/neuronx-distributed-inference/blob/4bcdc54bf3b6ccdad490e5cd0680a3dc95270b8e/README.md"
    " ('Run inference with the inference demo')",
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/libraries/nxd-inference/api-guides/index.html"
    " (relevant for Inf2, Trn1, Trn2)",
    "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/libraries/nxd-inference/vllm/quickstart-vllm-online-serving.html",
]


def precisions(target: HardwareTarget | None = None) -> tuple[str, ...]:
    return ("bf16",)


def default_precision(target: HardwareTarget | None = None) -> str:
    return "bf16"


def refusal(target: HardwareTarget, precision: str) -> str | None:
    return None


def tp_degree(target: HardwareTarget, shape: common.RecipeModel | None = None) -> int:
    """The instance's NeuronCores, or the largest count below that divides the attention heads."""
    cores = int((getattr(target, "extra", None) or {}).get("neuroncores") or 2)  # the catalog's neuroncores
    heads = shape.heads if shape is not None and shape.heads else cores
    return max(tp for tp in range(1, cores + 1) if heads % tp == 0)


def requirements(target: HardwareTarget, precision: str, shape: common.RecipeModel) -> list[str]:
    return [
        f"an {target.name} with the Neuron driver (/dev/neuron0; aws-neuronx-dkms) and {tp_degree(target, shape)} "
        "NeuronCores free",
        "NxD Inference 0.9 (inference_demo on PATH): the Neuron DLAMI's NxD Inference venv, or pip install "
        "neuronx-distributed-inference --extra-index-url=https://pip.repos.neuron.amazonaws.com",
    ]


def _script(target: HardwareTarget, precision: str, shape: common.RecipeModel, requires: list[str]) -> str:
    header = common.script_header(
        target, f"nxdi-{precision}", VERSIONS, requires, SOURCES, "[check|build]  (default: build)"
    )
    seq_len = min(shape.context_length, 2048)
    preflight = (
        "preflight() {  # an Inferentia2 with NxD Inference, or one line and exit 1 / 3\n"
        '  if ! compgen -G "/dev/neuron*" >/dev/null && [[ -z "${ACCELBENCH_FORCE:-}" ]]; then\n'
        f'    die 1 "no Neuron device (/dev/neuron0) on this host: run this on an {target.name}"\n'
        "  fi\n"
        '  need inference_demo "activate the Neuron DLAMI NxD Inference venv, or pip install '
        'neuronx-distributed-inference --extra-index-url=https://pip.repos.neuron.amazonaws.com"\n'
        "}\n"
    )
    build = (
        "build() {  # compile for the NeuronCores; the prompt only feeds the compile-time warm-up\n"
        "  preflight\n"
        f"  rm -rf {common.ENGINE_DIR}\n"
        f"  inference_demo --model-type {shape.model_type} --task-type causal-lm run \\\n"
        f"    --model-path {common.HF_DIR} --compiled-model-path {common.ENGINE_DIR} "
        f"--torch-dtype {TORCH_DTYPE[precision]} \\\n"
        f"    --tp-degree {tp_degree(target, shape)} --batch-size {BATCH_SIZE} --max-context-length {seq_len // 2} "
        f"--seq-len {seq_len} \\\n"
        f"    --on-device-sampling --top-k 1 --pad-token-id {shape.eos_token_id or 0} --enable-bucketing "
        "--compile-only \\\n"
        '    --prompt "accelbench compile"\n'
        "}\n"
    )
    check = common.check_function()
    actions = {"check": "check", "build": "build"}
    return "\n".join([header + preflight, check, build, common.dispatch(actions, "build")])


def recipe(target: HardwareTarget, precision: str, shape: common.RecipeModel) -> common.Recipe:
    if shape.model_type not in MODEL_TYPES:
        raise BadInputError(
            f"NxD Inference's inference_demo has no model type {shape.model_type!r} "
            f"(config.json model_type); it takes {', '.join(MODEL_TYPES)}"
        )
    requires = requirements(target, precision, shape)
    return common.Recipe(
        recipe=f"nxdi-{precision}",
        tool="neuronx-distributed-inference",
        versions=dict(VERSIONS),
        requires=requires,
        produces=(
            f"{common.ENGINE_DIR}/: NxD Inference compiled artifacts (NEFFs, neuron_config.json) for "
            f"tp {tp_degree(target, shape)}, batch {BATCH_SIZE}, that vLLM on Neuron (NxDI) serves"
        ),
        commands=["inference_demo"],
        serving_engine="vllm",
        script=_script(target, precision, shape, requires),
        sources=list(SOURCES),
        notes=[f"compiled for batch {BATCH_SIZE} and sequence length {min(shape.context_length, 2048)}"],
    )
