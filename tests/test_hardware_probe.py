"""Host probe: Jetson/Neuron/nvidia-smi parsers on recorded real outputs, NVML reading, and the full probe.

The parsers run on recorded outputs (tests/data/hardware, origins in SOURCES.md), commands are replaced by
`cat <recorded file>`, and NVML by a stand-in module that follows pynvml's API (the real reading code runs
unchanged against it). The probe of this host is checked against what the host has (nvidia-smi or the
driver's files, /etc/nv_tegra_release, neuron-ls), so it holds on a CPU machine and on a GPU one alike.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.hardware import jetson, neuron, nvml
from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.probe import catalog_match, probe_host, run_command

DATA = Path(__file__).parent / "data" / "hardware"
KNOWN_IDS = list(load_catalog().targets)


def read(name: str) -> str:
    return (DATA / name).read_text()


# ---- Jetson ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "l4t", "jetpack", "board"),
    [
        ("nv_tegra_release_r36.4.3.txt", "36.4.3", "6.2", "generic"),
        ("nv_tegra_release_r35.2.1_first_line.txt", "35.2.1", "5.1", "t186ref"),
        ("nv_tegra_release_r35.3.1_first_line.txt", "35.3.1", "5.1.1", "t186ref"),
        ("nv_tegra_release_r32.7.6_nano_first_line.txt", "32.7.6", "4.6.x", "t210ref"),
    ],
)
def test_nv_tegra_release(name, l4t, jetpack, board):
    info = jetson.parse_nv_tegra_release(read(name))
    assert (info["l4t"], info["jetpack"], info["board"]) == (l4t, jetpack, board)
    assert info["eabi"] == "aarch64" and info["gcid"].isdigit()


def test_nv_tegra_release_extra_lines_and_garbage():
    assert jetson.parse_nv_tegra_release(read("nv_tegra_release_r36.4.3.txt"))["kernel_variant"] == "oot"
    with pytest.raises(ValueError, match="not an L4T release line"):
        jetson.parse_nv_tegra_release("TARGET_USERSPACE_LIB_DIR=nvidia\n")
    with pytest.raises(ValueError):
        jetson.parse_nv_tegra_release("")


MODEL_IDS = {
    "NVIDIA Jetson AGX Orin Developer Kit": "jetson-agx-orin-64gb",
    "NVIDIA Jetson Orin NX Engineering Reference Developer Kit": "jetson-orin-nx-16gb",
    "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super": "jetson-orin-nano-8gb",
    "Jetson AGX Orin": "jetson-agx-orin-64gb",
    "NVIDIA Orin Jetson-Small Developer Kit": "jetson-agx-orin-64gb",  # AGX Orin dev kit on JetPack 5.0 pre-DP
}


def test_device_tree_models_map_to_catalog_ids():
    models = read("proc_device_tree_model_strings_orin.txt").splitlines()
    assert len(models) == 5
    for model in models:
        clean = jetson.parse_device_tree_model(model.encode() + b"\x00")  # the real file ends in NUL
        assert jetson.jetson_catalog_id(clean) == MODEL_IDS[clean]
        assert jetson.jetson_catalog_id(clean) in KNOWN_IDS


def test_jetson_memory_disambiguates_and_non_orin_is_unknown():
    assert jetson.jetson_catalog_id("Jetson AGX Orin", memory_gb=61.4) == "jetson-agx-orin-64gb"
    assert jetson.jetson_catalog_id("Jetson AGX Orin", memory_gb=30.6) is None  # the 32 GB module
    assert jetson.jetson_catalog_id("NVIDIA Jetson Orin Nano Developer Kit", memory_gb=3.6) is None
    assert jetson.jetson_catalog_id("NVIDIA Jetson Xavier NX Developer Kit") is None


@pytest.mark.parametrize(
    ("name", "mode"),
    [("nvpmodel_q_maxn.txt", ("MAXN", 0)), ("nvpmodel_q_mode30w.txt", ("MODE_30W", 2)),
     ("nvpmodel_q_verbose_xavier_nx_jp4.txt", ("MODE_15W_6CORE", 2))],
)  # fmt: skip
def test_nvpmodel_query(name, mode):
    info = jetson.parse_nvpmodel_query(read(name))
    assert (info["mode_name"], info["mode_id"]) == mode


def test_nvpmodel_with_warning_first_and_garbage():
    text = "NVPM WARN: fan mode is not set!\n" + read("nvpmodel_q_mode30w.txt")
    assert jetson.parse_nvpmodel_query(text) == {"mode_name": "MODE_30W", "mode_id": 2}
    with pytest.raises(ValueError, match="NV Power Mode"):
        jetson.parse_nvpmodel_query("usage: nvpmodel ...\n")


# ---- Neuron ----------------------------------------------------------------------------------------------


def neuron_ls_json() -> str:
    # the AWS docs elide devices 1-14 with a literal "..." line; real neuron-ls output never has it
    return "\n".join(line for line in read("neuron_ls_json_trn2n_48xlarge_docs_partial.txt").splitlines()
                     if line.strip() != "...")  # fmt: skip


def test_neuron_ls_json():
    devices = neuron.parse_neuron_ls_json(neuron_ls_json())
    assert [d["index"] for d in devices] == [0, 15]
    assert devices[1]["neuroncores"] == 4 and devices[1]["neuroncore_ids"] == [60, 61, 62, 63]
    assert devices[0]["memory_bytes"] == 103079215104 and devices[0]["bdf"] == "cc:00.0"
    assert devices[0]["processes"] == ["neuron-bench exec --run-as-cc-neff --..."]
    assert neuron.neuron_catalog_id(devices) is None  # Trainium2 is not in the catalog


def test_neuron_ls_rejects_the_table_format_and_elided_docs():
    with pytest.raises(ValueError, match="not JSON"):
        neuron.parse_neuron_ls_json(read("neuron_ls_json_trn2n_48xlarge_docs_partial.txt"))
    with pytest.raises(ValueError, match="not a list"):
        neuron.parse_neuron_ls_json('{"neuron_device": 0}')


def test_neuron_catalog_id_by_signature_and_instance_type():
    inf2_chip = {"neuroncores": 2, "memory_bytes": 32 * 1024**3}
    assert neuron.neuron_catalog_id([inf2_chip]) == "inf2-xlarge"
    assert neuron.neuron_catalog_id([inf2_chip] * 12) == "inf2-48xlarge"
    assert neuron.neuron_catalog_id([inf2_chip] * 6) is None  # inf2.24xlarge: not in the catalog
    assert neuron.neuron_catalog_id([inf2_chip], instance_type="inf2.8xlarge") == "inf2-8xlarge"
    assert neuron.neuron_catalog_id([], instance_type="trn1.2xlarge") is None


# ---- NVIDIA names and NVML -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia_smi_L_a100_sxm4_40gb_mig_jasmin.txt", ["NVIDIA A100-SXM4-40GB"] * 2),
        ("nvidia_smi_L_h100_mig_drv590.txt", ["NVIDIA H100 80GB HBM3"]),
        ("nvidia_smi_q_l40s_drv595.txt", ["NVIDIA L40S"]),
        ("nvidia_smi_q_h100_80gb_hbm3_drv590.txt", ["NVIDIA H100 80GB HBM3"]),
        ("nvidia_smi_q_x_a100_sxm4_40gb_mig_drv510.xml", ["NVIDIA A100-SXM4-40GB"]),
    ],
)
def test_gpu_names_from_recorded_nvidia_smi(name, expected):
    assert nvml.gpu_names_from_nvidia_smi(read(name))[: len(expected)] == expected


@pytest.mark.parametrize(
    ("name", "memory_gib", "expected"),
    [
        ("NVIDIA A100-SXM4-40GB", 40, "a100-sxm4-40gb"), ("NVIDIA A100-SXM4-80GB", 80, "a100-sxm4-80gb"),
        ("NVIDIA A100 80GB PCIe", 80, "a100-pcie-80gb"), ("NVIDIA A100-PCIE-40GB", 40, "a100-pcie-40gb"),
        ("NVIDIA H100 80GB HBM3", 80, "h100-sxm"), ("NVIDIA H100 PCIe", 80, "h100-pcie"),
        ("NVIDIA H100 NVL", 94, None), ("NVIDIA H200", 141, "h200-sxm"), ("NVIDIA H200 NVL", 141, None),
        ("NVIDIA L4", 22, "l4"), ("NVIDIA L40S", 45, "l40s"), ("NVIDIA L40", 45, None), ("Tesla T4", 15, "t4"),
        ("NVIDIA A10G", 22, "a10g"), ("Tesla P100-PCIE-16GB", 16, None), (b"NVIDIA L4".decode(), None, "l4"),
    ],
)  # fmt: skip
def test_gpu_catalog_id(name, memory_gib, expected):
    got = nvml.gpu_catalog_id(name, memory_total_bytes=memory_gib * 1024**3 if memory_gib else None)
    assert got == expected
    assert got is None or got in KNOWN_IDS


class FakeNVML:
    """Stands in for pynvml on a host without a GPU: same function names, return types and error classes."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's own name
        pass

    class _Memory:
        def __init__(self, total):
            self.total, self.free, self.used = total, total, 0

    def __init__(self, gpus, init_error=None):
        self.gpus, self.init_error, self.shutdown_called = gpus, init_error, False

    def nvmlInit(self):  # noqa: N802
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):  # noqa: N802
        self.shutdown_called = True

    def nvmlDeviceGetCount(self):  # noqa: N802
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self):  # noqa: N802
        return b"590.48.01"  # older pynvml returns bytes

    def nvmlSystemGetCudaDriverVersion(self):  # noqa: N802
        return 13010

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle):  # noqa: N802
        return handle["name"]

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        if handle["memory"] is None:  # e.g. a MIG parent queried without privileges
            raise self.NVMLError("Insufficient Permissions")
        return self._Memory(handle["memory"])

    def nvmlDeviceGetCudaComputeCapability(self, handle):  # noqa: N802
        return handle["cc"]

    def nvmlDeviceGetMigMode(self, handle):  # noqa: N802
        if handle["mig"] is None:
            raise self.NVMLError_NotSupported("Not Supported")
        return handle["mig"]


H200 = {"name": "NVIDIA H200", "memory": 150754820096, "cc": (9, 0), "mig": [0, 0]}
L4 = {"name": "NVIDIA L4", "memory": 24152899584, "cc": (8, 9), "mig": None}


def test_read_nvml_with_gpus():
    fake = FakeNVML([H200, L4])
    info = nvml.read_nvml(fake)
    assert info["present"] and info["driver_version"] == "590.48.01" and info["cuda_driver_version"] == "13.1"
    h200, l4 = info["gpus"]
    assert (h200["catalog_id"], h200["compute_capability"]) == ("h200-sxm", "9.0")
    assert h200["mig_mode"] == {"supported": True, "current": "disabled", "pending": "disabled"}
    assert (l4["catalog_id"], l4["mig_mode"]) == ("l4", {"supported": False})
    assert fake.shutdown_called
    json.dumps(info)


def test_read_nvml_survives_a_refused_memory_query():
    gpu = nvml.read_nvml(FakeNVML([{**H200, "memory": None, "mig": [1, 1]}]))["gpus"][0]
    assert gpu["memory_total_bytes"] is None and gpu["catalog_id"] == "h200-sxm"
    assert gpu["mig_mode"] == {"supported": True, "current": "enabled", "pending": "enabled"}


def test_read_nvml_without_driver_or_devices():
    assert nvml.read_nvml(FakeNVML([], init_error="Driver Not Loaded")) == {
        "present": False, "reason": "no NVIDIA GPU (NVML init failed: Driver Not Loaded)"}  # fmt: skip
    assert "0 devices" in nvml.read_nvml(FakeNVML([]))["reason"]


# ---- this host, as it really is ----------------------------------------------------------------------------


def host_nvidia_gpus() -> list[str]:
    """The NVIDIA GPUs this host has, read without NVML: ``nvidia-smi -L``, else the kernel driver's files."""
    smi = shutil.which("nvidia-smi")
    if smi:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60, check=False)
        if done.returncode == 0:
            return nvml.gpu_names_from_nvidia_smi(done.stdout)
    names = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        model = re.search(r"^Model:\s*(.+?)\s*$", info.read_text(), re.M)
        names.extend([model[1]] if model else [])
    return names


HOST_GPUS = host_nvidia_gpus()
HAS_PYNVML = importlib.util.find_spec("pynvml") is not None


def assert_nvidia_is_the_host(info: dict) -> None:
    """What NVML reported is what the host has: its GPUs by name, or why it saw none."""
    if not HAS_PYNVML:
        assert info == {"present": False, "reason": "no NVIDIA GPU (nvidia-ml-py/pynvml is not installed)"}
    elif HOST_GPUS:
        assert info["present"] is True, info
        assert [gpu["name"] for gpu in info["gpus"]] == HOST_GPUS
    else:
        assert info["present"] is False and info["reason"].startswith("no NVIDIA GPU ("), info


def test_read_nvml_real_import_path_here():
    assert_nvidia_is_the_host(nvml.read_nvml())


# ---- the whole probe -------------------------------------------------------------------------------------


def test_probe_this_host_as_it_is():
    info = probe_host(known_ids=KNOWN_IDS)
    json.dumps(info)
    assert info["cpu"]["cores_logical"] >= 1 and info["cpu"]["model"]
    assert info["memory_total_bytes"] > 0 and info["python"]["version"].startswith("3.")
    assert info["packages"]["onnxruntime"] and "tensorrt" in info["packages"]
    assert_nvidia_is_the_host(info["nvidia"])
    assert info["gpus"] == info["nvidia"].get("gpus", [])
    assert info["jetson"]["present"] is Path("/etc/nv_tegra_release").is_file()
    if shutil.which("neuron-ls") is None:
        assert info["neuron"] == {
            "present": False,
            "reason": "no Neuron device (neuron-ls not found on PATH)",
        }
    else:
        assert info["neuron"]["present"] is bool(list(Path("/dev").glob("neuron*")))
    seen = info["nvidia"]["present"] or info["jetson"]["present"] or info["neuron"]["present"]
    if not seen:
        assert info["catalog_match"] == {
            "id": "cpu-local",
            "reason": "no accelerator found; this host runs as the CPU target",
        }
    elif info["nvidia"]["present"]:
        first = nvml.gpu_catalog_id(HOST_GPUS[0], info["gpus"][0]["memory_total_bytes"])
        assert info["catalog_match"]["id"] == (first if first in KNOWN_IDS else "cpu-local")


def test_probe_a_recorded_jetson(tmp_path):
    model = tmp_path / "model"
    model.write_bytes(b"NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super\x00")
    info = probe_host(
        tegra_release_path=str(DATA / "nv_tegra_release_r36.4.3.txt"),
        device_tree_model_path=str(model),
        nvpmodel_cmd=("cat", str(DATA / "nvpmodel_q_maxn.txt")),
        neuron_ls_cmd=("accelbench-no-such-neuron-ls",),
        known_ids=KNOWN_IDS,
    )
    assert (
        info["jetson"]["present"] and info["jetson"]["l4t"] == "36.4.3" and info["jetson"]["jetpack"] == "6.2"
    )
    assert info["jetson"]["power_mode"] == {"mode_name": "MAXN", "mode_id": 0}
    # this host has ~25 GB, more than any Nano: the model string decides
    assert info["catalog_match"] == {
        "id": "jetson-orin-nano-8gb",
        "reason": "Jetson: " + info["jetson"]["model"],
    }


def test_probe_a_recorded_neuron_host(tmp_path):
    recorded = tmp_path / "neuron_ls.json"
    recorded.write_text(neuron_ls_json())
    info = probe_host(neuron_ls_cmd=("cat", str(recorded)), known_ids=KNOWN_IDS,
                      tegra_release_path=str(tmp_path / "absent"))  # fmt: skip
    assert info["neuron"]["present"] and len(info["neuron"]["devices"]) == 2
    assert info["catalog_match"]["id"] == "cpu-local"  # trn2 has no catalog entry
    assert "has no catalog entry" in info["catalog_match"]["reason"]


def test_probe_with_an_nvml_gpu():
    info = probe_host(nvml_module=FakeNVML([H200]), known_ids=KNOWN_IDS)
    assert info["catalog_match"] == {"id": "h200-sxm", "reason": "NVIDIA GPU 0: NVIDIA H200"}
    assert info["gpus"][0]["compute_capability"] == "9.0"


def test_failing_commands_become_reasons(tmp_path):
    ok, reason = run_command(("accelbench-no-such-tool", "-q"))
    assert not ok and reason == "accelbench-no-such-tool not found on PATH"
    ok, reason = run_command((sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"))
    assert not ok and reason.endswith("exited 3: boom")
    release = tmp_path / "nv_tegra_release"
    release.write_text("garbage\n")
    info = probe_host(tegra_release_path=str(release), device_tree_model_path=str(tmp_path / "none"),
                      nvpmodel_cmd=("false",), known_ids=KNOWN_IDS)  # fmt: skip
    assert info["jetson"]["present"] and "release_error" in info["jetson"] and info["jetson"]["model"] is None
    assert "exited 1" in info["jetson"]["power_mode"]["error"]


def test_catalog_match_ignores_ids_missing_from_the_catalog():
    nvidia = {"present": True, "gpus": [{"name": "NVIDIA L4", "catalog_id": "l4"}]}
    absent = {"present": False}
    assert catalog_match(nvidia, absent, absent, ["cpu-local"])["id"] == "cpu-local"
    assert catalog_match(nvidia, absent, absent, None)["id"] == "l4"
