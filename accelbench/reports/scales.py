"""Axis scales for the report's SVG plots: a data domain with margins, its position on the axis (linear or
log), and "nice" ticks with their labels (1, 2, 2.5 or 5 × 10ⁿ apart; 1-2-5 or decades on log axes)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

_NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
MAX_TICKS = 7  # labelled ticks on one axis at most


@dataclass(frozen=True)
class Tick:
    value: float
    label: str


@dataclass(frozen=True)
class Scale:
    """The domain [lo, hi] of one axis; ``log``: positions by log10 (lo > 0 then)."""

    lo: float
    hi: float
    log: bool = False

    def _t(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def frac(self, v: float) -> float:
        """Where ``v`` sits on the axis: 0 at lo, 1 at hi."""
        return (self._t(v) - self._t(self.lo)) / (self._t(self.hi) - self._t(self.lo))

    def contains(self, v: float) -> bool:
        return math.isfinite(v) and (v > 0 or not self.log)

    def ticks(self) -> list[Tick]:
        """The labelled ticks inside the domain, ascending, at least two."""
        return log_ticks(self.lo, self.hi)[0] if self.log else linear_ticks(self.lo, self.hi)

    def minor(self) -> list[float]:
        """Unlabelled ticks between the labelled ones (log axes only)."""
        return log_ticks(self.lo, self.hi)[1] if self.log else []


def domain(values: Iterable[float], log: bool, margin: float = 0.05) -> Scale:
    """The scale that shows every value of ``values`` (non-finite ones, and non-positive ones on a log axis,
    cannot be drawn and are left out) with ``margin`` of the span free on each side. Values beyond ±10³⁰⁰
    (beyond 10⁻²⁵⁰ to 10²⁵⁰ on a log axis) count as those bounds: the margins stay within float range."""
    shown = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    t = [max(-250.0, min(250.0, math.log10(v))) if log else max(-1e300, min(1e300, v)) for v in shown]
    if not t:
        return Scale(1.0, 10.0, True) if log else Scale(0.0, 1.0)
    lo, hi = min(t), max(t)
    if hi - lo < 1e-9 * max(1.0, abs(lo)):  # one value: half a decade, or a tenth of it, either side
        pad = 0.5 if log else (abs(lo) * 0.1 or 1.0)
        lo, hi = lo - pad, hi + pad
    span = hi - lo
    lo, hi = lo - margin * span, hi + margin * span
    return Scale(10**lo, 10**hi, True) if log else Scale(lo, hi)


def _decimals(step: float) -> int:
    """The fewest decimals that write multiples of ``step`` exactly (2.5 → 1, 0.05 → 2, 200 → 0)."""
    d = max(0, -math.floor(math.log10(step) + 1e-9))
    while abs(step * 10**d - round(step * 10**d)) > 1e-6 * step * 10**d and d < 30:
        d += 1
    return d


def _power(exponent: int) -> str:
    return "10" + str(exponent).translate(_SUPERSCRIPT)


def _sci(v: float, exponent: int, decimals: int) -> str:
    """``v`` as m×10ⁿ with n = ``exponent`` and m to ``decimals`` decimals (10ⁿ alone when m is 1)."""
    if v == 0:
        return "0"
    mantissa = f"{v / 10**exponent:.{decimals}f}"
    return _power(exponent) if mantissa == "1" else f"{mantissa}×{_power(exponent)}"


def _plain(v: float, decimals: int, grouped: bool = False) -> str:
    text = f"{v:,.{decimals}f}" if grouped else f"{v:.{decimals}f}"
    return "0" if float(text.replace(",", "")) == 0 else text


def linear_ticks(lo: float, hi: float, max_ticks: int = MAX_TICKS - 1) -> list[Tick]:
    """Multiples of the smallest nice step that puts at most ``max_ticks`` ticks in [lo, hi]; written plainly
    (with thousands separators from 10,000), or as m×10ⁿ below 0.001 and from 10⁹."""
    span = hi - lo
    raw = span / (max_ticks - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(s * power for s in _NICE_STEPS if s * power >= raw * (1 - 1e-9))
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    values = [k * step for k in range(first, last + 1)]
    top = max(abs(lo), abs(hi))
    if top < 1e-3 or top >= 1e9:
        exponent = math.floor(math.log10(top))
        decimals = _decimals(step / 10**exponent)
        return [Tick(v, _sci(v, exponent, decimals)) for v in values]
    decimals = _decimals(step)
    return [Tick(v, _plain(v, decimals, grouped=top >= 1e4)) for v in values]


def _log_label(v: float, plain: bool) -> str:
    """1, 2 or 5 × 10ⁿ: plainly (0.02, 500) or as 2×10⁻⁵, 10⁹."""
    exponent = math.floor(math.log10(v) + 1e-9)
    return _plain(v, max(0, -exponent)) if plain else _sci(v, exponent, 0)


def log_ticks(lo: float, hi: float) -> tuple[list[Tick], list[float]]:
    """(labelled ticks, minor tick values) in [lo, hi] on a log axis: 1, 2 and 5 × 10ⁿ over at most about two
    decades, every decade (every second or third when there are many) over more; linear ticks when the
    domain holds fewer than two of those."""
    eps = 1e-9
    first, last = math.floor(math.log10(lo) + eps), math.floor(math.log10(hi) + eps)
    if math.log10(hi / lo) <= 2.2:
        major = [m * 10.0**k for k in range(first, last + 1) for m in (1, 2, 5)]
        minor = [m * 10.0**k for k in range(first, last + 1) for m in (3, 4, 6, 7, 8, 9)]
    else:
        decades = [k for k in range(first, last + 1) if lo * (1 - eps) <= 10.0**k]
        stride = math.ceil(len(decades) / MAX_TICKS)
        major = [10.0**k for k in decades if k % stride == 0]
        minor = (
            [m * 10.0**k for k in range(first, last + 1) for m in range(2, 10)]
            if stride == 1
            else [10.0**k for k in decades if k % stride]
        )
    major = [v for v in major if lo * (1 - eps) <= v <= hi * (1 + eps)]
    minor = [v for v in minor if lo <= v <= hi]
    if len(major) < 2:  # within a factor of about 2.5: linear ticks read better
        return linear_ticks(lo, hi), []
    plain = all(1e-3 <= v <= 1e5 for v in major)
    return [Tick(v, _log_label(v, plain)) for v in major], minor
