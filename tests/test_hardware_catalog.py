"""The packaged hardware catalog, its dataclasses, user overlays and the errors for malformed catalogs."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HOURS_PER_YEAR, load_catalog, target_summary

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DATA = Path(__file__).parent / "data" / "hardware"
REQUIRED_IDS = (
    "a100-sxm4-80gb", "a100-sxm4-40gb", "h100-sxm", "h200-sxm", "l4", "l40s", "t4", "jetson-agx-orin-64gb",
    "jetson-orin-nx-16gb", "jetson-orin-nano-8gb", "inf2-xlarge", "tpu-v5e", "c7i.large", "c7i.xlarge",
    "c7i.2xlarge", "m7i.xlarge", "cpu-local",
)  # fmt: skip


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def write(tmp_path: Path, text: str, name: str = "user.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_required_targets_have_peaks_bandwidth_and_a_sourced_cost(catalog):
    assert catalog.baseline_id == "a100-sxm4-80gb"
    for target_id in REQUIRED_IDS:
        target = catalog.get(target_id)
        assert target.peak_tflops and all(v > 0 for v in target.peak_tflops.values()), target_id
        assert target.memory_bw_gbs > 0
        cost = target.price or target.capex
        assert cost is not None and cost.source and cost.as_of, target_id
        assert target.usd_per_hour() > 0


def test_every_figure_of_the_shared_draft_survives(catalog):
    draft = tomllib.loads((DATA / "shared_hardware_catalog_draft.toml").read_text())
    assert draft["baseline"] == catalog.baseline_id
    for target_id, raw in draft["targets"].items():
        target = catalog.get(target_id)
        assert target.name == raw["name"]
        assert target.memory_gb == raw["memory_gb"] and target.memory_bw_gbs == raw["memory_bw_gbs"]
        assert target.tdp_w == raw.get("tdp_w")
        assert dict(target.peak_tflops) == raw["peak_tflops"], target_id
        price = raw.get("price", {})
        if "capex_usd" in price:  # Jetsons: the draft's price block became [capex]
            assert target.capex.usd == price["capex_usd"] and target.capex.source
        elif price:
            assert target.price.on_demand_usd_per_hour == price["on_demand_usd_per_hour"]
            per_accel = price.get("on_demand_usd_per_accel_hour")
            if per_accel is not None:
                assert target.price.usd_per_accel_hour() == pytest.approx(per_accel, rel=2e-3)
        assert len(target.alt_prices) == len(raw.get("alt_prices", []))
        assert target.sources, f"{target_id} lost its per-figure sources"


@pytest.mark.parametrize(
    ("target_id", "toolchain", "capability"),
    [
        ("a100-sxm4-80gb", "tensorrt", "8.0"), ("h100-sxm", "tensorrt", "9.0"), ("h200-sxm", "tensorrt", "9.0"),
        ("l4", "tensorrt", "8.9"), ("l40s", "tensorrt", "8.9"), ("t4", "tensorrt", "7.5"),
        ("a10g", "tensorrt", "8.6"), ("jetson-orin-nano-8gb", "tensorrt", "8.7"), ("inf2-xlarge", "neuron", None),
        ("tpu-v5e", "xla", None), ("c7i.large", "onnxruntime-cpu", None), ("cpu-local", "onnxruntime-cpu", None),
    ],
)  # fmt: skip
def test_toolchain_and_compute_capability(catalog, target_id, toolchain, capability):
    target = catalog.get(target_id)
    assert (target.toolchain, target.compute_capability) == (toolchain, capability)


@pytest.mark.parametrize(
    ("target_id", "full"),
    [
        ("a100-sxm4-80gb", "7g.80gb"),
        ("h100-sxm", "7g.80gb"),
        ("h200-sxm", "7g.141gb"),
        ("a100-sxm4-40gb", "7g.40gb"),
    ],
)
def test_mig_profiles(catalog, target_id, full):
    target = catalog.get(target_id)
    profiles = {p.name: p for p in target.mig_profiles}
    assert profiles[full].compute_fraction == 1.0 and profiles[full].memory_gb == target.memory_gb
    smallest = target.mig_profiles[0]
    assert smallest.compute_fraction == pytest.approx(1 / 7) and smallest.max_count == 7
    assert not catalog.get("l4").mig_profiles


def test_triton_defaults_follow_the_kind(catalog):
    assert catalog.get("l4").triton.instance_kind == "KIND_GPU"
    assert catalog.get("c7i.large").triton.instance_kind == "KIND_CPU"
    assert catalog.get("inf2-xlarge").triton.instance_kind == "KIND_MODEL"
    assert all(t.triton.preferred_batch_sizes for t in catalog.targets.values())


def test_price_bases(catalog):
    price = catalog.get("a100-sxm4-80gb").price
    assert price.usd_per_accel_hour() == pytest.approx(27.44705 / 8)
    assert price.usd_per_accel_hour("spot") == pytest.approx(9.9734 / 8)  # dearest AZ: conservative
    assert catalog.get("inf2-xlarge").price.usd_per_accel_hour("reserved") == pytest.approx(0.328)
    with pytest.raises(BadInputError, match=r"'a100-sxm4-80gb' has no reserved price"):
        price.usd_per_accel_hour("reserved")
    with pytest.raises(BadInputError, match="unknown price basis"):
        price.usd_per_accel_hour("monthly")


def test_capex_amortization(catalog):
    capex = catalog.get("jetson-orin-nano-8gb").capex
    assert capex.amortization_years == 3
    assert capex.usd_per_hour() == pytest.approx(249 / (3 * HOURS_PER_YEAR))
    assert capex.usd_per_hour(electricity_usd_per_kwh=0.2) == pytest.approx(249 / (3 * 8760) + 0.025 * 0.2)
    summary = target_summary(catalog.get("jetson-orin-nano-8gb"))
    assert summary.cost_basis.startswith("capex $249") and summary.cost_as_of


def test_unknown_id_suggests_close_ids(catalog):
    with pytest.raises(BadInputError, match=r"unknown target 'l40'; did you mean l40s, l4\?"):
        catalog.get("l40")
    with pytest.raises(BadInputError, match="accelbench targets"):
        catalog.get("zzzz-nothing-like-it")


def test_peak_for_missing_precision(catalog):
    assert catalog.get("t4").peak_for("int8") == 130.0
    with pytest.raises(BadInputError, match=r"'t4' has no bf16 peak .*known: fp32, fp16, int8"):
        catalog.get("t4").peak_for("bf16")


def test_to_dict_is_json_able(catalog):
    import json

    data = json.loads(json.dumps(catalog.get("h200-sxm").to_dict()))
    assert data["mig_profiles"][0]["name"] == "1g.18gb" and data["price"]["accelerators_per_instance"] == 8


# ---- user overlays ---------------------------------------------------------------------------------------


def test_partial_price_override_is_merged_and_relabelled(tmp_path):
    path = write(tmp_path, "[targets.l4.price]\non_demand_usd_per_hour = 0.5\n")
    target = load_catalog(path).get("l4")
    assert target.price.on_demand_usd_per_hour == 0.5
    assert target.price.instance == "g6.xlarge" and target.price.spot_usd_per_hour_max == 0.4011  # kept
    assert target.price.source == f"user catalog {path}"  # a negotiated price never keeps the public source
    assert target.memory_bw_gbs == 300  # untouched figures stay


def test_user_figure_override_gets_user_source(tmp_path):
    path = write(
        tmp_path,
        '[targets."cpu-local"]\nmemory_bw_gbs = 20.0\n[targets."cpu-local".peak_tflops]\nfp32 = 0.5\n',
    )
    target = load_catalog(path).get("cpu-local")
    assert target.memory_bw_gbs == 20.0 and target.peak_tflops["fp32"] == 0.5
    assert target.peak_tflops["int8"] == 6.5536  # merged, not replaced
    assert target.sources["memory_bw_gbs"] == f"user catalog {path}"


def test_user_adds_a_target_and_changes_the_baseline(tmp_path):
    text = """
baseline = "my-box"
[targets.my-box]
name = "My box"
vendor = "amd"
kind = "cpu"
memory_gb = 64
memory_bw_gbs = 50
toolchain = "onnxruntime-cpu"
[targets.my-box.peak_tflops]
fp32 = 1.0
[targets.my-box.price]
provider = "me"
on_demand_usd_per_hour = 0.1
source = "my invoice"
as_of = "2026-11"
"""
    catalog = load_catalog(write(tmp_path, text))
    assert catalog.baseline_id == "my-box"
    assert catalog.get("my-box").triton.instance_kind == "KIND_CPU"  # default by kind
    assert "l4" in catalog.targets and list(catalog.targets)[-1] == "my-box"


# ---- malformed catalogs: file, key path, what is wrong ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("[targets.l4\nname = 1\n", r"TOML syntax error"),
        ("[targets.l4]\nmemory_bw_gbs = \"fast\"\n", r"targets\.l4\.memory_bw_gbs: must be a number, got str"),
        ("[targets.l4]\nmemory_bw_gbs = -3\n", r"targets\.l4\.memory_bw_gbs: must be positive, got -3"),
        ("[targets.l4.price]\non_demand_usd_per_hour = -1\n", r"targets\.l4\.price\.on_demand_usd_per_hour: must be >= 0"),
        ("[targets.l4]\nmemory_bandwidth = 3\n", r"targets\.l4\.memory_bandwidth: unknown key; allowed: name"),
        ("[targets.l4]\nkind = \"gpu\"\n", r"targets\.l4\.kind: must be one of datacenter-gpu"),
        ("[targets.l4.peak_tflops]\nint4 = 9.0\n", r"targets\.l4\.peak_tflops\.int4: unknown key"),
        ("[targets.new]\nname = \"x\"\n", r"targets\.new\.vendor: required key missing"),
        ("[targets.l4.triton]\npreferred_batch_sizes = [0]\n", r"preferred_batch_sizes: must be a non-empty list"),
        ("[[targets.l4.mig_profiles]]\nname = \"1g\"\ncompute_fraction = \"9/7\"\nmemory_gb = 1\nmax_count = 1\n",
         r"mig_profiles\[0\]\.compute_fraction: must be in \(0, 1\]"),
        ("baseline = \"nope\"\n", r"baseline: names unknown target 'nope'"),
        ("target = 1\n", r"target: unknown key"),
    ],
)  # fmt: skip
def test_malformed_user_catalog_names_file_key_and_problem(tmp_path, text, pattern):
    path = write(tmp_path, text)
    with pytest.raises(BadInputError, match=pattern) as info:
        load_catalog(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_new_target_with_price_but_no_source_is_rejected(tmp_path):
    text = '[targets.h100-pcie.price]\nprovider = "aws"\non_demand_usd_per_hour = 4.0\n'
    # merged into a target that had no price: the user price gets the user-file source, so it loads
    assert load_catalog(write(tmp_path, text)).get("h100-pcie").price.source.startswith("user catalog")
    new = '[targets.x]\nname="x"\nvendor="v"\nkind="cpu"\nmemory_gb=1\nmemory_bw_gbs=1\ntoolchain="xla"\n'
    with pytest.raises(BadInputError, match=r"targets\.x\.peak_tflops: required table missing"):
        load_catalog(write(tmp_path, new, "new.toml"))


def test_missing_and_unreadable_catalog_files(tmp_path):
    with pytest.raises(BadInputError, match=r"catalog file not found: .*nope\.toml"):
        load_catalog(tmp_path / "nope.toml")
    with pytest.raises(BadInputError, match="catalog file not found"):
        load_catalog(tmp_path)  # a directory is not a catalog file
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(BadInputError, match=r"cannot read catalog file"):
        load_catalog(binary)


def test_cpu_peaks_are_derived_consistently(catalog):
    # c7i sizes scale linearly with cores; the per-core figure is 64 FP32 FLOP/cycle at 3.2 GHz
    per_core = catalog.get("c7i.large").peak_tflops["fp32"]
    assert math.isclose(per_core, 64 * 3.2e9 / 1e12)
    assert catalog.get("c7i.2xlarge").peak_tflops["fp32"] == pytest.approx(4 * per_core)
    assert (
        catalog.get("cpu-local").price.on_demand_usd_per_hour
        == catalog.get("c7i.large").price.on_demand_usd_per_hour
    )
