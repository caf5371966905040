"""`accelbench targets`, `targets show` and `probe`, through click and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main

# the ids issue 2's "Done means" names (also in test_hardware_catalog.py)
REQUIRED_IDS = (
    "a100-sxm4-80gb", "a100-sxm4-40gb", "h100-sxm", "h200-sxm", "l4", "l40s", "t4", "jetson-agx-orin-64gb",
    "jetson-orin-nx-16gb", "jetson-orin-nano-8gb", "inf2-xlarge", "tpu-v5e", "c7i.large", "c7i.xlarge",
    "c7i.2xlarge", "m7i.xlarge", "cpu-local",
)  # fmt: skip


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def test_targets_json_lists_required_ids_with_peaks_bandwidth_and_sourced_prices():
    result = run("targets", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {row["id"]: row for row in data["targets"]}
    assert data["baseline"] == "a100-sxm4-80gb"
    for target_id in REQUIRED_IDS:
        row = rows[target_id]
        assert row["memory_bw_gbs"] > 0 and (row["int8_tops"] or row["fp16_tflops"])
        assert row["usd_per_hour"] > 0 and row["cost_source"] and row["cost_as_of"]
    assert rows["jetson-orin-nano-8gb"]["cost_basis"].startswith("capex")
    assert rows["l4"]["usd_per_hour"] == pytest.approx(0.8048)


def test_targets_table():
    result = run("targets")
    assert result.exit_code == 0
    for target_id in REQUIRED_IDS:
        assert f" {target_id} " in result.stdout
    assert "INT8 TOPS" in result.stdout and "capex $1999 over 3 y" in result.stdout


def test_targets_show_lists_every_source():
    result = run("targets", "show", "l40s")
    assert result.exit_code == 0
    assert "mullet.se L40/L40S datasheet table" in result.stdout  # memory_bw_gbs source
    assert "skypilot-catalog catalogs/v8/aws/vms.csv" in result.stdout  # price source
    data = json.loads(run("targets", "show", "h200-sxm", "--json").stdout)
    assert data["compute_capability"] == "9.0" and data["mig_profiles"][-1]["name"] == "7g.141gb"
    assert data["sources"]["memory_bw_gbs"].startswith("morphllm.com") and data["summary"]["usd_per_hour"] > 0


def test_catalog_option_and_environment_variable(tmp_path):
    user = tmp_path / "prices.toml"
    user.write_text('[targets.cpu-local.price]\non_demand_usd_per_hour = 0.042\nsource = "my rack"\n')
    for args, env in ((["--catalog", str(user)], None), ([], {"ACCELBENCH_CATALOG": str(user)})):
        data = json.loads(run(*args, "targets", "show", "cpu-local", "--json", env=env).stdout)
        assert data["price"]["on_demand_usd_per_hour"] == 0.042 and data["price"]["source"] == "my rack"


def test_probe_json_here():
    result = run("probe", "--json")
    assert result.exit_code == 0 and not result.stderr
    info = json.loads(result.stdout)
    assert info["nvidia"]["present"] is False and "no NVIDIA GPU" in info["nvidia"]["reason"]
    assert info["jetson"]["present"] is False and info["neuron"]["present"] is False
    assert info["catalog_match"]["id"] == "cpu-local"
    human = run("probe")
    assert human.exit_code == 0 and "catalog    cpu-local" in human.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["targets", "show", "l40"], "unknown target 'l40'; did you mean l40s, l4?"),
        (["--catalog", "{missing}", "targets"], "catalog file not found"),
        (["--catalog", "{bad}", "targets", "--json"], "TOML syntax error"),
        (["--catalog", "{negative}", "targets"], "targets.l4.memory_bw_gbs: must be positive"),
        (["--catalog", "{missing}", "probe", "--json"], "catalog file not found"),
    ],
)
def test_bad_input_is_one_stderr_line_and_exit_2(tmp_path, args, needle):
    files = {
        "missing": tmp_path / "missing.toml",
        "bad": tmp_path / "bad.toml",
        "negative": tmp_path / "neg.toml",
    }
    files["bad"].write_text("[targets.l4\n")
    files["negative"].write_text("[targets.l4]\nmemory_bw_gbs = -1\n")
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    result = run(*args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error: ") and needle in lines[0]
    assert "Traceback" not in result.output


def test_subprocess_bad_catalog_has_no_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[targets.l4]\nmemory_bw_gbs = 'x'\n")
    env = {**os.environ, "ACCELBENCH_CATALOG": str(bad)}
    done = subprocess.run([sys.executable, "-m", "accelbench.cli", "targets"], capture_output=True, text=True,
                          env=env, cwd=Path(__file__).parent.parent, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.strip()
        == f"accelbench: error: {bad}: targets.l4.memory_bw_gbs: must be a number, got str 'x'"
    )


def test_subprocess_probe_json():
    done = subprocess.run([sys.executable, "-m", "accelbench.cli", "probe", "--json"], capture_output=True,
                          text=True, cwd=Path(__file__).parent.parent, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["catalog_match"]["id"] == "cpu-local"
