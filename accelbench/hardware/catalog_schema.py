"""Validation of the raw (parsed TOML) hardware catalog, kept apart from the dataclasses it feeds.

Every error is a BadInputError that names the file, the key path (``targets.l4.price.source``) and what is
wrong, so a user editing a catalog can fix it without reading this code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from accelbench.errors import BadInputError

KINDS = ("datacenter-gpu", "edge-gpu", "inferentia", "tpu", "cpu")
TOOLCHAINS = ("tensorrt", "neuron", "onnxruntime-cpu", "xla")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")  # fp4: NVFP4 (Blackwell)
# bytes of one dense element stored at a precision (fp4 has no whole byte: llm_memory.WEIGHT_FORMATS counts it
# with its block scales); the graph cost, the weight formats and the KV cache dtypes all read it
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
INSTANCE_KINDS = ("KIND_GPU", "KIND_CPU", "KIND_MODEL")

# key -> (type tag, required). Type tags: "str", "num" (int or float, >= 0), "pos" (> 0), "int" (>= 1), "bool".
TARGET_SCALARS: dict[str, tuple[str, bool]] = {
    "name": ("str", True),
    "vendor": ("str", True),
    "kind": ("str", True),
    "memory_gb": ("pos", True),
    "memory_bw_gbs": ("pos", True),
    "tdp_w": ("pos", False),
    "toolchain": ("str", True),
    "compute_capability": ("str", False),
    "interconnect": ("str", False),
    # one accelerator's link to the others of its instance, GB/s each way: TP all-reduces (llm_roofline)
    "interconnect_gbs": ("pos", False),
    "verification": ("str", False),
    "note": ("str", False),
    "marketed_tops_sparse_int8": ("num", False),
    "neuroncores": ("int", False),
    "chips": ("int", False),
    "vcpus": ("int", False),
    "peak_is_upper_bound": ("bool", False),
    # the fraction of the datasheet peak the card sustains under a long tensor-core load where its power limit
    # holds the clocks below the boost the peak is quoted at (sourced per SKU; the generative roofline uses it)
    "sustained_compute_fraction": ("pos", False),
}
TARGET_TABLES = ("peak_tflops", "price", "alt_prices", "capex", "mig_profiles", "triton", "sources")

PRICE_KEYS: dict[str, tuple[str, bool]] = {
    "provider": ("str", True),
    "instance": ("str", False),
    "region": ("str", False),
    "accelerators_per_instance": ("int", False),
    "on_demand_usd_per_hour": ("num", True),
    "spot_usd_per_hour": ("num", False),
    "spot_usd_per_hour_min": ("num", False),
    "spot_usd_per_hour_max": ("num", False),
    "reserved_usd_per_hour": ("num", False),
    "source": ("str", True),
    "as_of": ("str", True),
    "verification": ("str", False),
    "note": ("str", False),
}
CAPEX_KEYS: dict[str, tuple[str, bool]] = {
    "usd": ("num", True),
    "amortization_years": ("pos", False),
    "power_w": ("num", False),
    "source": ("str", True),
    "as_of": ("str", True),
    "verification": ("str", False),
    "note": ("str", False),
}
TRITON_KEYS: dict[str, tuple[str, bool]] = {
    "instance_kind": ("str", True),
    "instance_count": ("int", True),
    "max_batch_size": ("int", False),
    "preferred_batch_sizes": ("list[int]", False),
    "max_queue_delay_us": ("num", False),
}
MIG_KEYS: dict[str, tuple[str, bool]] = {
    "name": ("str", True),
    "compute_fraction": ("fraction", True),
    "memory_gb": ("pos", True),
    "max_count": ("int", True),
}

Origin = Callable[[tuple[str, ...]], str]


def fail(origin: Origin, path: tuple[str, ...], what: str) -> BadInputError:
    return BadInputError(f"{origin(path)}: {'.'.join(path)}: {what}")


def parse_fraction(value: Any) -> float:
    """``"3/7"`` or a number in [0, 1] → float; ValueError otherwise."""
    if isinstance(value, str):
        frac = float(Fraction(value.strip()))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        frac = float(value)
    else:
        raise ValueError('must be a number or a fraction string like "3/7"')
    if not 0 < frac <= 1:
        raise ValueError(f"must be in (0, 1], got {value!r}")
    return frac


def _check_value(tag: str, value: Any) -> str | None:
    """Return what is wrong with ``value`` for type ``tag``, or None."""
    is_num = isinstance(value, (int, float)) and not isinstance(value, bool)
    if tag == "str":
        return None if isinstance(value, str) else f"must be a string, got {type(value).__name__}"
    if tag == "bool":
        return None if isinstance(value, bool) else f"must be true or false, got {value!r}"
    if tag in ("num", "pos"):
        if not is_num:
            return f"must be a number, got {type(value).__name__} {value!r}"
        if value < 0 or (tag == "pos" and value == 0):
            return f"must be {'positive' if tag == 'pos' else '>= 0'}, got {value!r}"
        return None
    if tag == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be an integer, got {type(value).__name__} {value!r}"
        return None if value >= 1 else f"must be >= 1, got {value!r}"
    if tag == "list[int]":
        ok = isinstance(value, list) and value and all(_check_value("int", v) is None for v in value)
        return None if ok else f"must be a non-empty list of positive integers, got {value!r}"
    if tag == "fraction":
        try:
            parse_fraction(value)
        except (ValueError, ZeroDivisionError) as err:
            return str(err)
        return None
    raise AssertionError(tag)  # pragma: no cover - programming error


def check_table(
    table: Any, spec: Mapping[str, tuple[str, bool]], path: tuple[str, ...], origin: Origin, partial: bool
) -> None:
    """Check one TOML table against ``spec``; ``partial`` skips the required-key check (user overlays)."""
    if not isinstance(table, dict):
        raise fail(origin, path, f"must be a table, got {type(table).__name__}")
    for key, value in table.items():
        if key not in spec:
            raise fail(origin, (*path, key), f"unknown key; allowed: {', '.join(spec)}")
        problem = _check_value(spec[key][0], value)
        if problem:
            raise fail(origin, (*path, key), problem)
    if not partial:
        for key, (_, required) in spec.items():
            if required and key not in table:
                raise fail(origin, (*path, key), "required key missing")


def _check_array_of_tables(value: Any, spec, path, origin, partial) -> None:
    if not isinstance(value, list):
        raise fail(origin, path, f"must be an array of tables ([[...]]), got {type(value).__name__}")
    for index, item in enumerate(value):
        check_table(item, spec, (*path[:-1], f"{path[-1]}[{index}]"), origin, partial)


def check_target(raw: Any, target_id: str, origin: Origin, partial: bool = False) -> None:
    """Validate one raw target table (``partial`` for a user overlay that is merged later)."""
    path = ("targets", target_id)
    if not isinstance(raw, dict):
        raise fail(origin, path, f"must be a table, got {type(raw).__name__}")
    scalars = {k: v for k, v in raw.items() if k not in TARGET_TABLES}
    check_table(scalars, TARGET_SCALARS, path, origin, partial)
    for key, allowed in (("kind", KINDS), ("toolchain", TOOLCHAINS)):
        if key in raw and raw[key] not in allowed:
            raise fail(origin, (*path, key), f"must be one of {', '.join(allowed)}, got {raw[key]!r}")
    _check_peaks(raw.get("peak_tflops"), (*path, "peak_tflops"), origin, partial)
    for key, spec in (("price", PRICE_KEYS), ("capex", CAPEX_KEYS), ("triton", TRITON_KEYS)):
        if key in raw:
            check_table(raw[key], spec, (*path, key), origin, partial)
    if "triton" in raw and raw["triton"].get("instance_kind", "KIND_GPU") not in INSTANCE_KINDS:
        raise fail(origin, (*path, "triton", "instance_kind"), f"must be one of {', '.join(INSTANCE_KINDS)}")
    if "alt_prices" in raw:
        _check_array_of_tables(raw["alt_prices"], PRICE_KEYS, (*path, "alt_prices"), origin, partial)
    if "mig_profiles" in raw:
        _check_array_of_tables(raw["mig_profiles"], MIG_KEYS, (*path, "mig_profiles"), origin, partial)
    sources = raw.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise fail(origin, (*path, "sources"), 'must be a table of figure = "source text"')


def _check_peaks(peaks: Any, path: tuple[str, ...], origin: Origin, partial: bool) -> None:
    if peaks is None:
        if not partial:
            raise fail(origin, path, "required table missing (dense peaks per precision)")
        return
    spec = {p: ("pos", False) for p in PRECISIONS}
    check_table(peaks, spec, path, origin, partial=True)
    if not partial and not peaks:
        raise fail(origin, path, f"needs at least one of {', '.join(PRECISIONS)}")


# published_results.toml: one [[points]] table per published throughput, [models.<name>.<precision>] graph costs
PUBLISHED_POINT_KEYS: dict[str, tuple[str, bool]] = {
    "target": ("str", True),
    "model": ("str", True),
    "precision": ("str", True),
    "batch": ("int", True),
    "throughput_ips": ("pos", True),
    "software": ("str", True),
    "source": ("str", True),
    "date": ("str", True),
    "family": ("str", True),
    "scenario": ("str", False),
    "engines": ("str", False),
    "fit": ("bool", False),
    "note": ("str", False),
}
# Where a published figure comes from: a benchmark consortium's audited submission, or a vendor's own table
# (NVIDIA's TensorRT READMEs, AWS's Neuron performance pages). bench/projection_check.py fits on one family and
# predicts the other (docs/projections.md).
PUBLISHED_FAMILIES = ("mlperf", "vendor-table")
MODEL_COST_KEYS: dict[str, tuple[str, bool]] = {
    "params": ("int", False),
    "flops_per_inference": ("num", True),
    "weight_bytes": ("num", True),
    "activation_bytes_per_inference": ("num", True),
    "ops": ("int", False),  # graph_cost's op count and depth: they place a user's graph's fixed term
    "depth": ("int", False),
}
_DATE_LEN = 10  # YYYY-MM-DD


def check_published(raw: Any, origin: Origin, target_ids: set[str] | frozenset[str]) -> None:
    """Validate published_results.toml: every point sourced and dated, its target and model known."""
    if not isinstance(raw, dict):
        raise fail(origin, (), "must be a TOML document")
    models = raw.get("models", {})
    if not isinstance(models, dict):
        raise fail(origin, ("models",), "must be a table of [models.<name>.<precision>] tables")
    for name, by_precision in models.items():
        if not isinstance(by_precision, dict) or not by_precision:
            raise fail(origin, ("models", name), "must hold one table per precision")
        for precision, cost in by_precision.items():
            if precision not in PRECISIONS:
                raise fail(
                    origin, ("models", name, precision), f"unknown precision; use {', '.join(PRECISIONS)}"
                )
            check_table(cost, MODEL_COST_KEYS, ("models", name, precision), origin, partial=False)
    points = raw.get("points", [])
    _check_array_of_tables(points, PUBLISHED_POINT_KEYS, ("points",), origin, partial=False)
    for index, point in enumerate(points):
        path = (f"points[{index}]",)
        if point["target"] not in target_ids:
            raise fail(origin, (*path, "target"), f"names unknown target {point['target']!r}")
        if point["precision"] not in models.get(point["model"], {}):
            raise fail(
                origin, (*path, "model"), f"no [models.{point['model']!r}.{point['precision']}] graph cost"
            )
        if point["family"] not in PUBLISHED_FAMILIES:
            raise fail(origin, (*path, "family"), f"must be one of {', '.join(PUBLISHED_FAMILIES)}")
        if not point["source"].strip() or "://" not in point["source"]:
            raise fail(origin, (*path, "source"), "must be the URL the figure was read from")
        date = point["date"]
        if len(date) < 7 or not date[:4].isdigit() or date[4] != "-" or len(date) > _DATE_LEN:
            raise fail(origin, (*path, "date"), f"must be the source's date as YYYY-MM[-DD], got {date!r}")
