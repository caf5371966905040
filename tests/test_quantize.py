"""accelbench quantize: CPU and TensorRT variants with real onnxruntime, Neuron/TPU/bad input errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.models.accuracy import run_onnx_cpu
from accelbench.models.manifest import read_manifest
from accelbench.models.toolchains import tensorrt as trt_tc

L4 = SimpleNamespace(
    id="l4",
    name="NVIDIA L4",
    compute_capability="8.9",
    triton=SimpleNamespace(preferred_batch_sizes=(1, 4, 8), max_batch_size=16),
)


def run_cli(*args):
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def cpu_variants(minilm_c7i_variants):
    """`accelbench quantize builtin:minilm-l6 --target c7i.xlarge` (tests/conftest.py: made once per run, the
    same variants test_serving_live serves)."""
    return minilm_c7i_variants


@pytest.fixture(scope="module")
def l4_variants(tmp_path_factory):
    out = tmp_path_factory.mktemp("l4")
    code, stdout, stderr = run_cli(
        "quantize", "builtin:resnet50", "--target", "l4", "--precision", "int8", "--out", str(out)
    )
    assert code == 0, stderr
    return out, stdout


@pytest.mark.slow
def test_cpu_int8_variant_passes_and_reference_kept(cpu_variants):
    out, stdout = cpu_variants
    int8 = read_manifest(out / "minilm-l6__c7i-xlarge__int8")
    fp32 = read_manifest(out / "minilm-l6__c7i-xlarge__fp32")
    assert int8.recipe == "ort-dynamic-int8-per-channel"
    assert int8.accuracy.verdict == "PASS" and int8.accuracy.value >= 0.99
    assert fp32.recipe == "fp32-reference" and fp32.accuracy.value == 1.0
    assert int8.toolchain.name == "onnxruntime" and int8.source.uri == "builtin:minilm-l6"
    assert set(int8.files) == {"model.onnx", "reference/inputs.npz", "reference/outputs.npz"}
    ops = {n.op_type for n in onnx.load(str(out / int8.name / "model.onnx")).graph.node}
    assert "DynamicQuantizeLinear" in ops or "MatMulInteger" in ops
    assert "PASS" in stdout


@pytest.mark.slow
def test_rerun_reuses_intact_variant(cpu_variants):
    out, _ = cpu_variants
    before = read_manifest(out / "minilm-l6__c7i-xlarge__int8")
    code, _, stderr = run_cli("quantize", "builtin:minilm-l6", "--target", "c7i.xlarge", "--out", str(out))
    assert code == 0 and "reused" in stderr
    assert read_manifest(out / "minilm-l6__c7i-xlarge__int8").created_at == before.created_at


@pytest.mark.slow
def test_l4_int8_is_symmetric_qdq_with_build_script(l4_variants):
    out, stdout = l4_variants
    folder = out / "resnet50__l4__int8"
    m = read_manifest(folder)
    assert m.engine.status == "must-build-on-target" and "NVIDIA L4" in m.engine.host_requirement
    assert m.recipe == "qdq-int8-symmetric" and m.calibration.samples > 0
    assert "build_engine.sh" in m.files and os.access(folder / "build_engine.sh", os.X_OK)
    assert "must be built on an NVIDIA L4" in stdout
    model = onnx.load(str(folder / "model.onnx"))
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    qnodes = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert sum(n.op_type == "QuantizeLinear" for n in qnodes) > 50
    zero_points = [inits[n.input[2]] for n in qnodes if len(n.input) > 2 and n.input[2] in inits]
    # activations and weights int8, biases int32: every zero point 0 (TensorRT's symmetric rule)
    assert zero_points and all(zp.dtype in (np.int8, np.int32) and not zp.any() for zp in zero_points)
    assert any(zp.dtype == np.int8 for zp in zero_points)
    # per-channel weights: some scales are vectors
    assert any(
        inits[n.input[1]].ndim == 1 and inits[n.input[1]].size > 1 for n in qnodes if n.input[1] in inits
    )
    x = np.random.default_rng(5).normal(size=(2, 3, 224, 224)).astype(np.float32)
    assert run_onnx_cpu(folder / "model.onnx", {"input": x})["logits"].shape == (2, 1000)


@pytest.mark.parametrize(
    ("probe", "refused"),
    [
        ({"gpus": []}, "no NVIDIA GPU"),
        ({"gpus": [{"name": "NVIDIA L40S", "compute_capability": "8.9"}]}, "not NVIDIA L4"),
        ({"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0"}]}, "not NVIDIA L4"),
        ({"gpus": [{"name": "NVIDIA L4", "compute_capability": "8.9"}]}, None),
        ({"gpus": [{"name": "NVIDIA T4", "compute_capability": "7.5"}, {"name": "NVIDIA L4"}]}, None),
    ],
)
def test_build_refusal(probe, refused):
    why = trt_tc.build_refusal(L4, probe)
    assert why is None if refused is None else refused in why


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA L4", "L4"),
        ("NVIDIA Jetson AGX Orin 64GB (MAXN)", "ORIN"),
        ("NVIDIA H200 SXM 141GB", "H200"),
        ("NVIDIA A10G (AWS-specific A10 variant)", "A10G"),
        ("Orin (nvgpu)", "ORIN"),
    ],
)
def test_chip_key(name, key):
    assert trt_tc.chip_key(name) == key


def test_require_engine_refuses_on_wrong_host(tmp_path):
    from accelbench.errors import ToolchainMissingError
    from accelbench.models.toolchains import VariantOptions

    card = SimpleNamespace(inputs=[SimpleNamespace(name="x", shape=(-1, 4))])
    src = tmp_path / "src.onnx"
    node = onnx.helper.make_node("Identity", ["x"], ["y"])
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", 1, [None, 4])],
        [onnx.helper.make_tensor_value_info("y", 1, [None, 4])],
    )
    onnx.save(onnx.helper.make_model(graph, ir_version=9), src)
    opts = VariantOptions(
        recipe="fp32-reference",
        require_engine=True,
        probe={"gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}]},
    )
    with pytest.raises(
        ToolchainMissingError, match="refusing to build the l4 engine here: this host has NVIDIA H100"
    ):
        trt_tc.make_variant(SimpleNamespace(onnx_path=src, card=card), L4, "fp32", tmp_path / "v", opts)


def _fake_tools(bin_dir: Path, trt_tag: str, gpu: str) -> None:
    bin_dir.mkdir()
    (bin_dir / "trtexec").write_text(
        f'#!/bin/sh\nif [ "$1" = --help ]; then echo "&&&& RUNNING TensorRT.trtexec [TensorRT v{trt_tag}]"; '
        'exit 0; fi\necho "$@" > "$(dirname "$0")/args"\n'
    )
    (bin_dir / "nvidia-smi").write_text(f'#!/bin/sh\necho "{gpu}"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)


@pytest.mark.parametrize(("tag", "precision_flags"), [("100300", "--int8 --fp16"), ("110000", "")])
def test_build_script_branches_on_trt_version(tmp_path, tag, precision_flags):
    card = SimpleNamespace(
        inputs=[
            SimpleNamespace(name="input_ids", shape=(-1, 128)),
            SimpleNamespace(name="attention_mask", shape=(-1, 128)),
        ]
    )
    script = trt_tc.build_script(L4, "int8", trt_tc.profile_shapes(card, L4))
    (tmp_path / "build_engine.sh").write_text(script)
    _fake_tools(tmp_path / "bin", tag, "NVIDIA L4")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(tmp_path / "build_engine.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    args = (tmp_path / "bin" / "args").read_text().split()
    assert args[:2] == ["--onnx=model.onnx", "--saveEngine=model.plan"]
    assert ("--int8" in args) == bool(precision_flags) and ("--fp16" in args) == bool(precision_flags)
    assert "--minShapes=input_ids:1x128,attention_mask:1x128" in args
    assert "--optShapes=input_ids:8x128,attention_mask:8x128" in args
    assert "--maxShapes=input_ids:16x128,attention_mask:16x128" in args


@pytest.mark.parametrize(
    ("gpu", "ok"), [("NVIDIA L4", True), ("NVIDIA L40S", False), ("NVIDIA H100 80GB HBM3", False)]
)
def test_build_script_matches_the_gpu_by_whole_word(tmp_path, gpu, ok):
    card = SimpleNamespace(inputs=[SimpleNamespace(name="input", shape=(-1, 3, 224, 224))])
    (tmp_path / "build_engine.sh").write_text(
        trt_tc.build_script(L4, "int8", trt_tc.profile_shapes(card, L4))
    )
    _fake_tools(tmp_path / "bin", "100300", gpu)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(tmp_path / "build_engine.sh")], env=env, capture_output=True, text=True
    )
    assert (done.returncode == 0) == ok, done.stderr
    assert (tmp_path / "bin" / "args").exists() == ok


def test_build_script_refuses_other_gpu_and_supports_dla(tmp_path):
    card = SimpleNamespace(inputs=[SimpleNamespace(name="input", shape=(-1, 3, 224, 224))])
    orin = SimpleNamespace(
        id="jetson-agx-orin-64gb",
        name="NVIDIA Jetson AGX Orin 64GB",
        compute_capability="8.7",
        triton=SimpleNamespace(preferred_batch_sizes=(1, 4), max_batch_size=8),
    )
    script = trt_tc.build_script(orin, "int8", trt_tc.profile_shapes(card, orin, static=True), dla_core=0)
    assert "--useDLACore=0 --allowGPUFallback" in script
    assert "--minShapes=input:4x3x224x224" in script and "--maxShapes=input:4x3x224x224" in script
    (tmp_path / "build_engine.sh").write_text(script)
    _fake_tools(tmp_path / "bin", "100300", "NVIDIA L4")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(tmp_path / "build_engine.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1 and "not NVIDIA Jetson AGX Orin" in done.stderr
    assert not (tmp_path / "bin" / "args").exists()


def test_neuron_without_sdk_writes_script_and_exits_3(tmp_path):
    code, _, stderr = run_cli(
        "quantize", "builtin:identity", "--target", "inf2-xlarge", "--out", str(tmp_path)
    )
    assert code == 3
    assert stderr.count("\n") == 1 and "Neuron SDK" in stderr and "inf2" in stderr
    script = tmp_path / "identity__inf2-xlarge__bf16" / "compile_neuron.py"
    assert "torch_neuronx.trace" in script.read_text() and "'--auto-cast', 'matmult'" in script.read_text()
    subprocess.run([sys.executable, "-m", "py_compile", str(script)], check=True)


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["{bad}", "--target", "c7i.xlarge"], 2, "not a valid ONNX model"),
        (["{missing}", "--target", "c7i.xlarge"], 2, "file not found"),
        (["builtin:identity", "--target", "l5"], 2, "unknown target 'l5'"),
        (["builtin:identity", "--target", "tpu-v5e"], 3, "xla"),
        (["builtin:identity", "--target", "c7i.xlarge", "--precision", "bf16"], 2, "not available"),
        (["builtin:identity", "--target", "c7i.xlarge", "--recipe", "magic"], 2, "unknown recipe"),
    ],
)
def test_bad_input_one_line(tmp_path, args, code, needle):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all")
    args = [a.format(bad=bad, missing=tmp_path / "missing.onnx") for a in args]
    got, _, stderr = run_cli("quantize", *args, "--out", str(tmp_path / "out"))
    assert got == code, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("accelbench: error:")]
    assert len(lines) == 1 and needle in lines[0], stderr


@pytest.mark.slow
def test_json_output_is_manifests(cpu_variants):
    out, _ = cpu_variants
    code, stdout, _ = run_cli(
        "quantize", "builtin:minilm-l6", "--target", "c7i.xlarge", "--out", str(out), "--json"
    )
    assert code == 0
    assert [m["precision"] for m in json.loads(stdout)] == ["fp32", "int8"]


def test_int8_of_a_graph_with_nothing_to_quantize_is_one_clear_line(tmp_path):
    from click.testing import CliRunner

    from accelbench.cli import main

    run = CliRunner().invoke(
        main,
        ["quantize", "builtin:identity", "--target", "l4", "--precision", "int8", "--out", str(tmp_path)],
    )
    assert run.exit_code == 2
    assert "nothing to quantize" in run.output and "Traceback" not in run.output


def test_engine_profile_takes_a_dynamic_sequence_from_the_tokens_generator():
    import dataclasses

    from accelbench.models.cards import load_card

    card = load_card("builtin:minilm-l6")
    dynamic = dataclasses.replace(
        card, inputs=[dataclasses.replace(spec, shape=(-1, -1)) for spec in card.inputs]
    )
    shapes = trt_tc.profile_shapes(dynamic, L4)
    assert shapes["input_ids"]["opt"][1] == card.generator.seq_len == 128


def _tensorrt_and_gpu() -> bool:
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return False
    return shutil.which("nvidia-smi") is not None


@pytest.mark.tensorrt
@pytest.mark.skipif(
    not _tensorrt_and_gpu(), reason="needs TensorRT (pip install accelbench[tensorrt]) and an NVIDIA GPU"
)
def test_tensorrt_api_builds_an_engine_from_the_qdq_onnx(tmp_path):
    from accelbench.models.cards import load_card
    from accelbench.models.loader import resolve_model
    from accelbench.models.toolchains import VariantOptions
    from accelbench.models.toolchains import onnxruntime as ort_tc

    resolved = resolve_model("builtin:resnet50")
    card = load_card("builtin:resnet50")
    qdq = tmp_path / "model.onnx"
    opts = VariantOptions(recipe="qdq-int8-symmetric", work_dir=tmp_path / "work")
    opts.calibration = [{"input": np.random.default_rng(0).normal(size=(1, 3, 224, 224)).astype(np.float32)}]
    ort_tc.run_recipe("qdq-int8-symmetric", resolved.onnx_path, qdq, opts)
    version = trt_tc.build_engine(qdq, tmp_path / "model.plan", trt_tc.profile_shapes(card, L4), "int8")
    assert (tmp_path / "model.plan").stat().st_size > 0 and version


@pytest.mark.slow
def test_written_manifests_are_typed_documents_that_round_trip(cpu_variants, l4_variants):
    from accelbench.documents import dump_json, load_manifest, to_dict
    from accelbench.models.manifest import manifest_hash

    paths = [p for out, _ in (cpu_variants, l4_variants) for p in sorted(out.glob("*/manifest.json"))]
    assert len(paths) >= 3
    for path in paths:
        document = load_manifest(path)
        assert dump_json(document) == path.read_text()  # byte for byte, so the hash still verifies
        assert manifest_hash(to_dict(document)) == document.manifest_hash
    l4 = load_manifest(l4_variants[0] / "resnet50__l4__int8" / "manifest.json")
    assert l4.engine.status == "must-build-on-target" and l4.calibration.samples > 0 and l4.format == "onnx"
