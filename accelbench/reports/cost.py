"""Cost arithmetic: hourly price per accelerator, Jetson ownership cost, cost per million requests, energy.

Pure: numbers and catalog objects in, numbers and a labelled quote out. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import (
    BASES,
    HOURS_PER_YEAR,
    Capex,
    HardwareTarget,
    Price,
    owned_usd_per_hour,
)

HOURS_PER_MONTH = HOURS_PER_YEAR / 12  # 730, the usual cloud-billing month
# Assumptions for devices that are bought, not rented (stated in every report that uses them).
DEFAULT_AMORTIZATION_YEARS = 3.0
DEFAULT_USD_PER_KWH = 0.15
PRICE_BASES = BASES  # the catalog's price bases: on-demand, spot, reserved


def cost_per_million_usd(usd_per_hour: float, capacity_rps: float) -> float:
    """usd_per_hour ÷ (capacity_rps × 3600) × 10⁶: what a million requests cost at full capacity."""
    if capacity_rps <= 0:
        raise ValueError("capacity_rps must be positive")
    if usd_per_hour < 0:
        raise ValueError("usd_per_hour must not be negative")
    return usd_per_hour / (capacity_rps * 3600.0) * 1e6


def accelerator_share_usd_per_hour(instance_usd_per_hour: float, accelerators_per_instance: int) -> float:
    """A multi-accelerator instance priced per accelerator: one model replica uses one accelerator."""
    if accelerators_per_instance < 1:
        raise ValueError("accelerators_per_instance must be at least 1")
    return instance_usd_per_hour / accelerators_per_instance


def energy_per_request_j(power_w: float | None, throughput_rps: float | None) -> float | None:
    """Joules per request from mean power during a step; None when power was not measured."""
    if power_w is None or not throughput_rps:
        return None
    return power_w / throughput_rps


def replicas_needed(target_qps: float, capacity_rps: float, headroom: float = 0.3) -> int:
    """Replicas so that each runs at most at (1 − headroom) of its capacity at SLO."""
    if not 0 <= headroom < 1:
        raise ValueError("headroom must be in [0, 1)")
    if capacity_rps <= 0:
        raise ValueError("capacity_rps must be positive")
    return max(1, math.ceil(target_qps / (capacity_rps * (1.0 - headroom)) - 1e-9))


def monthly_usd(usd_per_hour: float, replicas: int) -> float:
    return usd_per_hour * replicas * HOURS_PER_MONTH


@dataclass(frozen=True)
class PriceQuote:
    """An hourly price for one accelerator of a target, and where it came from."""

    usd_per_hour: float
    basis: str  # on-demand | spot | reserved | override | owned (capex+power)
    source: str
    as_of: str
    note: str  # e.g. "per accelerator: 1/8 of p4d.24xlarge"; assumptions for owned devices


def parse_price_overrides(values: tuple[str, ...] | list[str]) -> dict[str, float]:
    """``["cpu-local=0.10", ...]`` → ``{"cpu-local": 0.10}``; one clear error for a bad item."""
    out: dict[str, float] = {}
    for item in values:
        target_id, sep, usd = item.partition("=")
        try:
            price = float(usd)
        except ValueError:
            price = -1.0
        if not sep or not target_id or not math.isfinite(price) or price < 0:
            raise BadInputError(f"--price {item!r}: expected TARGET_ID=USD_PER_HOUR, e.g. cpu-local=0.05")
        out[target_id.strip()] = price
    return out


def quote_price(
    target: HardwareTarget,
    basis: str = "on-demand",
    overrides: Mapping[str, float] | None = None,
    amortization_years: float | None = None,
    usd_per_kwh: float = DEFAULT_USD_PER_KWH,
) -> PriceQuote | None:
    """The hourly price of one accelerator of a catalog target; None when the catalog has no price."""
    if basis not in PRICE_BASES:
        raise BadInputError(f"price basis {basis!r} is unknown; use one of {', '.join(PRICE_BASES)}")
    if overrides and target.id in overrides:
        return PriceQuote(
            overrides[target.id], "override", "--price on the command line", "", "user override"
        )
    price = target.price
    if price is not None:
        usd, used_basis = _accel_price(price, basis), basis
        if usd is None and basis != "on-demand":  # not every provider sells spot/reserved
            usd, used_basis = _accel_price(price, "on-demand"), "on-demand"
        if usd is not None:
            n = int(price.accelerators_per_instance or 1)
            note = f"per accelerator: 1/{n} of {price.instance}" if n > 1 else f"{price.instance}"
            if used_basis != basis:
                note += f"; no {basis} price in the catalog, on-demand used"
            return PriceQuote(float(usd), used_basis, price.source, str(price.as_of), note)
    if target.capex is not None:
        return _owned_quote(target, target.capex, amortization_years, usd_per_kwh)
    return None


def _accel_price(price: Price, basis: str) -> float | None:
    try:
        return price.usd_per_accel_hour(basis)
    except BadInputError:  # the catalog has no price on this basis
        return None


def _owned_quote(target: HardwareTarget, capex: Capex, years: float | None, usd_per_kwh: float) -> PriceQuote:
    # --amortization-years beats the catalog's figure, which beats the stated default
    years = float(years or capex.amortization_years or DEFAULT_AMORTIZATION_YEARS)
    power_w = capex.power_w if capex.power_w is not None else (target.tdp_w or 0.0)
    usd = owned_usd_per_hour(float(capex.usd), float(power_w), years, usd_per_kwh)
    note = (
        f"owned: ${float(capex.usd):,.0f} over {years:g} years + {float(power_w):g} W at ${usd_per_kwh:g}/kWh "
        "(amortization period and electricity rate are assumptions; --amortization-years, --usd-per-kwh)"
    )
    return PriceQuote(usd, "owned (capex+power)", str(capex.source), str(capex.as_of), note)
