"""The experiment spec: what `accelbench run` measures, projects and reports, loaded from TOML.

Frozen dataclasses validated in ``__post_init__`` (pure: no I/O, no catalog look-up). ``load_spec`` turns a
validation failure into one ``BadInputError`` line naming the file and the key. Checking target ids against
the hardware catalog is a separate step (``check_against_catalog``) because the catalog is data on disk.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.loadtests.knobs import ProfileError, from_table
from accelbench.loadtests.profiles import LoadPlan, LoadProfile, Search, Workload, plan_from_table
from accelbench.models.toolchains.llm_recipes import check_engine

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MODEL_PREFIXES = ("builtin:", "onnx:", "hf:")
PRECISIONS = ("fp32", "fp16", "bf16", "int8", "int4", "fp8")
TARGET_MODES = ("local", "url", "project")
PRICE_BASES = ("on-demand", "spot", "reserved")
# what serves a model on a target: accelbench's Triton python backend, or a generative recipe's engine
# (docs/quantization.md: TensorRT-LLM / Edge-LLM for NVIDIA, vLLM on NxD Inference for Inferentia2)
ENGINES = ("triton-python", "trtllm", "vllm")
DEFAULT_ENGINE = "triton-python"
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")  # vLLM's --kv-cache-dtype choices
DEFAULT_SPEC_RESOURCE = "default_spec.toml"


class SpecError(ValueError):
    """A spec value is wrong; ``key`` is its dotted path in the TOML file (e.g. ``load.levels``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def _one_of(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(key, f"{value!r} is not one of {', '.join(allowed)}")


def _positive(key: str, value: Any, *, allow_zero: bool = False) -> None:
    ok_type = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok_type or value < 0 or (value == 0 and not allow_zero):
        need = "a number >= 0" if allow_zero else "a number > 0"
        raise SpecError(key, f"{value!r} must be {need}")


@dataclass(frozen=True)
class ModelSpec:
    """One model: ``builtin:NAME``, ``onnx:PATH``, ``hf:ID_OR_DIR`` or a model card path, and its precisions."""

    uri: str
    precisions: tuple[str, ...] = ("fp32", "int8")
    engine: str | None = None  # overrides the target's engine for this model
    # engine = "vllm" only (its engine arguments, docs/llm.md "Engines"): the KV cache's dtype, the most
    # sequences in a batch (default: the largest concurrency of [load]) and the context (default: the card's);
    # enforce_eager: no torch.compile (vLLM's CPU build then also skips its warm-up): a faster start, slower steps
    kv_cache_dtype: str | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool = False

    def __post_init__(self) -> None:
        if self.engine is not None:
            _one_of("engine", self.engine, ENGINES)
        if self.kv_cache_dtype is not None:
            _one_of("kv_cache_dtype", self.kv_cache_dtype, KV_CACHE_DTYPES)
        for key in ("max_num_seqs", "max_model_len"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise SpecError(key, f"must be a positive integer (got {value!r})")
        if not isinstance(self.enforce_eager, bool):
            raise SpecError("enforce_eager", f"must be true or false (got {self.enforce_eager!r})")
        if not isinstance(self.uri, str) or not self.uri.strip():
            raise SpecError(
                "uri", "must be a non-empty string (builtin:NAME, onnx:PATH, hf:ID or a card .toml)"
            )
        if ":" in self.uri.split("/")[0] and not self.uri.startswith(MODEL_PREFIXES):
            raise SpecError("uri", f"{self.uri!r}: unknown scheme; use one of {', '.join(MODEL_PREFIXES)}")
        if not self.precisions:
            raise SpecError("precisions", "must list at least one precision")
        for p in self.precisions:
            _one_of("precisions", p, PRECISIONS)
        if len(set(self.precisions)) != len(self.precisions):
            raise SpecError("precisions", f"{list(self.precisions)} lists a precision twice")

    @property
    def name(self) -> str:
        """A short name for progress lines; the model card's name is authoritative once resolved."""
        tail = self.uri.split(":", 1)[-1].rstrip("/")
        return Path(tail).stem if tail.endswith(".toml") else Path(tail).name


@dataclass(frozen=True)
class TargetSpec:
    """A catalog target and how to treat it: measure here, measure a running Triton at ``url``, or project."""

    id: str
    mode: str = "project"
    url: str | None = None
    engine: str | None = None  # None: triton-python

    def __post_init__(self) -> None:
        if self.engine is not None:
            _one_of("engine", self.engine, ENGINES)
        if not isinstance(self.id, str) or not self.id:
            raise SpecError("id", "must be a catalog target id (see `accelbench targets`)")
        _one_of("mode", self.mode, TARGET_MODES)
        if self.mode == "url":
            if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://", "grpc://")):
                raise SpecError("url", f"mode 'url' needs url = \"http://HOST:PORT\" (got {self.url!r})")
        elif self.url is not None:
            raise SpecError("url", f"only mode 'url' takes a url (this target's mode is {self.mode!r})")

    @property
    def measured(self) -> bool:
        return self.mode in ("local", "url")


# a spec's [load] table without these keys (the rest default as on the command line: profiles.LoadProfile)
SPEC_LOAD_DEFAULTS: Mapping[str, Any] = {"kind": "closed", "levels": (1, 2, 4), "duration_s": 5.0}
SPEC_APIS = ("triton", "triton-grpc")  # a spec's variants are served by Triton


def default_load() -> LoadPlan:
    return LoadPlan(LoadProfile(**SPEC_LOAD_DEFAULTS))


@dataclass(frozen=True)
class SloSpec:
    """The latency target: the chosen percentile of request latency must stay within ``latency_ms``;
    generative models: a step's TTFT p99 and TPOT p99 objectives ``ttft_p99_ms`` and ``tpot_p99_ms`` (what
    ``loadtest`` and ``report`` call ``--slo-ttft-p99-ms`` and ``--slo-tpot-p99-ms``); goodput counts the
    requests whose own TTFT and TPOT are within them."""

    latency_ms: float = 100.0
    percentile: float = 99.0
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None

    def __post_init__(self) -> None:
        for key in ("ttft_p99_ms", "tpot_p99_ms"):
            if getattr(self, key) is not None:
                _positive(key, getattr(self, key))
        _positive("latency_ms", self.latency_ms)
        _positive("percentile", self.percentile)
        if not 50 <= self.percentile < 100:
            raise SpecError("percentile", f"{self.percentile!r} must be between 50 and 100 (e.g. 99)")


@dataclass(frozen=True)
class PriceSpec:
    """Which catalog price to use, per-target overrides in USD per hour, and Jetson cost assumptions."""

    basis: str = "on-demand"
    overrides: Mapping[str, float] = field(default_factory=dict)
    amortization_years: float | None = None
    usd_per_kwh: float | None = None

    def __post_init__(self) -> None:
        _one_of("basis", self.basis, PRICE_BASES)
        if not isinstance(self.overrides, Mapping):
            raise SpecError("overrides", "must be a table of target id = USD per hour")
        for target_id, usd in self.overrides.items():
            _positive(f"overrides.{target_id}", usd)
        for key in ("amortization_years", "usd_per_kwh"):
            if getattr(self, key) is not None:
                _positive(key, getattr(self, key))


@dataclass(frozen=True)
class ExperimentSpec:
    """A whole experiment. ``source`` is the file it came from (for messages), or ``<default>``."""

    models: tuple[ModelSpec, ...]
    targets: tuple[TargetSpec, ...]
    baseline: str = "a100-sxm4-80gb"
    load: LoadPlan = field(default_factory=default_load)
    slo: SloSpec = field(default_factory=SloSpec)
    price: PriceSpec = field(default_factory=PriceSpec)
    workload: Workload = field(default_factory=Workload)  # used by generative models only
    search: Search | None = None  # generative models: the SLO-capacity search instead of [load]'s levels
    out: str = "accelbench-results"
    name: str = "experiment"
    source: str = "<spec>"

    def __post_init__(self) -> None:
        if not self.models:
            raise SpecError("models", "list at least one [[models]] entry")
        if not self.targets:
            raise SpecError("targets", "list at least one [[targets]] entry")
        ids = [t.id for t in self.targets]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise SpecError("targets", f"target listed twice: {', '.join(dupes)}")
        if not isinstance(self.baseline, str) or not self.baseline:
            raise SpecError("baseline", "must be a catalog target id, e.g. a100-sxm4-80gb")
        if not isinstance(self.out, str) or not self.out:
            raise SpecError("out", "must be a folder path")

    def engine_for(self, model: ModelSpec, target: TargetSpec) -> str:
        """The serving engine of ``model`` on ``target``: the model's, else the target's, else triton-python."""
        return model.engine or target.engine or DEFAULT_ENGINE

    @property
    def measured_targets(self) -> tuple[TargetSpec, ...]:
        return tuple(t for t in self.targets if t.measured)

    @property
    def projected_targets(self) -> tuple[TargetSpec, ...]:
        return tuple(t for t in self.targets if not t.measured)

    def only_target(self, target_id: str) -> ExperimentSpec:
        """The spec restricted to one target, measured here unless the spec gives it a url.

        This is what a cloud task runs (`accelbench run SPEC --target l4` on an L4 machine): the spec's
        ``project`` mode means "not measured on the host that wrote the spec", so on the target's own host
        it becomes ``local``.
        """
        for target in self.targets:
            if target.id == target_id:
                chosen = target if target.mode == "url" else replace(target, mode="local")
                return replace(self, targets=(chosen,))
        if target_id == self.baseline:  # the baseline is measured on its own host like any target
            return replace(self, targets=(TargetSpec(target_id, "local"),))
        known = ", ".join(t.id for t in self.targets)
        raise BadInputError(f"{self.source}: targets: {target_id!r} is not in this spec (it has: {known})")


_TOP_KEYS = {"name", "out", "baseline", "models", "targets", "load", "slo", "price", "workload", "search"}


def _table(data: Any, key: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(key, "must be a table")
    return data


def _build(cls: type[Any], data: dict[str, Any], key: str, tuples: tuple[str, ...] = ()) -> Any:
    allowed = [f.name for f in fields(cls) if f.name != "source"]
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise SpecError(f"{key}.{unknown[0]}", f"unknown key; allowed: {', '.join(allowed)}")
    kwargs = {k: (tuple(v) if k in tuples and isinstance(v, list) else v) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except SpecError as err:
        raise SpecError(f"{key}.{err.key}", str(err).split(": ", 1)[1]) from None


def _profile_table(key: str, build: Any, data: dict[str, Any]) -> Any:
    """A [load] or [workload] table through the load profile's own definition (loadtests/profiles.py)."""
    try:
        return build(_table(data.get(key), key))
    except ProfileError as err:
        raise SpecError(f"{key}.{err.key}", err.why) from None


def _list_of_tables(data: Any, key: str) -> list[dict[str, Any]]:
    if data is None:
        return []
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise SpecError(key, f"write one [[{key}]] table per entry")
    return data


def spec_from_dict(data: dict[str, Any], source: str = "<spec>") -> ExperimentSpec:
    """Build and validate a spec from parsed TOML; raises ``SpecError`` naming the dotted key."""
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise SpecError(unknown[0], f"unknown key; allowed: {', '.join(sorted(_TOP_KEYS))}")
    models = tuple(
        _build(ModelSpec, m, f"models[{i}]", ("precisions",))
        for i, m in enumerate(_list_of_tables(data.get("models"), "models"))
    )
    targets = tuple(
        _build(TargetSpec, t, f"targets[{i}]")
        for i, t in enumerate(_list_of_tables(data.get("targets"), "targets"))
    )
    load = _profile_table("load", lambda t: plan_from_table(t, SPEC_LOAD_DEFAULTS), data)
    slo = _build(SloSpec, _table(data.get("slo"), "slo"), "slo")
    price = _build(PriceSpec, _table(data.get("price"), "price"), "price")
    _one_of("workload.api", _table(data.get("workload"), "workload").get("api", "triton"), SPEC_APIS)
    workload = _profile_table("workload", lambda t: from_table(Workload, t), data)
    if workload.trace is not None and load.profile.kind != "open":
        raise SpecError(
            "workload.trace",
            'a trace is replayed at its timestamps: [load] kind = "open", levels = '
            "[its own rate, or another to scale it to]",
        )
    search = None
    if "search" in data:  # the SLO-capacity search (docs/llm.md): it plans the load levels itself
        search = _profile_table("search", lambda t: from_table(Search, t), data)
        if slo.ttft_p99_ms is None and slo.tpot_p99_ms is None:
            raise SpecError("search", "needs an objective: [slo] ttft_p99_ms and/or tpot_p99_ms")
        load.profile.searching(search)  # its own checks, now
    top = {k: data[k] for k in ("baseline", "out", "name") if k in data}
    return ExperimentSpec(
        models=models,
        targets=targets,
        load=load,
        slo=slo,
        price=price,
        workload=workload,
        search=search,
        source=source,
        **top,
    )


def parse_spec(text: str, source: str = "<spec>") -> ExperimentSpec:
    """Parse TOML text into a validated spec; every problem is one ``BadInputError`` line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BadInputError(f"{source}: not valid TOML: {err}") from None
    try:
        return spec_from_dict(data, source)
    except SpecError as err:
        raise BadInputError(f"{source}: {err}") from None


def load_spec(path: str | os.PathLike | None) -> ExperimentSpec:
    """Load a spec file, or the embedded default spec when ``path`` is None."""
    if path is None:
        return parse_spec(default_spec_text(), "<default spec>")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInputError(
            f"{path}: spec file not found (write one with `accelbench init {path}`)"
        ) from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as err:
        raise BadInputError(f"{path}: cannot read the spec: {err.__class__.__name__}") from None
    return parse_spec(text, str(path))


def default_spec_text() -> str:
    """The commented default spec shipped with accelbench (what `accelbench init` writes)."""
    return (
        resources.files("accelbench.experiment").joinpath(DEFAULT_SPEC_RESOURCE).read_text(encoding="utf-8")
    )


def write_example_spec(path: str | os.PathLike, *, force: bool = False) -> Path:
    """Write the commented example spec; refuses to overwrite unless ``force``."""
    from accelbench.util import atomic_write_text

    path = Path(path)
    if path.is_dir():
        path = path / "accelbench.toml"
    if path.exists() and not force:
        raise BadInputError(f"{path}: already exists (use --force to overwrite)")
    atomic_write_text(path, default_spec_text())
    return path


def check_against_catalog(spec: ExperimentSpec, catalog: Catalog) -> None:
    """Every target and the baseline must be catalog ids; the catalog's own error names close ids."""
    for i, target in enumerate(spec.targets):
        try:
            catalog.get(target.id)
        except BadInputError as err:
            raise BadInputError(f"{spec.source}: targets[{i}].id: {err}") from None
    try:
        catalog.get(spec.baseline)
    except BadInputError as err:
        raise BadInputError(f"{spec.source}: baseline: {err}") from None
    for i, target in enumerate(spec.targets):
        _check_engines(spec, i, target, catalog.get(target.id))
    for target_id in spec.price.overrides:
        try:
            catalog.get(target_id)
        except BadInputError as err:
            raise BadInputError(f"{spec.source}: price.overrides.{target_id}: {err}") from None


def _check_engines(spec: ExperimentSpec, i: int, target: TargetSpec, hw: HardwareTarget) -> None:
    """Every engine a spec names must run on its target (trtllm on NVIDIA, vllm on Inferentia2)."""
    for model in spec.models:
        engine = spec.engine_for(model, target)
        if engine == DEFAULT_ENGINE:
            continue
        try:
            check_engine(hw, engine)
        except (BadInputError, ToolchainMissingError) as err:
            where = f"models[{spec.models.index(model)}].engine" if model.engine else f"targets[{i}].engine"
            raise BadInputError(f"{spec.source}: {where}: {err}") from None
