"""Generative recipes for the accelerators: the folders, the scripts (bash -n, shellcheck, run against fake
toolchains that check their argv), and every command line against the tools' documented options."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import llm_recipe_options as documented
import pytest

from accelbench.documents import load_manifest, to_dict
from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.hardware.catalog import load_catalog
from accelbench.models.toolchains import llm_recipes

SHELLCHECK = shutil.which("shellcheck")
# CI installs Debian's shellcheck and sets ACCELBENCH_REQUIRE_SHELLCHECK=1: there a missing one is a failure
if SHELLCHECK is None and os.environ.get("ACCELBENCH_REQUIRE_SHELLCHECK"):
    raise RuntimeError("ACCELBENCH_REQUIRE_SHELLCHECK is set but shellcheck is not installed")

# (target, precision) -> the recipe and the documented tools its script calls; the five first
CASES = {
    ("l4", "fp8"): ("trtllm-modelopt-fp8", ["hf_ptq.py", "trtllm-serve"]),
    ("h100-sxm", "fp8"): ("trtllm-modelopt-fp8", ["hf_ptq.py", "trtllm-serve"]),
    ("a100-sxm4-80gb", "int4"): ("trtllm-modelopt-int4-awq", ["hf_ptq.py", "trtllm-serve"]),
    ("inf2-xlarge", "bf16"): ("nxdi-bf16", ["inference_demo"]),
    (
        "jetson-agx-orin-64gb",
        "int4",
    ): ("edgellm-int4-awq", ["tensorrt-edgellm-quantize-llm", "tensorrt-edgellm-export-llm", "llm_build"]),
    ("l40s", "fp8"): ("trtllm-modelopt-fp8", ["hf_ptq.py", "trtllm-serve"]),
    ("h200-sxm", "int4"): ("trtllm-modelopt-int4-awq", ["hf_ptq.py", "trtllm-serve"]),
    ("a100-sxm4-80gb", "int8"): ("trtllm-modelopt-int8-smoothquant", ["hf_ptq.py", "trtllm-serve"]),
    ("a10g", "bf16"): ("trtllm-bf16", ["trtllm-serve"]),
    ("jetson-orin-nano-8gb", "int8"): (
        "edgellm-int8-smoothquant",
        ["tensorrt-edgellm-quantize-llm", "tensorrt-edgellm-export-llm", "llm_build"],
    ),
    ("jetson-agx-orin-64gb", "fp16"): ("edgellm-fp16", ["tensorrt-edgellm-export-llm", "llm_build"]),
}


@dataclass
class Tensor:
    name: str
    dtype: str = "int64"
    shape: tuple = (-1,)

    def to_dict(self):
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass
class Card:
    """The parts of a generative model card the recipes read (llm-model's ModelCard has them all)."""

    name: str = "tiny-llama"
    generative: object = field(default_factory=lambda: SimpleNamespace(context_length=2048, eos_token_id=2))
    accuracy: object = field(
        default_factory=lambda: SimpleNamespace(metric="next_token_agreement", tolerance=0.9)
    )
    inputs: tuple = (Tensor("input_ids"),)
    outputs: tuple = ()

    def to_dict(self):
        return {"name": self.name, "task": "text-generation"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A Hugging Face Llama checkpoint saved from a LlamaConfig with fixed-seed weights (no download)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True, eos_token_id=2,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("hf") / "tiny-llama"
    LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None)


def write(checkpoint, target, precision, out, uri="hf:tiny-llama", card=None):
    """The recipe's manifest as the JSON it writes (its keys, read below), and the recipe."""
    manifest, recipe = llm_recipes.write_recipe(card or Card(), checkpoint, None, target, precision, out, uri)
    return to_dict(manifest), recipe


@pytest.fixture(scope="module")
def folders(checkpoint, catalog, tmp_path_factory):
    out = tmp_path_factory.mktemp("variants")
    made = {}
    for target_id, precision in CASES:
        manifest, recipe = write(checkpoint, catalog.get(target_id), precision, out)
        made[target_id, precision] = (out / manifest["name"], manifest, recipe)
    return made


@pytest.mark.parametrize("case", list(CASES))
def test_recipe_folder_has_checkpoint_script_and_manifest(folders, case):
    folder, manifest, _ = folders[case]
    assert folder.name == f"tiny-llama__{case[0].replace('.', '-')}__{case[1]}"
    assert (folder / "hf" / "config.json").is_file() and list((folder / "hf").glob("*.safetensors"))
    assert os.access(folder / "build_engine.sh", os.X_OK)
    assert manifest["recipe"] == CASES[case][0] and manifest["precision"] == case[1]
    assert manifest["format"] == "hf-checkpoint" and manifest["model_file"] == "hf"
    engine = manifest["engine"]
    assert engine["status"] == "must-build-on-target" and engine["script"] == "build_engine.sh"
    assert engine["commands"] == CASES[case][1] and engine["versions"] and engine["sources"]
    assert engine["host_requirement"] == engine["requires"][0] and len(engine["requires"]) >= 2
    assert manifest["accuracy"]["verdict"] == "NOT_RUN"
    assert "build_engine.sh" in manifest["files"] and "hf/config.json" in manifest["files"]
    load_manifest(folder / "manifest.json")  # a valid accelbench.variant/1 document


@pytest.mark.parametrize("case", list(CASES))
def test_script_passes_bash_n(folders, case):
    done = subprocess.run(
        ["bash", "-n", str(folders[case][0] / "build_engine.sh")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck is not installed (apt-get install -y shellcheck)")
@pytest.mark.parametrize("case", list(CASES))
def test_script_passes_shellcheck(folders, case):
    done = subprocess.run(
        [SHELLCHECK, str(folders[case][0] / "build_engine.sh")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("case", list(CASES))
def test_every_command_line_uses_documented_options(folders, case):
    script = (folders[case][0] / "build_engine.sh").read_text()
    calls = documented.invocations(script)
    assert [tool for tool, _ in calls] == CASES[case][1]
    for tool, argv in calls:
        assert documented.problems(tool, argv) == [], (tool, argv)


@pytest.mark.parametrize(
    ("tool", "argv", "needle"),
    [
        ("hf_ptq.py", ["--pyt_ckpt_path", "hf", "--qformat", "int8_sq"], "not one of"),  # removed in 0.47
        ("hf_ptq.py", ["--qformat", "fp8"], "required option --pyt_ckpt_path"),
        ("trtllm-serve", ["engine", "--backend", "pytorch", "--config", "x.yaml"], "older release"),
        ("trtllm-serve", ["engine", "--max_batch_size"], "needs a value"),
        ("inference_demo", ["--model-type", "gpt2", "--task-type", "causal-lm", "run"], "not one of"),
        ("llm_build", ["--onnxDir=onnx", "--maxBatch=1"], "not a documented option"),
        (
            "tensorrt-edgellm-quantize-llm",
            ["--model_dir", "hf", "--output_dir", "q", "--quantization", "w4a16"],
            "not one of",
        ),
    ],
)
def test_the_option_check_catches_wrong_command_lines(tool, argv, needle):
    assert any(needle in p for p in documented.problems(tool, argv))


def test_recorded_option_lists_name_their_source_and_version():
    for tool in documented.TOOLS:
        spec = documented.documented(tool)
        assert spec["source"].startswith("https://") and spec["version"] and spec["options"]


@pytest.mark.parametrize(
    ("target_id", "precision", "needle"),
    [
        ("a100-sxm4-80gb", "fp8", "Ada or Hopper"),
        ("jetson-agx-orin-64gb", "fp8", "no FP8"),
        ("t4", "int4", "Ampere or newer"),
        ("inf2-xlarge", "int4", "choose one of bf16"),
        ("l4", "fp32", "choose one of fp8, int4, int8, bf16"),
    ],
)
def test_precisions_a_target_cannot_run_are_one_line(
    checkpoint, catalog, tmp_path, target_id, precision, needle
):
    with pytest.raises(BadInputError, match=needle) as err:
        write(checkpoint, catalog.get(target_id), precision, tmp_path)
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())  # nothing half-written


@pytest.mark.parametrize(("target_id", "default"), [("l4", "fp8"), ("h200-sxm", "fp8"), ("a100-sxm4-80gb", "int4"),
                                                     ("jetson-orin-nx-16gb", "int4"), ("inf2-8xlarge", "bf16"), ("t4", "bf16")])  # fmt: skip
def test_default_precision_follows_the_hardware(checkpoint, catalog, tmp_path, target_id, default):
    manifest, _ = write(checkpoint, catalog.get(target_id), None, tmp_path)
    assert manifest["precision"] == default


def test_targets_without_a_recipe_and_unsupported_models(checkpoint, catalog, tmp_path):
    with pytest.raises(ToolchainMissingError, match="no generative recipe"):
        llm_recipes.target_module(catalog.get("tpu-v5e"))
    odd = tmp_path / "odd"
    shutil.copytree(checkpoint, odd)
    config = json.loads((odd / "config.json").read_text())
    (odd / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(BadInputError, match="no model type 'gpt2'"):
        write(odd, catalog.get("inf2-xlarge"), None, tmp_path)
    with pytest.raises(BadInputError, match="not a Hugging Face checkpoint"):
        write(tmp_path / "none", catalog.get("l4"), None, tmp_path)


def test_the_inferentia_recipe_spans_the_neuroncores(folders):
    _, _, recipe = folders["inf2-xlarge", "bf16"]
    ((tool, argv),) = documented.invocations(recipe.script)
    argv, _, _ = documented.parse(argv, documented.documented(tool))
    assert argv["--tp-degree"] == "2" and argv["--torch-dtype"] == "bfloat16"


def test_tensor_parallelism_divides_the_attention_heads(catalog):
    from accelbench.models.toolchains import neuron_llm

    big = catalog.get("inf2-48xlarge")
    shape = llm_recipes.RecipeModel("m", "llama", 2048, heads=4)
    assert big.extra["neuroncores"] == 24 and neuron_llm.tp_degree(big, shape) == 4
    assert neuron_llm.tp_degree(big, llm_recipes.RecipeModel("m", "llama", 2048, heads=32)) == 16


# ---------------------------------------------------------------- the scripts, run against fake toolchains
def _fake(bin_dir: Path, name: str, tool: str | None, effect: str = "") -> None:
    """A fake ``name`` on PATH: it checks its argv against ``tool``'s documented options (exit 2 like argparse
    on a wrong one), records it, then runs ``effect`` (Python, with ``args`` the argv)."""
    check = (
        f"problems = llm_recipe_options.problems({tool!r}, args)\n"
        "if problems:\n"
        "    print('fake: ' + '; '.join(problems), file=sys.stderr)\n"
        "    sys.exit(2)\n"
        if tool
        else ""
    )
    body = textwrap.dedent(
        f"""\
        #!{sys.executable}
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import llm_recipe_options
        args = sys.argv[1:]
        with open(os.path.join({str(bin_dir)!r}, "calls"), "a") as log:
            log.write({name!r} + " " + " ".join(args) + "\\n")
        """
    )
    path = bin_dir / name
    path.write_text(body + check + effect)
    path.chmod(0o755)


def _toolchain(tmp_path: Path, gpu: str = "NVIDIA L4") -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f'#!/bin/sh\necho "{gpu}"\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    _fake(bin_dir, "trtllm-serve", "trtllm-serve")
    # python: `-c "import ..."` succeeds; `hf_ptq.py ARGS` is checked and writes the export
    _fake(
        bin_dir,
        "python3",
        None,
        "if args[0] == '-c':\n    sys.exit(0)\n"
        "problems = llm_recipe_options.problems('hf_ptq.py', args[1:])\n"
        "if problems:\n    print('fake: ' + '; '.join(problems), file=sys.stderr)\n    sys.exit(2)\n"
        "out = args[args.index('--export_path') + 1]\n"
        "os.makedirs(out, exist_ok=True)\nopen(os.path.join(out, 'config.json'), 'w').write('{}')\n",
    )
    (tmp_path / "hf_ptq.py").write_text("# stands for Model-Optimizer/examples/hf_ptq/hf_ptq.py\n")
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "HF_PTQ": str(tmp_path / "hf_ptq.py")}


def _run(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(folder / "build_engine.sh"), *args], env=env, capture_output=True, text=True
    )


def test_l4_fp8_script_builds_then_serves_with_documented_commands(folders, tmp_path):
    folder = tmp_path / "v"
    shutil.copytree(folders["l4", "fp8"][0], folder)
    env = _toolchain(tmp_path)
    done = _run(folder, env)
    assert done.returncode == 0, done.stderr
    assert (folder / "engine" / "config.json").is_file()
    done = _run(folder, env, "serve")
    assert done.returncode == 0, done.stderr
    calls = [
        c for c in (tmp_path / "bin" / "calls").read_text().splitlines() if not c.startswith("python3 -c")
    ]
    assert calls[0].startswith(f"python3 {tmp_path / 'hf_ptq.py'} --pyt_ckpt_path hf --qformat fp8 ")
    assert "--kv_cache_qformat fp8_cast" in calls[0]
    assert calls[1].startswith("trtllm-serve engine --backend pytorch --host 127.0.0.1 --port 8000")


def test_a100_int4_script_keeps_the_kv_cache_unquantized(folders, tmp_path):
    folder = tmp_path / "v"
    shutil.copytree(folders["a100-sxm4-80gb", "int4"][0], folder)
    done = _run(folder, _toolchain(tmp_path, gpu="NVIDIA A100-SXM4-80GB"))
    assert done.returncode == 0, done.stderr
    call = (tmp_path / "bin" / "calls").read_text()
    assert "--qformat int4_awq --kv_cache_qformat none" in call  # the A100 has no FP8


@pytest.mark.parametrize(
    ("gpu", "remove", "code", "needle"),
    [
        ("NVIDIA L40S", None, 1, "not NVIDIA L4"),
        ("NVIDIA L4", "bin/trtllm-serve", 3, "trtllm-serve not found"),
        ("NVIDIA L4", "hf_ptq.py", 3, "hf_ptq.py not found"),
    ],
)
def test_l4_script_refuses_another_gpu_or_a_missing_toolchain(folders, tmp_path, gpu, remove, code, needle):
    env = _toolchain(tmp_path, gpu=gpu)
    if remove:
        (tmp_path / remove).unlink()
    done = _run(folders["l4", "fp8"][0], env, "check")
    assert done.returncode == code and needle in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_jetson_and_neuron_scripts_refuse_other_hosts_in_one_line(folders, tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    for case, needle in ((("jetson-agx-orin-64gb", "int4"), "not NVIDIA Jetson AGX Orin"),
                         (("inf2-xlarge", "bf16"), "no Neuron device")):  # fmt: skip
        done = _run(folders[case][0], env, "check")
        assert done.returncode == 1 and needle in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    done = _run(folders["inf2-xlarge", "bf16"][0], {**env, "ACCELBENCH_FORCE": "1"}, "check")
    assert done.returncode == 3 and "inference_demo not found" in done.stderr


def test_jetson_script_exports_and_builds_with_documented_commands(folders, tmp_path):
    folder = tmp_path / "v"
    shutil.copytree(folders["jetson-agx-orin-64gb", "int4"][0], folder)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    makes = "out = args[args.index('--output_dir') + 1]\nos.makedirs(out, exist_ok=True)\n"
    _fake(bin_dir, "tensorrt-edgellm-quantize-llm", "tensorrt-edgellm-quantize-llm", makes)
    _fake(bin_dir, "tensorrt-edgellm-export-llm", "tensorrt-edgellm-export-llm",
          makes + "open(os.path.join(out, 'config.json'), 'w').write('{}')\n")  # fmt: skip
    _fake(bin_dir, "llm_build", "llm_build")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "ACCELBENCH_FORCE": "1",
        "LLM_BUILD": str(bin_dir / "llm_build"),
    }
    done = _run(folder, env)
    assert done.returncode == 0, done.stderr
    calls = [line.split()[0] for line in (bin_dir / "calls").read_text().splitlines()]
    assert calls == ["tensorrt-edgellm-quantize-llm", "tensorrt-edgellm-export-llm", "llm_build"]


# ---------------------------------------------------------------- the spec's engine, and the agent's build
def _spec(target_engine: str | None = None, model_engine: str | None = None, target: str = "l4", **extra):
    from accelbench.experiment.spec import parse_spec

    model = f'engine = "{model_engine}"\n' if model_engine else ""
    tgt = f'engine = "{target_engine}"\n' if target_engine else ""
    more = "".join(f'[[models]]\nuri = "{uri}"\n' for uri in extra.get("more_models", ()))
    text = f'[[models]]\nuri = "builtin:llama-tiny"\nprecisions = ["fp8"]\n{model}{more}[[targets]]\nid = "{target}"\n{tgt}'
    return parse_spec(text, "spec.toml")


def test_a_spec_names_the_serving_engine_per_target_or_per_model():
    spec = _spec("trtllm", more_models=["builtin:minilm-l6"])
    assert [spec.engine_for(m, spec.targets[0]) for m in spec.models] == ["trtllm", "trtllm"]
    spec = _spec(None, "trtllm", more_models=["builtin:minilm-l6"])
    assert [spec.engine_for(m, spec.targets[0]) for m in spec.models] == ["trtllm", "triton-python"]
    assert spec.only_target("l4").models[0].engine == "trtllm"
    with pytest.raises(BadInputError, match=r"spec.toml: targets\[0\].engine: 'tensorrt' is not one of"):
        _spec("tensorrt")


@pytest.mark.parametrize(
    ("target", "engine", "needle"),
    [
        ("inf2-xlarge", "trtllm", r"targets\[0\].engine: engine 'trtllm' does not run on inf2-xlarge"),
        ("jetson-agx-orin-64gb", "vllm", "does not run on jetson-agx-orin-64gb"),
        ("c7i.xlarge", "trtllm", "no generative recipe"),
    ],
)
def test_the_catalog_check_refuses_an_engine_the_target_cannot_run(catalog, target, engine, needle):
    from accelbench.experiment.spec import check_against_catalog

    with pytest.raises(BadInputError, match=needle):
        check_against_catalog(_spec(engine, target=target), catalog)
    check_against_catalog(_spec("vllm", target="inf2-xlarge"), catalog)  # what AWS documents for inf2
    check_against_catalog(_spec("vllm", target="l4"), catalog)  # vLLM itself, in the NGC vLLM container
    check_against_catalog(_spec("trtllm", target="jetson-agx-orin-64gb"), catalog)


def _writer(checkpoint, catalog):
    def make(request):
        assert request.engine == "trtllm"  # the agent asks for the recipe, whatever the precision
        manifest, _ = llm_recipes.write_recipe(
            Card(),
            checkpoint,
            None,
            catalog.get(request.target),
            request.precision,
            request.out_dir,
            request.model,
        )
        return manifest

    return make


def test_the_agent_runs_the_recipe_when_the_toolchain_is_there(checkpoint, catalog, tmp_path, monkeypatch):
    from accelbench.experiment import engines

    env = _toolchain(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("HF_PTQ", env["HF_PTQ"])
    lines = []
    spec = _spec(None, "trtllm", more_models=["builtin:minilm-l6"])
    rest = engines.prepare(spec, tmp_path / "work", None, lines.append, _writer(checkpoint, catalog))
    assert [m.uri for m in rest.models] == ["builtin:minilm-l6"]  # the pipeline measures what Triton serves
    assert (tmp_path / "work" / "variants" / "tiny-llama__l4__fp8" / "engine" / "config.json").is_file()
    assert any("toolchain ready on NVIDIA L4" in line for line in lines)
    assert any("trtllm engine built" in line for line in lines)


@pytest.mark.parametrize(
    ("remove", "needle"), [("bin/trtllm-serve", "trtllm-serve not found"), (None, "does not measure")]
)
def test_the_agent_fails_the_job_in_one_line(checkpoint, catalog, tmp_path, monkeypatch, remove, needle):
    from accelbench.experiment import engines

    env = _toolchain(tmp_path)
    if remove:
        (tmp_path / remove).unlink()
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("HF_PTQ", env["HF_PTQ"])
    with pytest.raises(ToolchainMissingError, match=needle) as err:
        engines.prepare(
            _spec("trtllm"), tmp_path / "work", None, lambda _: None, _writer(checkpoint, catalog)
        )
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("l4: tiny-llama__l4__fp8: build_engine.sh: " if remove else "built ")


def test_a_spec_without_recipe_engines_goes_to_the_pipeline_untouched(tmp_path):
    from accelbench.experiment import engines

    spec = _spec(None)
    assert engines.prepare(spec, tmp_path, None, print) is spec


# ---------------------------------------------------------------- accelbench quantize builtin:llama-tiny
@pytest.fixture(scope="module")
def llama_tiny_out(tmp_path_factory):
    return tmp_path_factory.mktemp("llama-tiny")


@pytest.mark.hf
@pytest.mark.parametrize(
    ("target_id", "precision", "code"),
    [("l4", "fp8", 0), ("h100-sxm", "fp8", 0), ("a100-sxm4-80gb", "int4", 0), ("inf2-xlarge", "bf16", 3),
     ("jetson-agx-orin-64gb", "int4", 0)],
)  # fmt: skip
def test_quantize_llama_tiny_writes_the_recipe_folder_without_a_gpu(
    llama_tiny_out, target_id, precision, code
):
    from click.testing import CliRunner

    from accelbench.cli import main

    run = CliRunner().invoke(
        main, ["quantize", "builtin:llama-tiny", "--target", target_id, "--precision", precision,
               "--out", str(llama_tiny_out)],
    )  # fmt: skip
    assert run.exit_code == code, run.output
    folder = llama_tiny_out / f"llama-tiny__{target_id}__{precision}"
    if code == 0:
        assert (
            "engine NOT built here: it must be built on" in run.stdout
            and "build_engine.sh there" in run.stdout
        )
    else:  # the Neuron convention: the folder is written, one line says where to build it
        errors = [line for line in run.stderr.splitlines() if line.startswith("accelbench: error:")]
        assert (
            len(errors) == 1
            and "inference_demo" in errors[0]
            and str(folder / "build_engine.sh") in errors[0]
        )
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["format"] == "hf-checkpoint" and manifest["card"]["task"] == "text-generation"
    assert (folder / "hf" / "config.json").is_file() and (folder / "hf" / "tokenizer.json").is_file()
    script = folder / "build_engine.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if SHELLCHECK:
        assert subprocess.run([SHELLCHECK, str(script)], capture_output=True).returncode == 0
    calls = documented.invocations(script.read_text())
    assert calls and all(documented.problems(tool, argv) == [] for tool, argv in calls)


@pytest.mark.slow
@pytest.mark.hf
def test_a_campaign_agent_without_the_recipe_toolchain_fails_the_job_in_one_line(tmp_path):
    """A real agent and server (SQLite): the job's spec serves llama-tiny with trtllm on an L4; this host has
    no NVIDIA driver, so the recipe's check fails and so does the job, with the script's one line."""
    from campaign_helpers import api_client, end_agents, start_agent
    from service_fixtures import create_token, running_server

    db = f"sqlite:///{tmp_path / 'results.db'}"
    spec = (
        'name = "llm"\n[[models]]\nuri = "builtin:llama-tiny"\nprecisions = ["fp8"]\nengine = "trtllm"\n'
        '[[targets]]\nid = "l4"\nmode = "local"\n'
    )
    with running_server(db, tmp_path, "--public-read") as server:
        runner = create_token(db, "runner", "agents")
        api = api_client(server.base_url)
        headers = {"Authorization": f"Bearer {server.token}"}
        campaign = api.post("/api/v1/campaigns", json={"spec": spec}, headers=headers).json()
        agent = start_agent(server.base_url, runner, "l4", tmp_path / "host", "host", "--once")
        try:
            assert agent.wait(timeout=300) == 0
        finally:
            end_agents([agent])
        (job,) = api.get(f"/api/v1/campaigns/{campaign['id']}", headers=headers).json()["jobs"]
    assert job["status"] == "failed" and "\n" not in job["reason"], job["reason"]
    assert job["reason"] == (
        "l4: llama-tiny__l4__fp8: build_engine.sh: nvidia-smi not found: no NVIDIA driver on this host"
    )
    assert (tmp_path / "host" / "job-1" / "variants" / "llama-tiny__l4__fp8" / "build_engine.sh").is_file()
