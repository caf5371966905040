"""Parse `tegrastats` lines (Jetson): RAM, swap, CPU and GPU load, temperatures and power rails. Pure.

Formats differ across JetPack 4/5/6/7 and modules (DOMAIN.md §5.3): a date prefix on newer releases, ``mW``
suffixes on rails from JetPack 5, a third slash value (max) on rails and temperatures in JetPack 7,
``GR3D_FREQ 63%@[621]`` GPC lists on Orin JP6/7 and no utilization at all on Thor. Temperatures of -256 C
mean "sensor unavailable" and are dropped. Board power is ``VDD_IN`` (or ``POM_5V_IN`` on Nano/TX1) when
present, else the sum of the rails (jtop's rule), and the sample says which.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_STAMP = re.compile(r"^\s*(?P<stamp>\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\s+")
_RAM = re.compile(r"\bRAM\s+(?P<used>\d+)/(?P<total>\d+)(?P<unit>[kKMG])B")
_SWAP = re.compile(r"\bSWAP\s+(?P<used>\d+)/(?P<total>\d+)(?P<unit>[kKMG])B")
_CPU = re.compile(r"\bCPU\s+\[(?P<cores>[^\]]*)\]")
_CORE = re.compile(r"(?P<pct>\d+)%(?:@(?P<mhz>\d+))?")
_GPU = re.compile(r"\bGR3D_FREQ\s+(?:(?P<pct>\d+)%)?(?:@\[?(?P<mhz>[\d,]+)\]?)?")
_EMC = re.compile(r"\bEMC_FREQ\s+(?P<pct>\d+)%")
_TEMP = re.compile(r"(?<![\w%])(?P<name>[A-Za-z][\w]*)@(?P<c>-?\d+(?:\.\d+)?)C(?:/-?\d+(?:\.\d+)?C)*(?!\w)")
_NUM = r"\d+(?:\.\d+)?"
_RAIL = re.compile(
    rf"(?<![\w@])(?P<rail>[A-Z][A-Z0-9_]*)\s+(?P<cur>{_NUM})(?:mW)?/(?P<avg>{_NUM})(?:mW)?"
    rf"(?:/(?P<max>{_NUM})(?:mW)?)?(?![\w/])"
)
_NOT_RAILS = {"RAM", "SWAP", "IRAM"}
_TOTAL_RAILS = ("VDD_IN", "POM_5V_IN")
_UNAVAILABLE_C = -256.0
_MB = {"k": 1 / 1024, "K": 1 / 1024, "M": 1.0, "G": 1024.0}


@dataclass(frozen=True)
class RailPower:
    """One power rail: instantaneous and running-average power in mW (JetPack 7 adds a third, max)."""

    name: str
    current_mw: float
    average_mw: float
    max_mw: float | None = None


@dataclass(frozen=True)
class TegraSample:
    """One tegrastats line."""

    timestamp: str | None
    ram_used_mb: float | None
    ram_total_mb: float | None
    swap_used_mb: float | None = None
    swap_total_mb: float | None = None
    cpu_load_pct: tuple[float | None, ...] = ()  # None for an offline core
    gpu_load_pct: float | None = None
    gpu_freq_mhz: tuple[int, ...] = ()
    emc_load_pct: float | None = None
    temperatures_c: Mapping[str, float] = field(default_factory=dict)
    rails: Mapping[str, RailPower] = field(default_factory=dict)

    @property
    def total_power_source(self) -> str | None:
        """``VDD_IN``/``POM_5V_IN`` when the board reports its input, ``sum of rails`` otherwise."""
        for name in _TOTAL_RAILS:
            if name in self.rails:
                return name
        return "sum of rails" if self.rails else None

    @property
    def total_power_mw(self) -> float | None:
        source = self.total_power_source
        if source is None:
            return None
        if source in self.rails:
            return self.rails[source].current_mw
        return sum(r.current_mw for r in self.rails.values())


def _mb(match: re.Match | None) -> tuple[float | None, float | None]:
    if match is None:
        return None, None
    scale = _MB[match["unit"]]
    return float(match["used"]) * scale, float(match["total"]) * scale


def _cores(text: str) -> tuple[float | None, ...]:
    out: list[float | None] = []
    for token in text.split(","):
        token = token.strip()
        core = _CORE.fullmatch(token)
        out.append(float(core["pct"]) if core else None)  # "off" and anything unknown: offline
    return tuple(out)


def parse_line(line: str) -> TegraSample:
    """Parse one tegrastats line; raises ValueError when it has no RAM field (not a tegrastats line)."""
    stamp = _STAMP.match(line)
    body = line[stamp.end() :] if stamp else line
    ram = _RAM.search(body)
    if ram is None:
        raise ValueError(f"not a tegrastats line (no RAM field): {line[:60]!r}")
    cpu = _CPU.search(body)
    rest = body[: cpu.start()] + body[cpu.end() :] if cpu else body  # core entries look like temps/rails
    gpu = _GPU.search(rest)
    emc = _EMC.search(rest)
    temps = {m["name"]: float(m["c"]) for m in _TEMP.finditer(rest) if float(m["c"]) != _UNAVAILABLE_C}
    rails = {
        m["rail"]: RailPower(
            m["rail"], float(m["cur"]), float(m["avg"]), float(m["max"]) if m["max"] else None
        )
        for m in _RAIL.finditer(rest)
        if m["rail"] not in _NOT_RAILS
    }
    ram_used, ram_total = _mb(ram)
    swap_used, swap_total = _mb(_SWAP.search(rest))
    return TegraSample(
        timestamp=stamp["stamp"] if stamp else None,
        ram_used_mb=ram_used,
        ram_total_mb=ram_total,
        swap_used_mb=swap_used,
        swap_total_mb=swap_total,
        cpu_load_pct=_cores(cpu["cores"]) if cpu else (),
        gpu_load_pct=float(gpu["pct"]) if gpu and gpu["pct"] else None,
        gpu_freq_mhz=tuple(int(f) for f in gpu["mhz"].split(",") if f) if gpu and gpu["mhz"] else (),
        emc_load_pct=float(emc["pct"]) if emc else None,
        temperatures_c=temps,
        rails=rails,
    )


def parse_log(lines: Iterable[str]) -> list[TegraSample]:
    """Parse a tegrastats log, skipping blank lines and anything that is not a tegrastats line."""
    samples = []
    for line in lines:
        if not line.strip():
            continue
        try:
            samples.append(parse_line(line))
        except ValueError:
            continue
    return samples


@dataclass(frozen=True)
class PowerSummary:
    """Aggregates over samples taken during a load: mean board power and peak RAM."""

    samples: int
    mean_power_mw: float | None
    power_source: str | None
    peak_ram_used_mb: float | None
    ram_total_mb: float | None
    mean_gpu_load_pct: float | None


def summarize(samples: list[TegraSample]) -> PowerSummary:
    """Mean of the instantaneous board power and the peak RAM over ``samples``."""
    powers = [s.total_power_mw for s in samples if s.total_power_mw is not None]
    gpu = [s.gpu_load_pct for s in samples if s.gpu_load_pct is not None]
    rams = [s.ram_used_mb for s in samples if s.ram_used_mb is not None]
    totals = [s.ram_total_mb for s in samples if s.ram_total_mb is not None]
    return PowerSummary(
        samples=len(samples),
        mean_power_mw=sum(powers) / len(powers) if powers else None,
        power_source=next((s.total_power_source for s in samples if s.total_power_source), None),
        peak_ram_used_mb=max(rams) if rams else None,
        ram_total_mb=totals[0] if totals else None,
        mean_gpu_load_pct=sum(gpu) / len(gpu) if gpu else None,
    )


def joules_per_inference(mean_power_mw: float, duration_s: float, inferences: int) -> float:
    """Energy per inference from mean board power over a load of ``inferences`` lasting ``duration_s``."""
    if inferences <= 0 or duration_s <= 0:
        raise ValueError("need a positive duration and at least one inference")
    return mean_power_mw / 1000.0 * duration_s / inferences
