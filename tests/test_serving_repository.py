"""Repository writer: generated config.pbtxt against golden files, files copied, bad input rejected."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from onnx import TensorProto, helper
from tritonclient.grpc import model_config_pb2

from accelbench.cli import main
from accelbench.errors import BadInputError
from accelbench.models.manifest import write_manifest
from accelbench.serving.remote import config_mismatch
from accelbench.serving.repository import write_repository

GOLDEN = Path(__file__).parent / "data" / "serving" / "golden"
UPDATE = os.environ.get("ACCELBENCH_UPDATE_GOLDEN") == "1"

# Fixed per-target defaults (shaped like the catalog's TritonDefaults) so goldens do not follow catalog edits
CATALOG = {
    "c7i.xlarge": SimpleNamespace(
        kind="cpu",
        triton=SimpleNamespace(
            instance_kind="KIND_CPU",
            instance_count=1,
            preferred_batch_sizes=(1, 2, 4, 8),
            max_batch_size=8,
            max_queue_delay_us=1000,
        ),
    ),
    "l4": SimpleNamespace(
        kind="datacenter-gpu",
        triton=SimpleNamespace(
            instance_kind="KIND_GPU",
            instance_count=1,
            preferred_batch_sizes=(4, 8, 16, 32),
            max_batch_size=32,
            max_queue_delay_us=200,
        ),
    ),
}


class FakeCatalog:
    def get(self, target_id: str):
        return CATALOG[target_id]


def make_minilm_like_variant(
    root: Path, target: str, precision: str, fmt: str = "onnx", with_plan: bool = False
) -> Path:
    """A variant folder shaped like MiniLM's (int64 ids/mask, two float outputs), with a tiny graph."""
    name = f"enc__{target.replace('.', '-')}__{precision}"
    vdir = root / name
    (vdir / "reference").mkdir(parents=True, exist_ok=True)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    tok = helper.make_tensor_value_info("token_embeddings", TensorProto.FLOAT, ["batch", "seq"])
    nodes = [
        helper.make_node("Add", ["input_ids", "attention_mask"], ["s"]),
        helper.make_node("Cast", ["s"], ["token_embeddings"], to=1),
    ]
    graph = helper.make_graph(nodes, "enc", [ids, mask], [tok])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, vdir / "model.onnx")
    if with_plan:
        (vdir / "model.plan").write_bytes(b"not-a-real-engine")
    np.savez(
        vdir / "reference" / "inputs.npz",
        input_ids=np.zeros((1, 128), np.int64),
        attention_mask=np.ones((1, 128), np.int64),
    )
    write_manifest(
        vdir,
        {
            "name": name,
            "model": "enc",
            "card": {},
            "source": {"uri": "test:enc", "sha256": "0" * 64},
            "target": target,
            "precision": precision,
            "recipe": "test",
            "format": fmt,
            "model_file": "model.plan" if fmt == "tensorrt-plan" else "model.onnx",
            "toolchain": {"name": "onnxruntime", "version": "test"},
            "inputs": [
                {"name": "input_ids", "dtype": "int64", "shape": [-1, -1]},
                {"name": "attention_mask", "dtype": "int64", "shape": [-1, -1]},
            ],
            "outputs": [
                {"name": "token_embeddings", "dtype": "float32", "shape": [-1, -1, 384]},
                {"name": "sentence_embedding", "dtype": "float32", "shape": [-1, 384]},
            ],
            "calibration": None,
            "accuracy": None,
            "graph_cost": None,
            "engine": None,
        },
    )
    return vdir


CASES = [
    # golden file, flavor, target, precision, format, plan present
    ("local_cpu_int8.pbtxt", "local", "c7i.xlarge", "int8", "onnx", False),
    ("local_gpu_int8.pbtxt", "local", "l4", "int8", "onnx", False),
    ("ngc_cpu_int8.pbtxt", "ngc", "c7i.xlarge", "int8", "onnx", False),
    ("ngc_gpu_int8_qdq.pbtxt", "ngc", "l4", "int8", "onnx", False),
    ("ngc_gpu_fp16_plan.pbtxt", "ngc", "l4", "fp16", "tensorrt-plan", True),
    ("torch_gpu_fp16.pbtxt", "torch-cuda", "l4", "fp16", "onnx", False),
    ("torch_cpu_fp32.pbtxt", "torch-cuda", "c7i.xlarge", "fp32", "onnx", False),
]


@pytest.mark.parametrize(("golden", "flavor", "target", "precision", "fmt", "plan"), CASES)
def test_config_matches_golden(tmp_path, monkeypatch, golden, flavor, target, precision, fmt, plan):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the default thread count follows the host's cores
    vdir = make_minilm_like_variant(tmp_path / "v", target, precision, fmt, plan)
    [model] = write_repository([vdir], tmp_path / "repo", flavor, catalog=FakeCatalog())
    written = (model.path / "config.pbtxt").read_text()
    if UPDATE:
        (GOLDEN / golden).write_text(written)
    assert written == (GOLDEN / golden).read_text()
    # and it is a valid ModelConfig whose name matches the folder, as Triton requires
    parsed = text_format.Parse(written, model_config_pb2.ModelConfig())
    assert parsed.name == model.path.name == model.name


def test_local_flavor_files_and_rerun(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    [model] = write_repository([vdir], tmp_path / "repo", "local", catalog=FakeCatalog())
    assert (model.path / "1" / "model.onnx").read_bytes() == (vdir / "model.onnx").read_bytes()
    assert "class TritonPythonModel" in (model.path / "1" / "model.py").read_text()
    assert model.backend == "python" and model.manifest_hash
    before = (model.path / "1" / "model.onnx").stat().st_mtime_ns
    write_repository([vdir], tmp_path / "repo", "local", catalog=FakeCatalog())
    assert (model.path / "1" / "model.onnx").stat().st_mtime_ns == before  # unchanged files are not rewritten


def test_ngc_gpu_qdq_config_has_trt_accelerator(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "l4", "int8")
    [model] = write_repository(
        [vdir], tmp_path / "repo", "ngc", {"model_root": "/srv/models"}, catalog=FakeCatalog()
    )
    config = text_format.Parse(model.config_pbtxt, model_config_pb2.ModelConfig())
    [accel] = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert accel.name == "tensorrt" and accel.parameters["precision_mode"] == "INT8"
    assert accel.parameters["trt_engine_cache_path"] == f"/srv/models/{model.name}/trt_cache"
    assert config.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    assert [w.batch_size for w in config.model_warmup] == [1, 32]
    assert list(config.model_warmup[0].inputs["input_ids"].dims) == [128]  # from reference/inputs.npz


def test_overrides_replace_catalog_defaults(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    overrides = {
        "max_batch_size": 4,
        "instance_count": 2,
        "preferred_batch_sizes": [2, 4],
        "max_queue_delay_us": 50,
        "warmup": False,
    }
    [model] = write_repository([vdir], tmp_path / "repo", "local", overrides, catalog=FakeCatalog())
    config = text_format.Parse(model.config_pbtxt, model_config_pb2.ModelConfig())
    assert config.max_batch_size == 4
    assert config.instance_group[0].count == 2
    assert list(config.dynamic_batching.preferred_batch_size) == [2, 4]
    assert config.dynamic_batching.max_queue_delay_microseconds == 50
    assert not config.model_warmup


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_batchsize": 4}, "unknown serving override"),
        ({"instance_kind": "GPU"}, "KIND_CPU"),
        ({"instance_count": -1}, "non-negative"),
        ({"preferred_batch_sizes": 8}, "list of positive integers"),
        ({"precision_mode": "int4"}, "precision_mode"),
        ({"tensor_transport": "arrow"}, "expected dlpack or numpy"),
    ],
)
def test_bad_overrides(tmp_path, overrides, message):
    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    with pytest.raises(BadInputError, match=message):
        write_repository([vdir], tmp_path / "repo", "local", overrides, catalog=FakeCatalog())


def test_bad_inputs(tmp_path):
    with pytest.raises(BadInputError, match="no such variant folder"):
        write_repository([tmp_path / "missing"], tmp_path / "repo")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError, match="manifest"):
        write_repository([tmp_path / "empty"], tmp_path / "repo")
    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    with pytest.raises(BadInputError, match="flavor"):
        write_repository([vdir], tmp_path / "repo", "docker", catalog=FakeCatalog())
    with pytest.raises(BadInputError, match="share the Triton model name"):
        write_repository([vdir, vdir], tmp_path / "repo", catalog=FakeCatalog())
    (vdir / "model.onnx").unlink()
    with pytest.raises(BadInputError, match="no model.onnx"):
        write_repository([vdir], tmp_path / "repo", "local", catalog=FakeCatalog())


def test_config_mismatch_names_the_difference(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    from accelbench.models.manifest import read_manifest

    manifest = read_manifest(vdir)
    served = {
        "max_batch_size": 8,
        "input": [
            {"name": "input_ids", "data_type": "TYPE_INT64", "dims": ["-1"]},
            {"name": "attention_mask", "data_type": "TYPE_INT64", "dims": ["-1"]},
        ],
        "output": [
            {"name": "token_embeddings", "data_type": "TYPE_FP32", "dims": ["-1", "384"]},
            {"name": "sentence_embedding", "data_type": "TYPE_FP32", "dims": ["384"]},
        ],
    }
    assert config_mismatch(served, manifest) is None
    served["input"][1]["data_type"] = "TYPE_INT32"
    assert config_mismatch(served, manifest) == "attention_mask is TYPE_INT32, the variant has TYPE_INT64"
    served["input"][1]["data_type"] = "TYPE_INT64"
    served["output"][1]["dims"] = ["768"]
    assert "sentence_embedding has dims [768]" in config_mismatch(served, manifest)
    served["output"].pop()
    assert "outputs are ['token_embeddings']" in config_mismatch(served, manifest)


def test_repository_command(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "cpu-local", "int8")
    result = CliRunner().invoke(
        main, ["repository", str(vdir), "--out", str(tmp_path / "repo"), "--set", "max_batch_size=4"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "repo" / "enc__cpu-local__int8" / "config.pbtxt").is_file()
    result = CliRunner().invoke(
        main, ["repository", str(vdir), "--out", str(tmp_path / "repo"), "--set", "bogus"]
    )
    assert result.exit_code == 2 and "expected KEY=VALUE" in result.output


def test_ngc_cpu_threads_only_when_asked(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    [model] = write_repository(
        [vdir], tmp_path / "repo", "ngc", {"intra_op_threads": 4}, catalog=FakeCatalog()
    )
    config = text_format.Parse(model.config_pbtxt, model_config_pb2.ModelConfig())
    assert config.parameters["intra_op_thread_count"].string_value == "4"
    assert (
        config.backend == "onnxruntime"
        and not config.optimization.execution_accelerators.gpu_execution_accelerator
    )


def test_not_batching_lists_the_batch_dimension(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    [model] = write_repository(
        [vdir], tmp_path / "repo", "local", {"max_batch_size": 0}, catalog=FakeCatalog()
    )
    config = text_format.Parse(model.config_pbtxt, model_config_pb2.ModelConfig())
    assert list(config.input[0].dims) == [-1, -1] and list(config.output[0].dims) == [-1, -1, 384]
    assert not config.HasField("dynamic_batching")
    assert [w.batch_size for w in config.model_warmup] == [1]
    assert list(config.model_warmup[0].inputs["input_ids"].dims) == [1, 128]


NGC_CASES = [case for case in CASES if case[1] == "ngc"]


@pytest.mark.slow
@pytest.mark.parametrize(("golden", "flavor", "target", "precision", "fmt", "plan"), NGC_CASES)
def test_ngc_configs_pass_tritons_own_validation(tmp_path, golden, flavor, target, precision, fmt, plan):
    """The embedded tritonserver checks a config fully (the poll step) before it looks for the backend, which
    it lacks: reaching "unable to find backend library" means Triton 2.51 accepted the config itself."""
    from accelbench.errors import ServerError
    from accelbench.serving import LocalTriton

    vdir = make_minilm_like_variant(tmp_path / "v", target, precision, fmt, plan)
    [model] = write_repository([vdir], tmp_path / "repo", flavor, catalog=FakeCatalog())
    with pytest.raises(ServerError) as info:
        LocalTriton(tmp_path / "repo").start()
    assert f"failed to load '{model.name}'" in str(info.value)
    assert f"unable to find backend library for backend '{model.backend}'" in str(info.value)


@pytest.mark.slow
def test_an_invalid_config_names_tritons_reason(tmp_path):
    from accelbench.errors import ServerError
    from accelbench.serving import LocalTriton

    vdir = make_minilm_like_variant(tmp_path / "v", "c7i.xlarge", "int8")
    [model] = write_repository([vdir], tmp_path / "repo", "ngc", catalog=FakeCatalog())
    config = model.path / "config.pbtxt"
    config.write_text(config.read_text().replace("preferred_batch_size: 8", "preferred_batch_size: 64"))
    with pytest.raises(ServerError, match="preferred size must be <= max batch size"):
        LocalTriton(tmp_path / "repo").start()


def test_torch_flavor_files_parameters_and_kind(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "l4", "fp16")
    [model] = write_repository([vdir], tmp_path / "repo", "torch-cuda", catalog=FakeCatalog())
    version = model.path / "1"
    assert sorted(p.name for p in version.iterdir()) == [
        "model.onnx",
        "model.py",
        "onnx_torch.py",
        "torch_runner.py",
    ]
    source = (version / "model.py").read_text()
    # tensors cross the stub through DLPack only: no numpy array is handed to or taken from pb_utils
    assert "to_dlpack()" in source and "Tensor.from_dlpack" in source
    assert "as_numpy" not in source and "import numpy" not in source
    assert "accelbench" not in (version / "onnx_torch.py").read_text().replace("accelbench/", "")
    config = text_format.Parse(model.config_pbtxt, model_config_pb2.ModelConfig())
    params = {k: v.string_value for k, v in config.parameters.items()}
    assert (
        params["batch_buckets"] == "1,2,4,8,16,32"
    )  # powers of two up to max_batch_size 32, preferred in it
    assert json.loads(params["static_dims"]) == {"attention_mask": [128], "input_ids": [128]}
    # device=cpu alone moves the instances to KIND_CPU (KIND_GPU does not load without a GPU)
    [cpu] = write_repository(
        [vdir], tmp_path / "cpu", "torch-cuda", {"device": "cpu", "dtype": "float32"}, catalog=FakeCatalog()
    )
    config = text_format.Parse(cpu.config_pbtxt, model_config_pb2.ModelConfig())
    assert config.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert config.parameters["dtype"].string_value == "float32"


def test_torch_flavor_without_reference_shapes_runs_eager(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "l4", "fp16")
    (vdir / "reference" / "inputs.npz").unlink()
    [model] = write_repository([vdir], tmp_path / "repo", "torch-cuda", catalog=FakeCatalog())
    config = text_format.Parse(model.config_pbtxt, model_config_pb2.ModelConfig())
    assert config.parameters["static_dims"].string_value == ""
    assert any("eager" in note for note in model.notes)


@pytest.mark.parametrize(
    ("overrides", "precision", "message"),
    [
        ({"device": "gpu"}, "fp16", "device='gpu': expected one of cuda, cpu"),
        ({"dtype": "int4"}, "fp16", "dtype='int4'"),
        (
            {"torch_mode": "graphs"},
            "fp16",
            "torch_mode='graphs': expected one of cuda_graphs, compile, eager",
        ),
        ({}, "int8", "torch-cuda flavor serves fp32, fp16 or bf16"),
    ],
)
def test_torch_flavor_bad_input(tmp_path, overrides, precision, message):
    vdir = make_minilm_like_variant(tmp_path / "v", "l4", precision)
    with pytest.raises(BadInputError, match=message):
        write_repository([vdir], tmp_path / "repo", "torch-cuda", overrides, catalog=FakeCatalog())


def test_torch_flavor_bad_input_is_one_line_on_the_command_line(tmp_path):
    vdir = make_minilm_like_variant(tmp_path / "v", "cpu-local", "fp32")
    out = str(tmp_path / "repo")
    result = CliRunner().invoke(
        main, ["repository", str(vdir), "--out", out, "--flavor", "torch-cuda", "--set", "torch_mode=jit"]
    )
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "torch_mode='jit'" in result.output and len(result.output.strip().splitlines()) == 1
