"""`accelbench plan cloud`: SkyPilot task YAMLs, checked against SkyPilot's own schemas.

``tests/data/experiment/skypilot_schemas.json`` is SkyPilot 0.14.1's task/resources/storage JSON schemas, dumped
from the installed package (``sky.utils.schemas``). The YAMLs are also validated by SkyPilot's own
``validate_schema``: the session fixture ``sky_python`` installs ``skypilot==0.14.1`` once into a venv in the cache
folder (``$ACCELBENCH_CACHE_DIR`` or ``~/.cache/accelbench``) and reuses it; ACCELBENCH_SKYPILOT_PYTHON names an
existing interpreter instead. The test is skipped only when the package index cannot be reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.experiment.spec import load_spec, write_example_spec

DATA = Path(__file__).parent / "data" / "experiment"
SCHEMAS = json.loads((DATA / "skypilot_schemas.json").read_text())
SKYPILOT = "skypilot==0.14.1"  # the version the committed schemas were dumped from
# pip's words when it cannot reach the index (as opposed to a broken install, which must fail the test)
_UNREACHABLE = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
                "No matching distribution found", "Could not find a version", "ConnectTimeout", "ProxyError")  # fmt: skip


def _cache_root() -> Path:
    if env := os.environ.get("ACCELBENCH_CACHE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "accelbench"


def _sky_imports(python: Path) -> bool:
    done = subprocess.run([str(python), "-c", "import sky.utils.schemas"], capture_output=True, timeout=120)
    return done.returncode == 0


@pytest.fixture(scope="session")
def sky_python() -> str:
    """An interpreter with SkyPilot installed: made once per cache folder, then reused."""
    if env := os.environ.get("ACCELBENCH_SKYPILOT_PYTHON"):
        return env
    venv = _cache_root() / f"{SKYPILOT.replace('==', '-')}-venv"
    python = venv / "bin" / "python"
    if python.exists() and _sky_imports(python):
        return str(python)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True)
    pip = subprocess.run([str(python), "-m", "pip", "install", "--quiet", SKYPILOT],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    if pip.returncode != 0:
        if any(word in pip.stderr for word in _UNREACHABLE):
            pytest.skip(
                f"the package index is unreachable, cannot install {SKYPILOT}: {pip.stderr.strip()[-300:]}"
            )
        pytest.fail(f"pip install {SKYPILOT} failed: {pip.stderr[-2000:]}")
    assert _sky_imports(python), f"{SKYPILOT} installed into {venv} but `import sky` fails"
    return str(python)


@pytest.fixture
def plan(tmp_path):
    spec = write_example_spec(tmp_path / "exp.toml")
    result = CliRunner().invoke(main, ["plan", "cloud", str(spec), "--out", str(tmp_path / "sky")])
    assert result.exit_code == 0, result.output
    return spec, tmp_path / "sky", result.output


def _check(schema: dict, value: object, where: str) -> None:
    """The subset of JSON-schema SkyPilot's schemas use for these fields: types, enums, unknown keys."""
    types = {
        "object": dict,
        "string": str,
        "integer": int,
        "number": (int, float),
        "array": list,
        "boolean": bool,
    }
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                _check(option, value, where)
                return
            except AssertionError as err:
                errors.append(str(err))
        raise AssertionError(f"{where}: matches none of anyOf: {errors}")
    kind = schema.get("type")
    if isinstance(kind, str):
        assert isinstance(value, types[kind]), f"{where}: {value!r} is not {kind}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "case_insensitive_enum" in schema:  # SkyPilot's own keyword
        allowed = [str(v).upper() for v in schema["case_insensitive_enum"]]
        assert str(value).upper() in allowed, f"{where}: {value!r} not in {allowed}"
    if isinstance(value, dict) and "properties" in schema:
        for key, sub in value.items():
            if key in schema["properties"]:
                _check(schema["properties"][key], sub, f"{where}.{key}")
            else:
                assert schema.get("additionalProperties", True) is not False, f"{where}: unknown key {key!r}"


def test_one_task_per_cloud_target_and_the_rest_skipped_with_reasons(plan):
    _, sky, output = plan
    assert sorted(p.name for p in sky.glob("*.yaml")) == [
        "a100-sxm4-80gb.sky.yaml", "inf2-xlarge.sky.yaml", "l4.sky.yaml", "l40s.sky.yaml"]  # fmt: skip
    assert "skipped: jetson-agx-orin-64gb: a Jetson is not a cloud machine" in output
    assert "skipped: cpu-local:" in output


def test_tasks_match_skypilot_schemas(plan):
    _, sky, _ = plan
    for path in sky.glob("*.yaml"):
        task = yaml.safe_load(path.read_text())
        _check(SCHEMAS["task"], task, path.name)
        _check(SCHEMAS["resources"], task["resources"], f"{path.name}:resources")
        for mount, source in task["file_mounts"].items():
            if isinstance(source, dict):
                _check(SCHEMAS["storage"], source, f"{path.name}:file_mounts.{mount}")


def test_schema_check_can_fail():
    with pytest.raises(AssertionError, match="unknown key 'acceleratorz'"):
        _check(SCHEMAS["resources"], {"acceleratorz": "L4:1"}, "resources")
    with pytest.raises(AssertionError, match="mode"):
        _check(SCHEMAS["storage"], {"name": "b", "mode": "TELEPORT"}, "storage")


def test_task_contents(plan):
    spec, sky, _ = plan
    l4 = yaml.safe_load((sky / "l4.sky.yaml").read_text())
    assert l4["resources"]["accelerators"] == "L4:1"
    assert l4["resources"]["instance_type"] == "g6.xlarge"  # the instance the catalog prices
    assert "accelbench run ~/accelbench/spec.toml --target l4" in l4["run"]
    assert l4["file_mounts"]["~/accelbench/spec.toml"] == str(spec.resolve())
    assert l4["file_mounts"]["/accelbench-results"]["mode"] == "MOUNT"
    assert "accelbench[gpu,tensorrt]" in l4["setup"]
    inf2 = yaml.safe_load((sky / "inf2-xlarge.sky.yaml").read_text())
    assert inf2["resources"]["instance_type"] == "inf2.xlarge"
    assert inf2["resources"]["accelerators"] == "Inferentia2:1"
    assert "pip.repos.neuron.amazonaws.com" in inf2["setup"]
    a100 = yaml.safe_load((sky / "a100-sxm4-80gb.sky.yaml").read_text())
    # an 8-GPU instance in the catalog: ask SkyPilot for one A100-80GB rather than the whole p4de
    assert a100["resources"] == {"accelerators": "A100-80GB:1", "disk_size": 100}


def test_the_planned_command_restricts_the_spec(plan):
    spec, _, _ = plan
    loaded = load_spec(spec)
    assert [(t.id, t.mode) for t in loaded.only_target("l4").targets] == [("l4", "local")]
    assert [(t.id, t.mode) for t in loaded.only_target("a100-sxm4-80gb").targets] == [
        ("a100-sxm4-80gb", "local")
    ]


def test_bucket_option(tmp_path):
    spec = write_example_spec(tmp_path / "exp.toml")
    CliRunner().invoke(
        main, ["plan", "cloud", str(spec), "--out", str(tmp_path / "s"), "--bucket", "s3://team/ab"]
    )
    mount = yaml.safe_load((tmp_path / "s" / "l4.sky.yaml").read_text())["file_mounts"]["/accelbench-results"]
    assert mount == {"source": "s3://team/ab", "mode": "MOUNT"}


SKY_SCRIPT = """
import sys, yaml
from sky.utils import common_utils, schemas
for path in sys.argv[1:]:
    cfg = yaml.safe_load(open(path))
    common_utils.validate_schema(cfg, schemas.get_task_schema(), 'task: ')
    common_utils.validate_schema(cfg['resources'], schemas.get_resources_schema(), 'resources: ')
    for v in cfg.get('file_mounts', {}).values():
        if isinstance(v, dict):
            common_utils.validate_schema(v, schemas.get_storage_schema(), 'storage: ')
print('ok', len(sys.argv) - 1)
"""


def _sky_validates(sky_python: str, paths: list[str]) -> None:
    done = subprocess.run([sky_python, "-c", SKY_SCRIPT, *paths], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"ok {len(paths)}"


@pytest.mark.slow
def test_skypilot_itself_accepts_the_tasks(plan, sky_python):
    _, sky, _ = plan
    _sky_validates(sky_python, [str(p) for p in sky.glob("*.sky.yaml")])


AGENT_SPEC = (
    """
name = "fleet"
[[models]]
uri = "builtin:identity"
precisions = ["fp32"]
"""
    + "".join(
        f'[[targets]]\nid = "{t}"\nmode = "local"\n'
        for t in ("cpu-local", "l4", "l40s", "a100-sxm4-80gb", "h100-sxm", "inf2-xlarge")
    )
    + '[[targets]]\nid = "t4"\nmode = "project"\n'
)
ACCELERATORS = {"l4": "L4:1", "l40s": "L40S:1", "a100-sxm4-80gb": "A100-80GB:1", "h100-sxm": "H100:1",
                "inf2-xlarge": "Inferentia2:1"}  # fmt: skip


@pytest.fixture
def agent_plan(tmp_path):
    spec = tmp_path / "fleet.toml"
    spec.write_text(AGENT_SPEC)
    out = tmp_path / "plan"
    args = ["plan", "cloud", str(spec), "--out", str(out), "--server", "https://bench.example.org/"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.mark.slow
def test_agent_tasks_run_one_campaign_job_per_measured_target(agent_plan, sky_python):
    out, output = agent_plan
    assert sorted(p.name.split(".")[0] for p in out.glob("*.sky.yaml")) == sorted(ACCELERATORS)
    assert "skipped: cpu-local:" in output and "t4" not in output  # projected targets are not jobs
    for target_id, accelerator in ACCELERATORS.items():
        task = yaml.safe_load((out / f"{target_id}.sky.yaml").read_text())
        assert task["resources"]["accelerators"] == accelerator
        assert (f"accelbench agent --once --idle-exit 1800 --server https://bench.example.org --target {target_id} "
                "--work-dir ~/accelbench-work") in task["run"]  # fmt: skip
        assert task["secrets"] == {"ACCELBENCH_TOKEN": None} and "file_mounts" not in task
        _check(SCHEMAS["task"], task, target_id)
    _sky_validates(sky_python, [str(p) for p in out.glob("*.sky.yaml")])


def test_kubernetes_jobs_select_the_accelerator_and_read_the_token_from_a_secret(agent_plan):
    out, _ = agent_plan
    jobs = {p.name.split(".")[0]: yaml.safe_load(p.read_text()) for p in out.glob("*.k8s.yaml")}
    assert sorted(jobs) == sorted(ACCELERATORS)
    products = {"l4": "NVIDIA-L4", "l40s": "NVIDIA-L40S", "a100-sxm4-80gb": "NVIDIA-A100-SXM4-80GB",
                "h100-sxm": "NVIDIA-H100-80GB-HBM3"}  # fmt: skip
    for target_id, job in jobs.items():
        assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
        (container,) = pod["containers"]
        assert container["command"][:3] == ["accelbench", "agent", "--once"]
        assert container["command"][container["command"].index("--target") + 1] == target_id
        assert container["env"] == [{"name": "ACCELBENCH_TOKEN", "valueFrom": {
            "secretKeyRef": {"name": "accelbench-runner", "key": "token"}}}]  # fmt: skip
        if target_id == "inf2-xlarge":
            assert container["resources"] == {"limits": {"aws.amazon.com/neuron": 1}}
            assert "nodeSelector" not in pod
        else:
            assert pod["nodeSelector"] == {"nvidia.com/gpu.product": products[target_id]}
            assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}


def test_server_must_be_a_url(tmp_path):
    spec = tmp_path / "fleet.toml"
    spec.write_text(AGENT_SPEC)
    result = CliRunner().invoke(main, ["plan", "cloud", str(spec), "--server", "bench:8080"])
    assert result.exit_code == 2 and "is not an http(s) URL" in result.output


def test_the_jetson_systemd_unit_in_the_docs_runs_a_valid_agent_command():
    import re
    import shlex

    from accelbench.commands.campaigns import agent_cmd

    docs = (Path(__file__).resolve().parents[1] / "docs" / "multihost.md").read_text()
    unit = re.search(r"```ini\n(# /etc/systemd/system/accelbench-agent.service.*?)```", docs, re.S).group(1)
    assert "[Service]" in unit and "[Install]" in unit and "KillSignal=SIGTERM" in unit
    exec_start = re.search(r"^ExecStart=(.*?[^\\])$", unit.replace("\\\n", " "), re.M).group(1)
    argv = shlex.split(exec_start)
    assert argv[0].endswith("/accelbench") and argv[1] == "agent"
    ctx = agent_cmd.make_context("agent", argv[2:])  # parses and checks the options without running
    assert ctx.params["target_id"] == "jetson-agx-orin-64gb" and ctx.params["labels"] == ("site=desk",)
