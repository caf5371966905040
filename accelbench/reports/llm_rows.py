"""The generative report's rows: a load level (GenPoint) and a model × precision × target (GenRow), with the cost
per million tokens they price. Shared by the measured rows (llm_report) and the projected ones (llm_projected)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.hardware.llm_memory import ServingRecipe
from accelbench.loadtests.statistics import FAIL, INCONCLUSIVE, PASS
from accelbench.reports.cost import PriceQuote


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """$/hour ÷ (tokens/s × 3600) × 10⁶."""
    if tokens_per_s <= 0:
        raise ValueError("tokens_per_s must be positive")
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6


@dataclass
class GenPoint:
    """One measured (or projected) load level of a generative row."""

    concurrency: float | None
    output_tps: float
    output_tps_low: float | None
    output_tps_high: float | None
    input_tps: float | None
    tokens_per_user: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    ttft_verdict: str
    tpot_verdict: str
    verdict: str
    step_index: int | None = None
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


NOT_STREAMED = "NOT-STREAMED"  # a step whose answers came in bursts (loadtests/genstats): no TPOT to judge


def combine(*verdicts: str) -> str:
    if FAIL in verdicts:
        return FAIL
    return INCONCLUSIVE if INCONCLUSIVE in verdicts or NOT_STREAMED in verdicts else PASS


# ------------------------------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class GenRow:
    """One generative model × precision × target with its frontier points; its table row is ``token_row``."""

    model: str
    precision: str
    target: str
    status: str  # measured | projected
    isl: int | None
    osl: int | None
    points: list[GenPoint]
    capacity: GenPoint | None
    reason: str
    prices: Mapping[str, PriceQuote] = field(default_factory=dict)  # basis -> PriceQuote
    efficiency_source: str | None = None
    efficiency_kind: str | None = None
    tp: int | None = None
    max_batch: int | None = None
    answer_tps: float | None = None
    answer_how: str = ""
    # the answer's projected range (llm_report.range_at); None on a measured row, whose answer claims no interval
    answer_tps_low: float | None = None
    answer_tps_high: float | None = None
    # weights, KV cache and compute dtypes (None: a measured row without them)
    recipe: ServingRecipe | None = None
    tp_options: tuple[dict[str, Any], ...] = ()  # projected: every TP degree that fits (TpOption.summary)

    def cost(self, basis: str, which: str = "output", tps: float | None = None) -> float | None:
        q = self.prices.get(basis)
        point = self.capacity
        if q is None:
            return None
        if tps is not None:
            out = tps
        elif point is not None:
            out = point.output_tps
        else:
            return None
        if which == "output":
            rate = out
        elif tps is None and point is not None and point.input_tps:  # the step's own input rate
            rate = point.input_tps if which == "input" else point.input_tps + out
        else:
            if self.isl is None or not self.osl:
                return None
            inp = out * self.isl / self.osl
            rate = inp if which == "input" else inp + out
        return usd_per_million_tokens(q.usd_per_hour, rate) if rate else None

    def cost_interval(self, basis: str) -> tuple[float | None, float | None]:
        q, c = self.prices.get(basis), self.capacity
        if q is None or c is None or not c.output_tps_low or not c.output_tps_high or c.output_tps_low <= 0:
            return None, None
        return usd_per_million_tokens(q.usd_per_hour, c.output_tps_high), usd_per_million_tokens(
            q.usd_per_hour, c.output_tps_low
        )

    def answer_cost_interval(self, basis: str) -> tuple[float | None, float | None]:
        """The cost range at the answer's interactivity: its throughput range turned over (None, None without)."""
        q, lo, hi = self.prices.get(basis), self.answer_tps_low, self.answer_tps_high
        if q is None or not lo or not hi or lo <= 0:
            return None, None
        return usd_per_million_tokens(q.usd_per_hour, hi), usd_per_million_tokens(q.usd_per_hour, lo)
