"""The typed model of the host probe a runner registers with (``accelbench.hardware.probe.probe_host()``).

The runners page and API read a few parts of every probe (the catalog match, the accelerator, the driver,
the toolchain versions); a probe whose parts have another shape (``{"nvidia": "x"}``, ``packages: ["x"]``)
was stored and took /runners down for everyone (issue 40, MEDIUM 5). The parts read are typed here; the rest
is open (a newer agent may send more), and every number in it is bounded as in a result document.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from accelbench.service.errors import ApiError, validation_message
from accelbench.service.validate import out_of_bounds, unmeasurable


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class Gpu(_Part):
    name: str | None = None


class Nvidia(_Part):
    gpus: list[Gpu] | None = None
    driver_version: str | None = None


class Neuron(_Part):
    present: bool | None = None
    devices: list[Any] | None = None


class Jetson(_Part):
    present: bool | None = None
    model: str | None = None
    l4t: str | None = None


class Cpu(_Part):
    model: str | None = None


class CatalogMatch(_Part):
    id: str | None = None


class HostProbe(_Part):
    cpu: Cpu | None = None
    nvidia: Nvidia | None = None
    neuron: Neuron | None = None
    jetson: Jetson | None = None
    packages: dict[str, str | None] | None = None
    catalog_match: CatalogMatch | None = None
    gpus: list[Gpu] | None = None

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        if (where := out_of_bounds(data)) is not None:
            raise ValueError(unmeasurable(where))
        return data


def check_probe(probe: dict[str, Any]) -> dict[str, Any]:
    """``probe`` as sent, once it fits ``HostProbe``; ApiError 422 naming the field otherwise."""
    try:
        HostProbe.model_validate(probe)
    except ValidationError as err:
        raise ApiError(422, f"probe: {validation_message(err)}") from None
    return probe
