"""`accelbench validate`: does this variant run correctly, fast enough and within memory on this Jetson?

Checks, each PASS/FAIL/INFO with its reason: the host is the target Jetson (nv_tegra_release, device-tree
model, RAM size), the L4T/TensorRT versions match what the variant was built for, the engine loads, outputs
match the FP32 reference within the card's tolerance, p99 at batch 1 is within the budget, memory fits the
module with headroom, the power mode is recorded, and tegrastats power during the load gives joules per
inference. On a host without TensorRT the ONNX model runs on onnxruntime CPU as a stand-in, and the verdict
says so; recorded files (--tegrastats, --nv-tegra-release, --nvpmodel ...) replace the live device reads.
"""

from __future__ import annotations

import os
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError
from accelbench.experiment import jetson_host as host
from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.tegrastats import joules_per_inference, summarize
from accelbench.util import atomic_write_text, utc_now_iso

STANDIN_NOTE = "engine check: onnxruntime CPU stand-in for TensorRT; not a Jetson measurement"
MEMORY_HEADROOM = 0.10  # keep 10 % of unified memory free for the OS, Triton and TensorRT workspace


@dataclass(frozen=True)
class JetsonInputs:
    """Recorded device outputs to use instead of reading this host (None: read the live device)."""

    nv_tegra_release: str | None = None
    device_model: str | None = None
    nvpmodel: str | None = None
    jetson_clocks: str | None = None
    tegrastats: str | None = None


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASS | FAIL | INFO
    message: str


@dataclass
class Verdict:
    variant: str
    target: str
    checks: list[Check] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    created_at: str = field(default_factory=utc_now_iso)

    @property
    def passed(self) -> bool:
        return not self.reasons

    @property
    def reasons(self) -> list[str]:
        return [f"{c.name}: {c.message}" for c in self.checks if c.status == "FAIL"]

    def add(self, name: str, ok: bool | None, message: str) -> None:
        self.checks.append(Check(name, "INFO" if ok is None else ("PASS" if ok else "FAIL"), message))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "accelbench.validation/1",
            "verdict": "PASS" if self.passed else "FAIL",
            "variant": self.variant,
            "target": self.target,
            "reasons": self.reasons,
            "checks": [c.__dict__ for c in self.checks],
            "measurements": self.measurements,
            "notes": self.notes,
            "created_at": self.created_at,
        }


def render_text(verdict: Verdict) -> str:
    lines = [f"{verdict.variant} on {verdict.target}: {'PASS' if verdict.passed else 'FAIL'}"]
    lines += [f"  {c.status:4}  {c.name}: {c.message}" for c in verdict.checks]
    lines += [f"  note: {n}" for n in verdict.notes]
    return "\n".join(lines)


def write_junit(verdict: Verdict, path: str | os.PathLike) -> None:
    """One <testcase> per check; FAIL becomes <failure>, INFO is recorded in <system-out>."""
    failures = sum(1 for c in verdict.checks if c.status == "FAIL")
    suite = ET.Element(
        "testsuite",
        name=f"accelbench.validate.{verdict.target}",
        tests=str(len(verdict.checks)),
        failures=str(failures),
        errors="0",
        timestamp=verdict.created_at,
    )
    for check in verdict.checks:
        case = ET.SubElement(suite, "testcase", classname=verdict.variant, name=check.name)
        if check.status == "FAIL":
            ET.SubElement(case, "failure", message=check.message).text = check.message
        else:
            ET.SubElement(case, "system-out").text = f"{check.status}: {check.message}"
    if verdict.notes:
        ET.SubElement(suite, "system-out").text = "\n".join(verdict.notes)
    ET.indent(suite)
    atomic_write_text(path, ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")


def validate_variant(
    variant_dir: str | os.PathLike,
    target_id: str,
    *,
    inputs: JetsonInputs | None = None,
    latency_budget_ms: float | None = None,
    request_count: int = 200,
    catalog_path: str | None = None,
) -> Verdict:
    """Run every check and return the verdict (never raises for a failed check; raises for bad input)."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.models.manifest import read_manifest

    target = load_catalog(catalog_path).get(target_id)
    if target.kind != "edge-gpu":
        raise BadInputError(
            f"--target {target_id}: validate is for Jetson targets (kind edge-gpu), not {target.kind}"
        )
    if request_count < 10:
        raise BadInputError(f"--requests {request_count}: need at least 10 to estimate a p99")
    manifest = read_manifest(variant_dir)
    verdict = Verdict(variant=manifest.name, target=target_id)
    facts = host.read_facts(inputs or JetsonInputs())
    _check_host(verdict, facts, target, manifest)
    _check_versions(verdict, facts, manifest)
    sampler = host.TegrastatsSampler(facts.recorded_tegrastats)
    with sampler:
        run = _run_variant(verdict, Path(variant_dir), manifest, request_count)
    if run is not None:
        _check_accuracy(verdict, manifest, run)
        _check_latency(verdict, run, latency_budget_ms)
    _check_memory(verdict, sampler.samples, sampler.recorded, target, manifest, Path(variant_dir))
    _record_power(verdict, facts, sampler, run)
    return verdict


def _check_host(
    verdict: Verdict, facts: host.HostFacts, target: HardwareTarget, manifest: VariantManifest
) -> None:
    if facts.l4t is None:
        verdict.add(
            "host",
            False,
            "not a Jetson: no /etc/nv_tegra_release (pass --nv-tegra-release to use a recorded one)",
        )
        return
    family = host.target_family(target.id)
    model = facts.device_model or "unknown module"
    if family and facts.device_model and family.lower() not in facts.device_model.lower():
        verdict.add("host", False, f"this host is '{model}', not a Jetson {family} ({target.id})")
    else:
        verdict.add(
            "host",
            True,
            f"{model}, L4T {facts.l4t}" + (f" (JetPack {facts.jetpack})" if facts.jetpack else ""),
        )
    if manifest.target != target.id:
        verdict.add("variant target", False, f"variant was made for {manifest.target}, not {target.id}")


def _check_versions(verdict: Verdict, facts: host.HostFacts, manifest: VariantManifest) -> None:
    wanted = host.required_versions(manifest)
    if not wanted:
        verdict.add(
            "versions", None, "the manifest records no L4T/JetPack/TensorRT requirement; not compared"
        )
        return
    problems, matched = [], []
    for key, need in sorted(wanted.items(), key=lambda kv: ("l4t", "jetpack", "tensorrt").index(kv[0])):
        have = {"l4t": facts.l4t, "jetpack": facts.jetpack, "tensorrt": facts.tensorrt}.get(key)
        if have is None and key == "tensorrt":
            verdict.notes.append(f"TensorRT not importable here; variant wants TensorRT {need}")
            continue
        if have is None or not host.version_matches(have, need):
            problems.append(f"{key} {have or 'unknown'} on this host, variant built for {need}")
        else:
            matched.append(f"{key} {have}")
    if problems:
        verdict.add("versions", False, "; ".join(problems))
    else:
        verdict.add("versions", True, ", ".join(matched) or "nothing comparable")


@dataclass
class _Run:
    outputs: list[dict[str, np.ndarray]]
    reference: list[dict[str, np.ndarray]]
    latencies_s: list[float]
    wall_s: float
    inferences: int


def _run_variant(verdict: Verdict, vdir: Path, manifest: VariantManifest, request_count: int) -> _Run | None:
    """Load the engine (TensorRT on a Jetson; onnxruntime CPU stand-in elsewhere) and time batch-1 requests."""
    ref_in, ref_out = vdir / "reference" / "inputs.npz", vdir / "reference" / "outputs.npz"
    if not (ref_in.is_file() and ref_out.is_file()):
        verdict.add("reference", False, f"{vdir}/reference/inputs.npz and outputs.npz are missing")
        return None
    session, how = host.load_engine(vdir, manifest)
    if session is None:
        verdict.add("engine load", False, how)
        return None
    verdict.add("engine load", True, how)
    if how.startswith("onnxruntime"):
        verdict.notes.append(STANDIN_NOTE)
    feeds, reference = host.reference_rows(vdir)
    outputs = [session(feed) for feed in feeds]  # also warms the engine up
    latencies, started = [], time.perf_counter()
    for i in range(request_count):
        t0 = time.perf_counter()
        session(feeds[i % len(feeds)])
        latencies.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    return _Run(outputs, reference, latencies, wall, request_count)


def _check_accuracy(verdict: Verdict, manifest: VariantManifest, run: _Run) -> None:
    accuracy = manifest.card.get("accuracy") or {}
    metric, tolerance = accuracy.get("metric", "max_abs"), float(accuracy.get("tolerance", 1e-3))
    name = accuracy.get("output") or manifest.outputs[0].name
    value = host.metric_value(metric, [o[name] for o in run.outputs], [r[name] for r in run.reference])
    ok = value <= tolerance if metric == "max_abs" else value >= tolerance
    verdict.measurements["accuracy"] = {
        "metric": metric,
        "value": value,
        "tolerance": tolerance,
        "output": name,
    }
    relation = "<=" if metric == "max_abs" else ">="
    word = "within" if ok else "outside"
    verdict.add(
        "outputs",
        ok,
        f"{metric} {value:.6g} vs FP32 reference on '{name}' ({word} {relation} {tolerance:g}, {len(run.outputs)} samples)",
    )


def _check_latency(verdict: Verdict, run: _Run, budget_ms: float | None) -> None:
    lat_us = np.asarray(run.latencies_s) * 1e6
    p50, p99 = float(np.percentile(lat_us, 50)), float(np.percentile(lat_us, 99))
    verdict.measurements["latency_us"] = {
        "p50": round(p50, 1),
        "p99": round(p99, 1),
        "requests": len(lat_us),
        "batch_size": 1,
    }
    text = f"p99 {p99 / 1000:.3f} ms, p50 {p50 / 1000:.3f} ms at batch 1 over {len(lat_us)} requests"
    if budget_ms is None:
        verdict.add("latency", None, text + " (no --latency-budget-ms given)")
    else:
        ok = p99 <= budget_ms * 1000
        verdict.add("latency", ok, f"{text} ({'within' if ok else 'over'} budget {budget_ms:g} ms)")


def _check_memory(
    verdict: Verdict,
    samples: list,
    recorded: bool,
    target: HardwareTarget,
    manifest: VariantManifest,
    vdir: Path,
) -> None:
    summary = summarize(samples)
    if summary.ram_total_mb is None or summary.peak_ram_used_mb is None:
        verdict.add(
            "memory", False, "no tegrastats RAM reading (tegrastats not found; pass --tegrastats FILE)"
        )
        return
    module_mb = float(target.memory_gb) * 1024
    # a module's usable RAM is a few % below its marketed size (carve-outs); 20 % off means another module
    if abs(summary.ram_total_mb - module_mb) > 0.2 * module_mb:
        verdict.add(
            "memory",
            False,
            f"host has {summary.ram_total_mb:.0f} MB RAM, {target.id} has {target.memory_gb:g} GB: wrong module",
        )
        return
    model_file = vdir / manifest.model_file
    model_mb = model_file.stat().st_size / 2**20 if model_file.exists() else 0.0
    # a recorded log was not taken with this model loaded: add its weights; a live one already includes them
    added_mb = model_mb if recorded else 0.0
    need_mb = summary.peak_ram_used_mb + added_mb
    limit_mb = summary.ram_total_mb * (1 - MEMORY_HEADROOM)
    verdict.measurements["memory_mb"] = {
        "peak_used": summary.peak_ram_used_mb,
        "total": summary.ram_total_mb,
        "model_file": round(model_mb, 1),
    }
    ok = need_mb <= limit_mb
    during = f" + model {added_mb:.0f} MB (recorded log)" if recorded else " during the load"
    verdict.add(
        "memory",
        ok,
        f"peak RAM {summary.peak_ram_used_mb:.0f} MB{during} of {summary.ram_total_mb:.0f} MB "
        f"unified memory ({'within' if ok else 'over'} the {100 * (1 - MEMORY_HEADROOM):.0f} % limit)",
    )


def _record_power(
    verdict: Verdict, facts: host.HostFacts, sampler: host.TegrastatsSampler, run: _Run | None
) -> None:
    mode = facts.power_mode
    verdict.measurements["power_mode"] = {"nvpmodel": mode, "jetson_clocks": facts.clocks}
    verdict.add(
        "power mode",
        None,
        f"nvpmodel {mode['name']} (id {mode['id']})"
        if mode
        else "nvpmodel not available; power mode unknown",
    )
    summary = summarize(sampler.samples)
    if summary.mean_power_mw is None or run is None:
        verdict.add("energy", None, "no tegrastats power during the load; joules per inference not measured")
        return
    joules = joules_per_inference(summary.mean_power_mw, run.wall_s, run.inferences)
    where = (
        "recorded tegrastats file, not sampled during this load"
        if sampler.recorded
        else f"{summary.samples} tegrastats samples during the load"
    )
    verdict.measurements["energy"] = {
        "mean_power_mw": summary.mean_power_mw,
        "power_source": summary.power_source,
        "joules_per_inference": joules,
        "source": where,
    }
    verdict.add(
        "energy",
        None,
        f"{joules:.4g} J/inference at {summary.mean_power_mw / 1000:.2f} W ({summary.power_source}; {where})",
    )
