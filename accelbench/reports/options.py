"""The report's options, defined once: ``ReportOptions`` with each option's default, command-line flag, help and
range in its field.

Every front end builds its options from this one definition: ``accelbench report``'s flags are made from the
fields (commands/reports.py, shared click decorators as sqlite-utils makes them), the results server's query
parameters take their defaults from it (service/query_options.py ``report_options``), and both turn what they
were given into a ``ReportOptions`` with ``options_from``. Light on purpose: the CLI imports it to build its help.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from accelbench.hardware.llm_memory import KV_DTYPES
from accelbench.reports.cost import DEFAULT_USD_PER_KWH, PRICE_BASES, parse_price_overrides

DEFAULT_MAX_ERROR_RATE = (
    0.01  # a step with more failed requests than this does not count (reports/capacity.py)
)
CLASSIC, GENERATIVE = "classic", "generative"  # which report an option is for


def option(default: Any = None, *, flag: str, help: str = "", group: str = CLASSIC, **meta: Any) -> Any:
    """A report option: its default, its command-line ``flag`` and ``help``, the report ``group`` it belongs to,
    and how the CLI takes it (``low``/``high`` with ``low_open``/``high_open``: a range; ``choices``;
    ``multiple``: repeatable; ``is_flag``; ``metavar``; ``integer``; ``show_default``; ``aliases``: deprecated
    flags still taken)."""
    meta = {"flag": flag, "help": help, "group": group, **meta}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ReportOptions:
    slo_ms: float = option(
        100.0,
        flag="--slo-p99-ms",
        low=0,
        low_open=True,
        help="Latency SLO in ms for the chosen percentile (--percentile).",
    )
    percentile: str = option(
        "p99", flag="--percentile", help="Percentile the SLO applies to: 50 90 95 99 99.9."
    )
    baseline: str | None = option(
        flag="--baseline",
        show_default=False,
        help="Target id to compare against (default: the catalog baseline).",
    )
    price_basis: str = option("on-demand", flag="--price-basis", choices=PRICE_BASES)
    price_overrides: Mapping[str, float] = option(
        {},
        flag="--price",
        multiple=True,
        metavar="ID=USD",
        help="Override a target's price per accelerator-hour, e.g. --price cpu-local=0.05 (repeatable).",
    )
    target_qps: float | None = option(
        flag="--target-qps",
        low=0,
        low_open=True,
        help="Plan replicas and the monthly bill for this request rate.",
    )
    headroom: float = option(
        0.3,
        flag="--headroom",
        low=0,
        high=1,
        high_open=True,
        help="Fraction of capacity kept free when planning replicas.",
    )
    project: tuple[str, ...] = option(
        (),
        flag="--project",
        multiple=True,
        metavar="ID",
        help="Also project these targets from the roofline (repeatable or comma-separated).",
    )
    include_failed: bool = option(
        False, flag="--include-failed", is_flag=True, help="Rank variants whose accuracy check FAILed."
    )
    max_error_rate: float = option(DEFAULT_MAX_ERROR_RATE, flag="--max-error-rate", low=0, high=1)
    # None: the catalog's figure, else cost.DEFAULT_AMORTIZATION_YEARS
    amortization_years: float | None = option(
        flag="--amortization-years",
        low=0,
        low_open=True,
        help="Owned devices (Jetson): years to spread the purchase over (default: catalog, else 3).",
    )
    usd_per_kwh: float = option(
        DEFAULT_USD_PER_KWH,
        flag="--usd-per-kwh",
        low=0,
        help="Owned devices: electricity price (an assumption; stated in the report).",
    )
    # generative results (reports/llm_report.py): objectives (None: the workload's, else MLPerf Llama3.1-8B's),
    # the interactivity asked for, a capacity plan in output tokens/s, and model cards for the memory-fit table.
    # The objectives are spelled as loadtest's flags and a spec's [slo] keys (one name per meaning, issue 39);
    # ``aliases``: the spellings of earlier versions, still taken, with a warning (commands/reports.py).
    slo_ttft_p99_ms: float | None = option(
        flag="--slo-ttft-p99-ms",
        group=GENERATIVE,
        low=0,
        low_open=True,
        aliases=("--slo-ttft-ms",),
        help="Generative results: a step's TTFT p99 objective in ms, as loadtest's --slo-ttft-p99-ms "
        "[default: the workload's, else MLPerf's 2000].",
    )
    slo_tpot_p99_ms: float | None = option(
        flag="--slo-tpot-p99-ms",
        group=GENERATIVE,
        low=0,
        low_open=True,
        aliases=("--slo-tpot-ms",),
        help="Generative results: a step's TPOT p99 objective in ms, as loadtest's --slo-tpot-p99-ms "
        "[default: the workload's, else MLPerf's 100].",
    )
    min_tokens_per_user: float | None = option(
        flag="--min-tokens-per-user",
        group=GENERATIVE,
        low=0,
        low_open=True,
        help="Generative results: the cheapest target at this interactivity (tokens/s per user) on the frontier.",
    )
    target_tokens_per_s: float | None = option(
        flag="--target-tokens-per-s",
        group=GENERATIVE,
        low=0,
        low_open=True,
        help="Generative results: plan replicas and the monthly bill for this output-token rate.",
    )
    fit_models: tuple[str, ...] = option(
        (),
        flag="--fit-model",
        group=GENERATIVE,
        multiple=True,
        metavar="CARD",
        help="Generative: a model card (packaged name such as llama-3.1-8b, or a TOML) for the memory-fit table.",
    )
    kv_dtype: str | None = option(
        flag="--kv-dtype",
        group=GENERATIVE,
        choices=tuple(KV_DTYPES),
        show_default=False,
        help="Generative projections: the KV cache dtype [default: what the engines use for the weights on "
        "the target: fp8 with fp8 weights where it has FP8, else fp16/bf16].",
    )
    fit_context: int | None = option(
        flag="--context",
        group=GENERATIVE,
        low=1,
        integer=True,
        help="Context length in tokens for the memory-fit table [default: 8192].",
    )

    @property
    def slo_us(self) -> float:
        return self.slo_ms * 1000.0


DEFAULTS = ReportOptions()  # every option at its default: what a front end shows when nothing is given


@dataclass(frozen=True)
class OptionSpec:
    """One report option as a front end declares it."""

    name: str  # the ReportOptions field
    default: Any
    flag: str
    help: str
    group: str  # CLASSIC | GENERATIVE
    meta: Mapping[str, Any]


def option_specs(group: str | None = None) -> tuple[OptionSpec, ...]:
    """The report options (of ``group``, else all) in declaration order."""
    out = []
    for f in fields(ReportOptions):
        if group is not None and f.metadata["group"] != group:
            continue
        factory = f.default_factory  # every option has a default or a default factory
        default = f.default if f.default is not MISSING else factory() if callable(factory) else None
        meta = {k: v for k, v in f.metadata.items() if k not in ("flag", "help", "group")}
        out.append(
            OptionSpec(f.name, default, f.metadata["flag"], f.metadata["help"], f.metadata["group"], meta)
        )
    return tuple(out)


def split_ids(values: Iterable[str]) -> tuple[str, ...]:
    """``("l4", "l40s,inf2-xlarge")`` → ("l4", "l40s", "inf2-xlarge"): a repeatable, comma-separable option."""
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def options_from(values: Mapping[str, Any]) -> ReportOptions:
    """A ReportOptions from what a front end was given, by field name; absent fields keep their defaults.
    ``price_overrides`` may be ``ID=USD`` strings (parsed; a bad one raises BadInputError), ``project`` items
    comma-separated ids, ``baseline`` empty for none."""
    given = dict(values)
    if "price_overrides" in given and not isinstance(given["price_overrides"], Mapping):
        given["price_overrides"] = parse_price_overrides(tuple(given["price_overrides"]))
    if "project" in given:
        given["project"] = split_ids(given["project"])
    if "fit_models" in given:
        given["fit_models"] = tuple(given["fit_models"])
    if "baseline" in given:
        given["baseline"] = given["baseline"] or None
    return ReportOptions(**given)
