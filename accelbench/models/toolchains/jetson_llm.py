"""TensorRT Edge-LLM on Jetson Orin: quantize, export ONNX, build the TensorRT engine on the Orin.

NVIDIA's path for LLMs on Jetson (Jetson AI Lab tutorial "TensorRT Edge-LLM on Jetson"; the Edge-LLM developer
guide): ``tensorrt-edgellm-quantize-llm`` (ModelOpt inside) writes a quantized checkpoint,
``tensorrt-edgellm-export-llm`` turns it into ONNX, and the C++ ``llm_build`` compiles the engine on the device
("TensorRT engines are hardware-specific and must be built on each Jetson"). Quantize and export may run on an
x86 host with a GPU (``./build_engine.sh export``) and the ``onnx/`` folder be copied over; ``build`` runs them
here when ``onnx/`` is missing. Edge-LLM 0.6.0 is the release validated on JetPack 6.2 (Seeed's JetPack 6.2
guide); jetson-containers packages Edge-LLM 0.5.0 for L4T r36 (``tensorrt_edgellm``). Orin (sm87) has no FP8:
INT4-AWQ (W4A16) is the default, INT8 SmoothQuant and FP16 the alternatives.
"""

from __future__ import annotations

from accelbench.hardware.catalog import HardwareTarget
from accelbench.models.toolchains import llm_recipes as common

ENGINES = ("trtllm",)
VERSIONS = {
    "TensorRT Edge-LLM": "0.6.0 (the release validated on JetPack 6.2; jetson-containers tensorrt_edgellm:0.5.0)",
    "JetPack": "6.2 (L4T r36.4, TensorRT 10.3)",
}
# accelbench precision -> tensorrt-edgellm-quantize-llm --quantization (None: export the checkpoint as it is)
QUANTIZATION = {"int4": "int4_awq", "int8": "int8_sq", "fp16": None}
RECIPE = {"int4": "edgellm-int4-awq", "int8": "edgellm-int8-smoothquant", "fp16": "edgellm-fp16"}
MAX_BATCH_SIZE = 1
MAX_INPUT_LEN = 1024
SOURCES = [
    "https://www.jetson-ai-lab.com/tutorials/tensorrt-edge-llm (Jetson AI Lab: quantize, export, build on each Jetson)",
    "https://nvidia.github.io/TensorRT-Edge-LLM/developer_guide/getting-started/quick-start-guide.html",
    "https://github.com/NVIDIA/TensorRT-Edge-LLM/blob/6b036ddd1cd73db00b7464b638aebbe8aed2bd0a/tensorrt_edgellm/scripts/quantize_llm.py",
    "https://github.com/NVIDIA/TensorRT-Edge-LLM/blob/105ec971851b41d8bc90a112d3d9243d95c1857e/tensorrt_edgellm/scripts/export_llm.py",
    "https://github.com/NVIDIA/TensorRT-Edge-LLM/blob/105ec971851b41d8bc90a112d3d9243d95c1857e/docs/source/developer_guide/03.2_Engine_Builder.md (llm_build)",
    "https://wiki.seeedstudio.com/deploy_tensorrt_edge_llm_on_jetpack7.2/ (no FP8/FP4 on Orin)",
    "https://github.com/dusty-nv/jetson-containers/tree/master/packages/llm/tensorrt_edgellm",
]


def precisions(target: HardwareTarget | None = None) -> tuple[str, ...]:
    return ("int4", "int8", "fp16", "fp8")


def default_precision(target: HardwareTarget | None = None) -> str:
    return "int4"


def refusal(target: HardwareTarget, precision: str) -> str | None:
    if precision == "fp8":
        return (
            f"fp8 does not run on {target.name}: Orin (compute capability 8.7) has no FP8 tensor cores and "
            "TensorRT Edge-LLM supports FP16, INT8 and INT4 there; use int4 (INT4-AWQ) or int8"
        )
    return None


def requirements(target: HardwareTarget, precision: str, shape: common.RecipeModel) -> list[str]:
    return [
        f"an {target.name} on JetPack 6.2 (L4T r36; /etc/nv_tegra_release says R36)",
        "TensorRT Edge-LLM 0.6.0: tensorrt-edgellm-quantize-llm and tensorrt-edgellm-export-llm on PATH "
        "(pip install . in the repo, or jetson-containers run $(autotag tensorrt_edgellm)), and the C++ "
        "llm_build built on this Orin (LLM_BUILD=path/to/build/examples/llm/llm_build)",
        "the calibration text (abisee/cnn_dailymail from the Hugging Face Hub) unless onnx/ was exported "
        "on another host",
    ]


def _export_function(precision: str) -> str:
    fmt = QUANTIZATION[precision]
    if fmt is None:
        quantize = f"  local src={common.HF_DIR}\n"
    else:
        quantize = (
            "  local src=quantized\n"
            "  rm -rf quantized\n"
            f"  tensorrt-edgellm-quantize-llm --model_dir {common.HF_DIR} --output_dir quantized "
            f"--quantization {fmt}\n"
        )
    return (
        "export_onnx() {  # quantize and export ONNX: on this Orin, or on an x86 host with a GPU\n"
        '  need tensorrt-edgellm-export-llm "install TensorRT Edge-LLM 0.6.0 (pip install . in its repo)"\n'
        + (
            ""
            if fmt is None
            else '  need tensorrt-edgellm-quantize-llm "install TensorRT Edge-LLM 0.6.0 (pip install . in its repo)"\n'
        )
        + quantize
        + "  rm -rf onnx\n"
        '  tensorrt-edgellm-export-llm --model_dir "$src" --output_dir onnx\n'
        "}\n"
    )


def _script(target: HardwareTarget, precision: str, shape: common.RecipeModel, requires: list[str]) -> str:
    header = common.script_header(
        target, RECIPE[precision], VERSIONS, requires, SOURCES, "[check|export|build]  (default: build)"
    )
    kv_capacity = min(shape.context_length, 4096)
    max_input = min(MAX_INPUT_LEN, kv_capacity // 2)
    preflight = (
        'LLM_BUILD="${LLM_BUILD:-$(command -v llm_build || echo build/examples/llm/llm_build)}"\n'
        "\n"
        "preflight() {  # this must be an Orin with Edge-LLM's engine builder, or one line and exit 1 / 3\n"
        '  local model=""\n'
        "  [[ -r /proc/device-tree/model ]] && model=\"$(tr -d '\\0' </proc/device-tree/model)\"\n"
        '  if [[ "$model" != *Orin* && -z "${ACCELBENCH_FORCE:-}" ]]; then\n'
        f"    die 1 \"this host is '${{model:-not a Jetson}}', not {target.name}; set ACCELBENCH_FORCE=1 to build anyway\"\n"
        "  fi\n"
        '  if ! grep -q "^# R36" /etc/nv_tegra_release 2>/dev/null; then\n'
        f'    echo "{common.SCRIPT_FILE}: warning: not L4T r36 (JetPack 6); Edge-LLM 0.6.0 was validated on JetPack 6.2" >&2\n'
        "  fi\n"
        "  [[ -x \"$LLM_BUILD\" ]] || die 3 \"llm_build not found at '$LLM_BUILD': build TensorRT Edge-LLM's C++ "
        'part on this Orin (cmake -DEMBEDDED_TARGET=jetson-orin) and set LLM_BUILD"\n'
        "}\n"
    )
    build = (
        "build() {  # the TensorRT engine, on this Orin\n"
        "  preflight\n"
        "  [[ -f onnx/config.json || -f onnx/model.onnx ]] || export_onnx\n"
        f"  rm -rf {common.ENGINE_DIR}\n"
        f'  "$LLM_BUILD" --onnxDir=onnx --engineDir={common.ENGINE_DIR} --maxBatchSize={MAX_BATCH_SIZE} \\\n'
        f"    --maxInputLen={max_input} --maxKVCacheCapacity={kv_capacity}\n"
        "}\n"
    )
    check = common.check_function()
    actions = {"check": "check", "export": "export_onnx", "build": "build"}
    return "\n".join(
        [header + preflight, check, _export_function(precision), build, common.dispatch(actions, "build")]
    )


def recipe(target: HardwareTarget, precision: str, shape: common.RecipeModel) -> common.Recipe:
    requires = requirements(target, precision, shape)
    quantize = ["tensorrt-edgellm-quantize-llm"] if QUANTIZATION[precision] else []
    return common.Recipe(
        recipe=RECIPE[precision],
        tool="tensorrt-edge-llm",
        versions=dict(VERSIONS),
        requires=requires,
        produces=(
            f"{common.ENGINE_DIR}/llm.engine (+ config.json, tokenizer files): a TensorRT engine for "
            f"{target.name}, built by llm_build from onnx/"
        ),
        commands=[*quantize, "tensorrt-edgellm-export-llm", "llm_build"],
        serving_engine="trtllm",
        script=_script(target, precision, shape, requires),
        sources=list(SOURCES),
        notes=[
            f"batch {MAX_BATCH_SIZE} engine (Edge-LLM's interactive default); rebuild with a larger "
            "--maxBatchSize for concurrency sweeps"
        ],
    )
