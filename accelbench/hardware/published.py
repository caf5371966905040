"""Published inference results per catalog target (``published_results.toml``), loaded with the catalog.

Each point is a throughput someone else measured and published (MLPerf, NVIDIA's Jetson benchmarks, the AWS
Neuron performance tables), with the model, precision, batch, software, source URL and the source's date;
the ``[models.*]`` tables hold the graph cost of each published model per precision, counted by
``bench/published_graph_costs.py``. ``catalog_schema.check_published`` validates the file.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from accelbench.errors import BadInputError
from accelbench.hardware import catalog_schema as schema

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PUBLISHED_NAME = "published_results.toml"


@dataclass(frozen=True)
class PublishedPoint:
    """One published throughput for a catalog target, with where and when it was read (published_results.toml)."""

    target: str
    model: str
    precision: str
    batch: int
    throughput_ips: float
    software: str
    source: str
    date: str
    family: str = "vendor-table"  # mlperf | vendor-table (catalog_schema.PUBLISHED_FAMILIES)
    scenario: str = ""
    engines: str = "gpu"
    fit: bool = True
    note: str = ""


def load_published(
    target_ids: frozenset[str], text: str | None = None, label: str = f"{PUBLISHED_NAME} (packaged)"
) -> tuple[tuple[PublishedPoint, ...], Mapping[str, Mapping[str, Mapping[str, float]]]]:
    """The packaged published results (or ``text``), validated: points and per-precision graph costs."""
    if text is None:  # the packaged file does not change while a process runs: parse it once per target set
        return _packaged(target_ids)
    return _load(target_ids, text, label)


@functools.lru_cache(maxsize=8)
def _packaged(target_ids: frozenset[str]):
    text = resources.files("accelbench.hardware").joinpath(PUBLISHED_NAME).read_text("utf-8")
    return _load(target_ids, text, f"{PUBLISHED_NAME} (packaged)")


def _load(target_ids: frozenset[str], text: str, label: str):
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BadInputError(f"{label}: TOML syntax error: {err}") from None
    schema.check_published(raw, lambda _path: label, target_ids)
    points = tuple(
        PublishedPoint(**{**p, "throughput_ips": float(p["throughput_ips"])}) for p in raw["points"]
    )
    costs = MappingProxyType(
        {
            name: MappingProxyType({prec: MappingProxyType(dict(c)) for prec, c in by_prec.items()})
            for name, by_prec in raw.get("models", {}).items()
        }
    )
    return points, costs
