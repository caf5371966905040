"""TensorRT-LLM on NVIDIA datacenter GPUs: a ModelOpt-quantized checkpoint served by ``trtllm-serve``.

TensorRT-LLM removed its legacy TensorRT-engine backend (``convert_checkpoint.py`` → ``trtllm-build``) in
2026-07 (NVIDIA/TensorRT-LLM#15763, #15907, #15918); its PyTorch backend loads a Hugging Face checkpoint, and a
ModelOpt "unified HF checkpoint" carries the quantization (``hf_quant_config.json``) that it detects itself.
So the recipe is two documented commands, both run on the target GPU:

1. ``python examples/hf_ptq/hf_ptq.py --pyt_ckpt_path hf --qformat <fmt> --kv_cache_qformat <kv> --export_fmt hf
   --export_path engine`` (ModelOpt 0.47): calibrates and writes the quantized checkpoint to ``engine/``;
2. ``trtllm-serve engine --backend pytorch ...`` (TensorRT-LLM 1.2): the OpenAI-compatible server.

Formats by GPU (ModelOpt support matrix): FP8 needs Ada or Hopper (compute capability ≥ 8.9: L4, L40S, H100,
H200); INT8 SmoothQuant and INT4-AWQ (W4A16) need Ampere or newer (A100, A10G); bf16 serves the checkpoint as
it is. FP8 KV cache (``fp8_cast``) only where the GPU has FP8.
"""

from __future__ import annotations

from accelbench.hardware.catalog import HardwareTarget
from accelbench.models.toolchains import llm_recipes as common
from accelbench.models.toolchains.tensorrt import gpu_guard

ENGINES = ("trtllm",)
CONTAINER = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"
VERSIONS = {
    "TensorRT-LLM": f"1.2 (PyTorch backend; container {CONTAINER})",
    "nvidia-modelopt": "0.47 (examples/hf_ptq/hf_ptq.py from github.com/NVIDIA/Model-Optimizer at that release)",
}
# accelbench precision -> hf_ptq.py --qformat (a preset basename under modelopt_recipes/configs/ptq/presets/model)
QFORMAT = {"fp8": "fp8", "int4": "int4_awq", "int8": "int8_smoothquant"}
RECIPE = {
    "fp8": "trtllm-modelopt-fp8",
    "int4": "trtllm-modelopt-int4-awq",
    "int8": "trtllm-modelopt-int8-smoothquant",
    "bf16": "trtllm-bf16",
}
FP8_MIN_CC = 8.9  # Ada
QUANT_MIN_CC = 8.0  # Ampere
CALIB_SIZE = 512
CALIB_DATASET = "cnn_dailymail"  # hf_ptq.py's default is a mix that adds nemotron-post-training-dataset-v2
MAX_BATCH_SIZE = 64
MAX_NUM_TOKENS = 8192
KV_CACHE_FRACTION = 0.9
SOURCES = [
    "https://github.com/NVIDIA/Model-Optimizer/blob/a2fbac7bad8ab446d3f8783dadb0c3366eb0ad73/examples/hf_ptq/hf_ptq.py"
    " (argparse; README 'Quantize and Export', 'Deployment')",
    "https://nvidia.github.io/Model-Optimizer/guides/0_support_matrix.html (FP8: Ada and later; INT8 SmoothQuant,"
    " W4A16 AWQ: Ampere and later)",
    "https://github.com/NVIDIA/TensorRT-LLM/blob/00209af149e7774406881a37283dce303571eb11/tensorrt_llm/commands/serve.py"
    " (trtllm-serve options)",
    "https://github.com/NVIDIA/TensorRT-LLM/pull/15907 (legacy TensorRT-engine backend removed, 2026-07)",
]


def _cc(target: HardwareTarget) -> float:
    try:
        return float(getattr(target, "compute_capability", None) or 0)
    except ValueError:
        return 0.0


def has_fp8(target: HardwareTarget) -> bool:
    return _cc(target) >= FP8_MIN_CC


def precisions(target: HardwareTarget | None = None) -> tuple[str, ...]:
    return ("fp8", "int4", "int8", "bf16")


def default_precision(target: HardwareTarget) -> str:
    if has_fp8(target):
        return "fp8"
    return "int4" if _cc(target) >= QUANT_MIN_CC else "bf16"


def refusal(target: HardwareTarget, precision: str) -> str | None:
    cc = getattr(target, "compute_capability", None) or "unknown"
    if precision == "fp8" and not has_fp8(target):
        return (
            f"fp8 needs FP8 tensor cores (Ada or Hopper, compute capability >= {FP8_MIN_CC}); {target.name} "
            f"has {cc}: use int4 (INT4-AWQ, W4A16) or int8 (INT8 SmoothQuant)"
        )
    if precision in ("int4", "int8") and _cc(target) < QUANT_MIN_CC:
        return (
            f"ModelOpt's INT4-AWQ and INT8 SmoothQuant need Ampere or newer (compute capability >= "
            f"{QUANT_MIN_CC}); {target.name} has {cc}: use bf16"
        )
    return None


def requirements(target: HardwareTarget, precision: str, shape: common.RecipeModel) -> list[str]:
    cc = getattr(target, "compute_capability", None)
    lines = [
        f"an {target.name} GPU (compute capability {cc}) with an NVIDIA driver for CUDA 13 "
        f"(or run inside {CONTAINER})",
        "tensorrt_llm and nvidia-modelopt importable by $PYTHON (default python3), trtllm-serve on PATH, "
        "HF_PTQ=path/to/Model-Optimizer/examples/hf_ptq/hf_ptq.py",
    ]
    if precision != "bf16":
        lines.append(
            f"the calibration text: {CALIB_DATASET} from the Hugging Face Hub (network), or a cached copy "
            "with HF_DATASETS_OFFLINE=1"
        )
    if precision == "fp8":
        lines.append("FP8 tensor cores (Ada or Hopper)")
    return lines


def _kv_format(target: HardwareTarget) -> str:
    return "fp8_cast" if has_fp8(target) else "none"


def _build_function(target: HardwareTarget, precision: str) -> str:
    if precision == "bf16":
        return (
            "tools() {\n  preflight\n}\n\n"
            "build() {\n"
            "  tools\n"
            f"  rm -rf {common.ENGINE_DIR}\n"
            "  # bf16: no quantization; TensorRT-LLM's PyTorch backend reads the checkpoint as it is\n"
            f"  cp -r {common.HF_DIR} {common.ENGINE_DIR}\n"
            "}\n"
        )
    return (
        "tools() {  # what build needs besides the server: ModelOpt's hf_ptq.py\n"
        "  preflight\n"
        '  [[ -f "$HF_PTQ" ]] || die 3 "hf_ptq.py not found at \'$HF_PTQ\': clone '
        'https://github.com/NVIDIA/Model-Optimizer (release 0.47) and set HF_PTQ=Model-Optimizer/examples/hf_ptq/hf_ptq.py"\n'
        "}\n\n"
        "build() {\n"
        "  tools\n"
        f"  rm -rf {common.ENGINE_DIR}\n"
        f'  echo "{common.SCRIPT_FILE}: ModelOpt {QFORMAT[precision]} on $GPU" >&2\n'
        f'  "$PYTHON" "$HF_PTQ" --pyt_ckpt_path {common.HF_DIR} --qformat {QFORMAT[precision]} '
        f"--kv_cache_qformat {_kv_format(target)} \\\n"
        f"    --dataset {CALIB_DATASET} --calib_size {CALIB_SIZE} --export_fmt hf --export_path {common.ENGINE_DIR}\n"
        f'  [[ -f {common.ENGINE_DIR}/config.json ]] || die 1 "hf_ptq.py wrote no {common.ENGINE_DIR}/config.json"\n'
        "}\n"
    )


def _script(target: HardwareTarget, precision: str, shape: common.RecipeModel, requires: list[str]) -> str:
    header = common.script_header(
        target, RECIPE[precision], VERSIONS, requires, SOURCES, "[check|build|serve]  (default: build)"
    )
    guard = gpu_guard(target).replace("\n", "\n  ")
    preflight = (
        'PYTHON="${PYTHON:-python3}"\n'
        'HF_PTQ="${HF_PTQ:-hf_ptq.py}"\n'
        'GPU=""\n'
        "\n"
        "preflight() {  # the target's GPU and the toolchain, or one line and exit 1 / 3\n"
        '  need nvidia-smi "no NVIDIA driver on this host"\n'
        f"  {guard}\n"
        f'  need trtllm-serve "install TensorRT-LLM 1.2 or run inside {CONTAINER}"\n'
        '  "$PYTHON" -c "import tensorrt_llm, modelopt" >/dev/null 2>&1 \\\n'
        '    || die 3 "$PYTHON cannot import tensorrt_llm and modelopt (pip install tensorrt_llm nvidia-modelopt)"\n'
        "}\n"
    )
    serve = (
        "serve() {  # the OpenAI-compatible server on the built checkpoint\n"
        "  preflight\n"
        f'  [[ -f {common.ENGINE_DIR}/config.json ]] || die 2 "{common.ENGINE_DIR}/ is not built: run ./{common.SCRIPT_FILE} build"\n'
        f"  exec trtllm-serve {common.ENGINE_DIR} --backend pytorch "
        '--host "${HOST:-127.0.0.1}" --port "${PORT:-8000}" \\\n'
        f"    --max_batch_size {MAX_BATCH_SIZE} --max_num_tokens {MAX_NUM_TOKENS} "
        f"--max_seq_len {shape.context_length} --tp_size 1 \\\n"
        f"    --kv_cache_free_gpu_memory_fraction {KV_CACHE_FRACTION}\n"
        "}\n"
    )
    check = common.check_function("tools", "toolchain ready on $GPU")
    actions = {"check": "check", "build": "build", "serve": "serve"}
    return "\n".join(
        [
            header + preflight,
            check,
            _build_function(target, precision),
            serve,
            common.dispatch(actions, "build"),
        ]
    )


def recipe(target: HardwareTarget, precision: str, shape: common.RecipeModel) -> common.Recipe:
    requires = requirements(target, precision, shape)
    notes = []
    if precision == "int8":
        notes.append(
            "ModelOpt's matrix marks int8_smoothquant unsupported for Llama 3.x checkpoints in the unified HF "
            "export; check that TensorRT-LLM's PyTorch backend loads the result before measuring it"
        )
    if precision == "fp8" and _cc(target) < 9.0:
        notes.append(
            "FP8 on Ada (compute capability 8.9) in the PyTorch backend: TensorRT-LLM's quantization page "
            "names Hopper and Blackwell for FP8; verify on the L4/L40S before trusting the figures"
        )
    fmt = QFORMAT.get(precision, "none")
    return common.Recipe(
        recipe=RECIPE[precision],
        tool="tensorrt-llm",
        versions=dict(VERSIONS),
        requires=requires,
        produces=(
            f"{common.ENGINE_DIR}/: a ModelOpt unified Hugging Face checkpoint ({fmt}, KV cache "
            f"{_kv_format(target)}) that trtllm-serve --backend pytorch loads on {target.name}"
        ),
        commands=(["hf_ptq.py"] if precision != "bf16" else []) + ["trtllm-serve"],
        serving_engine="trtllm",
        script=_script(target, precision, shape, requires),
        sources=list(SOURCES),
        notes=notes,
    )
