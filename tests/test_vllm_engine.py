"""``engine = "vllm"`` without vLLM (issue 49 item 1): the spec's engine arguments, the Triton model written for
vLLM, the GPU host's layout from ``accelbench run --target l4``. vLLM itself runs in tests/test_vllm_live.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from accelbench.errors import BadInputError
from accelbench.experiment.spec import parse_spec
from accelbench.serving.vllm_engine import VllmArgs, vllm_model_config, write_vllm_model

ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]


def test_the_specs_precision_and_limits_become_vllms_engine_arguments():
    args = VllmArgs.from_spec("/m", "tiny", "fp32", max_num_seqs=8, max_model_len=512, kv_cache_dtype="fp8")
    assert args.model_json() == {
        "model": "/m",
        "served_model_name": "tiny",
        "dtype": "float32",
        "kv_cache_dtype": "fp8",
        "max_num_seqs": 8,
        "max_model_len": 512,
        "enable_prefix_caching": True,
    }
    cli = args.cli()
    assert cli[cli.index("--dtype") + 1] == "float32" and "--enable-prefix-caching" in cli
    assert cli[cli.index("--max-num-seqs") + 1] == "8" and cli[cli.index("--kv-cache-dtype") + 1] == "fp8"
    gpu = VllmArgs.from_spec("hf", "tiny", "fp8", 64, 4096, gpu=True).model_json()
    assert gpu["quantization"] == "fp8" and gpu["dtype"] == "auto" and gpu["gpu_memory_utilization"] == 0.9
    assert "enforce_eager" not in gpu and "--enforce-eager" not in cli  # vLLM's default: compiled
    eager = VllmArgs.from_spec("/m", "tiny", "fp32", 1, 128, enforce_eager=True)
    assert eager.model_json()["enforce_eager"] is True and "--enforce-eager" in eager.cli()
    with pytest.raises(BadInputError, match="precision 'int4' has no vLLM engine argument"):
        VllmArgs.from_spec("hf", "tiny", "int4", 1, 128)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('kv_cache_dtype = "int8"', "kv_cache_dtype: 'int8' is not one of auto, fp8"),
        ("max_num_seqs = 0", "max_num_seqs: must be a positive integer"),
        ('max_model_len = "long"', "max_model_len: must be a positive integer"),
        ('enforce_eager = "yes"', "enforce_eager: must be true or false"),
    ],
)
def test_the_spec_refuses_bad_engine_arguments(line, needle):
    text = f'[[models]]\nuri = "builtin:llama-tiny"\nengine = "vllm"\n{line}\n[[targets]]\nid = "cpu-local"\n'
    with pytest.raises(BadInputError, match=f"spec.toml: models\\[0\\].{needle}"):
        parse_spec(text, "spec.toml")


def test_the_triton_model_is_decoupled_python_with_the_generative_tensors(tmp_path):
    config = vllm_model_config("tiny", gpu=False)
    assert 'backend: "python"' in config and "decoupled: true" in config and "KIND_CPU" in config
    assert 'name: "input_ids"' in config and 'name: "output_ids"' in config
    assert "tensor_transport" not in config  # BYTES tensors: the stub's numpy<2 bridge
    assert "KIND_MODEL" in vllm_model_config("tiny", gpu=True)  # vLLM places itself on the GPU
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    folder = write_vllm_model(
        tmp_path / "repo", "tiny", hf, {"model": "/elsewhere", "dtype": "float32"}, gpu=False
    )
    assert json.loads((folder / "1" / "model.json").read_text()) == {"model": "hf", "dtype": "float32"}
    assert (folder / "1" / "hf" / "config.json").is_file()
    assert "AsyncLLM" in (folder / "1" / "model.py").read_text()


@pytest.mark.slow  # builds builtin:llama-tiny's checkpoint when the cache has none (about 20 s)
def test_run_for_a_gpu_target_writes_what_the_gpu_host_runs(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        textwrap.dedent(f"""
        out = "{tmp_path / "out"}"
        [[models]]
        uri = "builtin:llama-tiny"
        precisions = ["fp16"]
        max_model_len = 1024
        [[targets]]
        id = "l4"
        mode = "project"
        [workload]
        isl = 16
        osl = 8
        [load]
        levels = [1, 16]
    """)
    )
    done = subprocess.run([*ACCELBENCH, "run", str(spec), "--target", "l4"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert f"l4: wrote {out / 'repository' / 'l4'} and {out / 'serve_vllm-l4.sh'}" in done.stdout
    assert "report:" not in done.stdout  # nothing was measured here
    model = out / "repository" / "l4" / "llama-tiny__l4__fp16"
    # no engine named: a generative model on an NVIDIA datacenter GPU is served by vLLM
    served = json.loads((model / "1" / "model.json").read_text())
    assert served["dtype"] == "float16" and served["max_num_seqs"] == 16 and served["max_model_len"] == 1024
    assert "KIND_MODEL" in (model / "config.pbtxt").read_text()
    script = (out / "serve_vllm-l4.sh").read_text()
    assert "nvcr.io/nvidia/tritonserver:26.01-vllm-python-py3" in script
    assert "tritonserver --model-repository=/models" in script
    assert subprocess.run(["bash", "-n", str(out / "serve_vllm-l4.sh")]).returncode == 0
    manifest = json.loads((out / "variants" / "llama-tiny__l4__fp16" / "manifest.json").read_text())
    assert manifest["engine"]["serving_engine"] == "vllm" and manifest["engine"]["args"] == {
        **served,
        "model": "hf",
    }
