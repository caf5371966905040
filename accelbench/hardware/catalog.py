"""The hardware catalog: targets as frozen data loaded from TOML, with a source for every figure.

``load_catalog()`` reads the packaged ``catalog.toml`` and overlays a user catalog (``--catalog FILE`` or
``ACCELBENCH_CATALOG``): user entries override or add targets, and a partial entry (only a price, say) is
merged into the packaged one. Roofline and cost code read these dataclasses; they need no per-target branches.
"""

from __future__ import annotations

import copy
import difflib
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelbench.errors import BadInputError
from accelbench.hardware import catalog_schema as schema
from accelbench.hardware.published import PublishedPoint, load_published

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PACKAGED_NAME = "catalog.toml"
BASES = ("on-demand", "spot", "reserved")
HOURS_PER_YEAR = 8760.0  # 365 days: an owned device's purchase is spread over its years of wall time


@dataclass(frozen=True)
class Price:
    """What one instance costs per hour, and how many accelerators it holds."""

    target_id: str
    provider: str
    on_demand_usd_per_hour: float
    source: str
    as_of: str
    instance: str = ""
    region: str = ""
    accelerators_per_instance: int = 1
    spot_usd_per_hour: float | None = None
    spot_usd_per_hour_min: float | None = None
    spot_usd_per_hour_max: float | None = None
    reserved_usd_per_hour: float | None = None
    verification: str = ""
    note: str = ""

    def usd_per_accel_hour(self, basis: str = "on-demand") -> float:
        """Hourly price of one accelerator on ``basis`` (on-demand | spot | reserved)."""
        if basis not in BASES:
            raise BadInputError(f"unknown price basis {basis!r}; use one of {', '.join(BASES)}")
        instance_usd_per_hour = {
            "on-demand": self.on_demand_usd_per_hour,
            "spot": self.spot_usd_per_hour,
            "reserved": self.reserved_usd_per_hour,
        }[basis]
        if instance_usd_per_hour is None:
            raise BadInputError(
                f"target {self.target_id!r} has no {basis} price in the catalog "
                f"({self.provider} {self.instance}); add one with --catalog or use another basis"
            )
        return instance_usd_per_hour / self.accelerators_per_instance


@dataclass(frozen=True)
class Capex:
    """A device bought rather than rented (Jetson): purchase price spread over its useful life."""

    usd: float
    source: str
    as_of: str
    amortization_years: float = 3.0
    power_w: float | None = None
    verification: str = ""
    note: str = ""

    def usd_per_hour(self, electricity_usd_per_kwh: float = 0.0) -> float:
        """Amortized purchase per hour of wall time, plus energy at full power if a tariff is given."""
        return owned_usd_per_hour(
            self.usd, self.power_w or 0.0, self.amortization_years, electricity_usd_per_kwh
        )


def owned_usd_per_hour(
    capex_usd: float, power_w: float, amortization_years: float, usd_per_kwh: float
) -> float:
    """What an owned device costs per hour of wall time: its purchase spread over ``amortization_years`` of
    HOURS_PER_YEAR, plus electricity at ``power_w`` around the clock. The one formula: the catalog's capex view
    (``Capex.usd_per_hour``) and the report's price quote (reports/cost.py) both call it."""
    if amortization_years <= 0:
        raise ValueError("amortization_years must be positive")
    return capex_usd / (amortization_years * HOURS_PER_YEAR) + power_w / 1000.0 * usd_per_kwh


@dataclass(frozen=True)
class TritonDefaults:
    """Starting point for the Triton model config on this target."""

    instance_kind: str
    instance_count: int
    preferred_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    max_batch_size: int = 8
    max_queue_delay_us: float = 100.0


@dataclass(frozen=True)
class MigProfile:
    """One MIG GPU-instance profile: its share of the SMs and its memory."""

    name: str
    compute_fraction: float
    memory_gb: float
    max_count: int


@dataclass(frozen=True)
class HardwareTarget:
    id: str
    name: str
    vendor: str
    kind: str
    memory_gb: float
    memory_bw_gbs: float
    peak_tflops: Mapping[str, float]
    toolchain: str
    triton: TritonDefaults
    tdp_w: float | None = None
    compute_capability: str | None = None
    price: Price | None = None
    capex: Capex | None = None
    mig_profiles: tuple[MigProfile, ...] = ()
    alt_prices: tuple[Price, ...] = ()
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    verification: str = ""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def peak_for(self, precision: str) -> float:
        """Dense peak in TFLOPS (TOPS for int8/fp8) for ``precision``; BadInputError if none is known."""
        if precision not in schema.PRECISIONS:
            raise BadInputError(f"unknown precision {precision!r}; use one of {', '.join(schema.PRECISIONS)}")
        if precision not in self.peak_tflops:
            known = ", ".join(self.peak_tflops) or "none"
            raise BadInputError(f"target {self.id!r} has no {precision} peak in the catalog (known: {known})")
        return self.peak_tflops[precision]

    def usd_per_hour(self, basis: str = "on-demand") -> float:
        """Hourly cost of one accelerator: the rental price, or amortized capex for bought devices."""
        if self.price is not None:
            return self.price.usd_per_accel_hour(basis)
        if self.capex is not None:
            return self.capex.usd_per_hour()
        raise BadInputError(
            f"target {self.id!r} has no price or capex in the catalog; add one with --catalog"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view (mappings become dicts, tuples lists)."""
        # dataclasses.asdict cannot deep-copy MappingProxyType, so convert field by field
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = dict(value)
            elif is_dataclass(value) and not isinstance(value, type):
                value = asdict(value)
            elif isinstance(value, tuple):
                value = [asdict(v) if is_dataclass(v) and not isinstance(v, type) else v for v in value]
            data[f.name] = value
        return data


@dataclass(frozen=True)
class Catalog:
    targets: Mapping[str, HardwareTarget]
    baseline_id: str
    files: tuple[str, ...]
    published: tuple[PublishedPoint, ...] = ()
    # model name -> precision -> graph cost (flops_per_inference, weight_bytes, activation_bytes_per_inference)
    published_costs: Mapping[str, Mapping[str, Mapping[str, float]]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def published_for(self, target_id: str) -> tuple[PublishedPoint, ...]:
        return tuple(p for p in self.published if p.target == target_id)

    def get(self, target_id: str) -> HardwareTarget:
        """The target with this id; BadInputError naming the closest ids when unknown."""
        try:
            return self.targets[target_id]
        except KeyError:
            # ids that start with what was typed first ("a100" → the A100s), then the nearest spellings
            key = target_id.lower()
            prefixed = [tid for tid in self.targets if tid.startswith(key)]
            spelled = difflib.get_close_matches(key, list(self.targets), n=3, cutoff=0.5)
            close = list(dict.fromkeys(prefixed + spelled))[:3]
            hint = f"did you mean {', '.join(close)}?" if close else "`accelbench targets` lists them"
            raise BadInputError(f"unknown target {target_id!r}; {hint}") from None

    @property
    def baseline(self) -> HardwareTarget:
        return self.targets[self.baseline_id]


def load_catalog(user_path: str | os.PathLike | None = None) -> Catalog:
    """The packaged catalog overlaid by ``user_path`` (if given). Malformed input → BadInputError."""
    packaged_label = f"{PACKAGED_NAME} (packaged)"
    packaged_text = resources.files("accelbench.hardware").joinpath(PACKAGED_NAME).read_text("utf-8")
    raw = _parse(packaged_text, packaged_label)
    packaged_ids = frozenset(raw.get("targets", {}))
    user_raw: dict[str, Any] = {}
    user_label = ""
    if user_path is not None:
        user_label = os.fspath(user_path)
        user_raw = _parse(_read_user_file(user_label), user_label)
        _check_user_overlay(user_raw, user_label, packaged=raw)
        raw = _overlay(raw, user_raw, user_label)

    def origin(path: tuple[str, ...]) -> str:
        return user_label if user_label and _has_path(user_raw, path) else packaged_label

    targets_raw = raw.get("targets")
    if not isinstance(targets_raw, dict) or not targets_raw:
        raise schema.fail(origin, ("targets",), "no [targets.<id>] tables found")
    targets = {}
    for target_id, target_raw in targets_raw.items():
        new_in_user = target_id in user_raw.get("targets", {}) and target_id not in packaged_ids

        def target_origin(path, _new=new_in_user):
            return user_label if _new else origin(path)

        schema.check_target(target_raw, target_id, target_origin)
        targets[target_id] = _build_target(target_id, target_raw)
    baseline_id = raw.get("baseline", "a100-sxm4-80gb")
    if baseline_id not in targets:
        raise schema.fail(origin, ("baseline",), f"names unknown target {baseline_id!r}")
    files = (packaged_label, user_label) if user_label else (packaged_label,)
    published, costs = load_published(frozenset(targets))
    return Catalog(
        targets=MappingProxyType(targets),
        baseline_id=baseline_id,
        files=files,
        published=published,
        published_costs=costs,
    )


def _read_user_file(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise BadInputError(f"catalog file not found: {path}")
    try:
        return file.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise BadInputError(f"cannot read catalog file {path}: {err}") from None


def _parse(text: str, label: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BadInputError(f"{label}: TOML syntax error: {err}") from None


def _check_user_overlay(user_raw: dict[str, Any], label: str, packaged: dict[str, Any]) -> None:
    """Type-check what the user wrote before merging, so errors name the user's file."""

    def origin(_path: tuple[str, ...]) -> str:
        return label

    allowed_top = {"schema_version", "as_of", "baseline", "targets"}
    for key in user_raw:
        if key not in allowed_top:
            raise schema.fail(origin, (key,), f"unknown key; allowed: {', '.join(sorted(allowed_top))}")
    targets = user_raw.get("targets", {})
    if not isinstance(targets, dict):
        raise schema.fail(origin, ("targets",), "must be a table of [targets.<id>] tables")
    for target_id, target_raw in targets.items():
        partial = target_id in packaged.get("targets", {})
        schema.check_target(target_raw, target_id, origin, partial=partial)


def _overlay(base: dict[str, Any], user: dict[str, Any], label: str) -> dict[str, Any]:
    """Deep-merge ``user`` over ``base`` (tables merge, arrays and scalars replace).

    A user figure that overrides a packaged one without its own source gets ``user catalog <file>`` as its
    source, so a negotiated price never carries the public price's provenance.
    """
    merged = copy.deepcopy(base)
    if "baseline" in user:
        merged["baseline"] = user["baseline"]
    for target_id, user_target in user.get("targets", {}).items():
        base_target = merged.setdefault("targets", {}).get(target_id)
        if base_target is None:
            merged["targets"][target_id] = copy.deepcopy(user_target)
            continue
        _mark_user_sources(base_target, user_target, label)
        merged["targets"][target_id] = _deep_merge(base_target, user_target)
    return merged


def _mark_user_sources(base_target: dict, user_target: dict, label: str) -> None:
    user_sources = user_target.setdefault("sources", {})
    for key in user_target:
        if key in schema.TARGET_SCALARS or key == "peak_tflops":
            user_sources.setdefault(key, f"user catalog {label}")
    for block in ("price", "capex"):
        if block in user_target and "source" not in user_target[block]:
            user_target[block]["source"] = f"user catalog {label}"
            user_target[block].setdefault("as_of", "user-supplied")
    if not user_sources:
        del user_target["sources"]


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _has_path(raw: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = raw
    for part in path:
        part = part.split("[", 1)[0]
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


_DEFAULT_INSTANCE_KIND = {"cpu": "KIND_CPU", "inferentia": "KIND_MODEL", "tpu": "KIND_MODEL"}


def _build_target(target_id: str, raw: dict[str, Any]) -> HardwareTarget:
    extra_keys = set(schema.TARGET_SCALARS) - {
        "name",
        "vendor",
        "kind",
        "memory_gb",
        "memory_bw_gbs",
        "tdp_w",
        "toolchain",
        "compute_capability",
        "verification",
    }
    triton_raw = dict(raw.get("triton", {}))
    triton_raw.setdefault("instance_kind", _DEFAULT_INSTANCE_KIND.get(raw["kind"], "KIND_GPU"))
    triton_raw.setdefault("instance_count", 1)
    if "preferred_batch_sizes" in triton_raw:
        triton_raw["preferred_batch_sizes"] = tuple(triton_raw["preferred_batch_sizes"])
    return HardwareTarget(
        id=target_id,
        name=raw["name"],
        vendor=raw["vendor"],
        kind=raw["kind"],
        memory_gb=float(raw["memory_gb"]),
        memory_bw_gbs=float(raw["memory_bw_gbs"]),
        peak_tflops=MappingProxyType({k: float(v) for k, v in raw["peak_tflops"].items()}),
        toolchain=raw["toolchain"],
        triton=TritonDefaults(**triton_raw),
        tdp_w=float(raw["tdp_w"]) if "tdp_w" in raw else None,
        compute_capability=raw.get("compute_capability"),
        price=_build_price(target_id, raw["price"]) if "price" in raw else None,
        capex=Capex(**raw["capex"]) if "capex" in raw else None,
        mig_profiles=tuple(
            MigProfile(
                name=m["name"],
                compute_fraction=schema.parse_fraction(m["compute_fraction"]),
                memory_gb=float(m["memory_gb"]),
                max_count=m["max_count"],
            )
            for m in raw.get("mig_profiles", [])
        ),
        alt_prices=tuple(_build_price(target_id, p) for p in raw.get("alt_prices", [])),
        sources=MappingProxyType(dict(raw.get("sources", {}))),
        verification=raw.get("verification", ""),
        extra=MappingProxyType({k: v for k, v in raw.items() if k in extra_keys}),
    )


def _build_price(target_id: str, raw: dict[str, Any]) -> Price:
    price_fields = dict(raw)
    # One spot figure for cost math: the explicit one, else the dearest AZ (a conservative choice; the range
    # stays available in spot_usd_per_hour_min/_max).
    if "spot_usd_per_hour" not in price_fields:
        price_fields["spot_usd_per_hour"] = price_fields.get(
            "spot_usd_per_hour_max", price_fields.get("spot_usd_per_hour_min")
        )
    return Price(target_id=target_id, **price_fields)


@dataclass(frozen=True)
class TargetSummary:
    """The one-line view `accelbench targets` shows of a target: sizes, dense INT8/FP16 peaks, hourly cost."""

    id: str
    name: str
    kind: str
    memory_gb: float
    memory_bw_gbs: float  # GB/s
    int8_tops: float | None
    fp16_tflops: float | None
    usd_per_hour: float | None  # per accelerator, on-demand; an owned device: its capex alone
    cost_basis: str
    cost_as_of: str | None
    cost_source: str | None


def target_summary(target: HardwareTarget) -> TargetSummary:
    """The one-line view `accelbench targets` shows: sizes, dense INT8/FP16 peaks, hourly cost and its date."""
    if target.price is not None:
        usd_per_hour, cost_basis = target.price.usd_per_accel_hour("on-demand"), "on-demand"
        cost_as_of, cost_source = target.price.as_of, target.price.source
    elif target.capex is not None:
        usd_per_hour = target.capex.usd_per_hour()
        cost_basis = f"capex ${target.capex.usd:g} over {target.capex.amortization_years:g} y"
        cost_as_of, cost_source = target.capex.as_of, target.capex.source
    else:
        usd_per_hour, cost_basis, cost_as_of, cost_source = None, "none", None, None
    return TargetSummary(
        id=target.id,
        name=target.name,
        kind=target.kind,
        memory_gb=target.memory_gb,
        memory_bw_gbs=target.memory_bw_gbs,
        int8_tops=target.peak_tflops.get("int8"),
        fp16_tflops=target.peak_tflops.get("fp16"),
        usd_per_hour=usd_per_hour,
        cost_basis=cost_basis,
        cost_as_of=cost_as_of,
        cost_source=cost_source,
    )
