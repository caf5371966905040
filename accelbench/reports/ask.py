"""``accelbench project``: the report's rows for a model on hardware nobody measured, asked for without a result.

A generative model (a packaged card such as ``llama-3.1-8b``, a card TOML with a ``[generative]`` table, or a
causal-LM checkpoint ``hf:DIR``) at an ISL/OSL gets the generative rows ``report --project`` builds
(``llm_projected.project_generative``: the serving recipe, the fit, the frontier, capacity at the TTFT/TPOT
objective, cost per million input/output tokens); a classic model (one whose graph cost
``published_results.toml`` counts: resnet50, bert-base, ...) gets the classic projected rows
(``build.project_classic``: cost per million requests at the latency SLO). Both come back as a ``ReportData``
the report's own renderers turn into Markdown, HTML and JSON (``report.render_data``); every row is projected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.hardware.catalog_schema import PRECISIONS
from accelbench.hardware.llm_memory import WEIGHT_FORMATS, ModelShape, load_shape, runs_precision
from accelbench.hardware.published import load_published
from accelbench.loadtests.traces import read_trace
from accelbench.models.loader import causal_lm_card, is_causal_lm_dir
from accelbench.reports.build import ReportData, project_classic
from accelbench.reports.llm_projected import ProjectionRequest, project_generative
from accelbench.reports.llm_projection import LlmEfficiencies
from accelbench.reports.llm_report import (
    GenerativeReport,
    answer_rows,
    fit_table,
    objectives,
    plan,
    target_prices,
)
from accelbench.reports.options import ReportOptions

DEFAULT_PRECISIONS = {"generative": ("fp16", "fp8"), "classic": ("fp16",)}


@dataclass(frozen=True)
class Ask:
    """What ``accelbench project`` is asked: a model, a workload (generative: ISL/OSL), precisions, targets
    (empty: every catalog target that runs the precision)."""

    model: str
    isl: int | None = None
    osl: int | None = None
    precisions: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    trace: str | None = None  # a Mooncake JSONL or BurstGPT CSV trace: its mean ISL/OSL (trace_lengths)


def trace_lengths(path: str) -> tuple[int, int]:
    """(ISL, OSL) of a trace: the mean prompt and output lengths of its requests (loadtests.traces.read_trace),
    rounded. Decode reads KV bytes linear in the context and prefill FLOPs near-linear in the prompt, so the mean
    request prices the trace's tokens to first order; its spread (long prompts beside short ones) is not
    modelled."""
    entries = read_trace(path)
    isl = round(sum(e.isl for e in entries) / len(entries))
    osl = round(sum(e.osl for e in entries) / len(entries))
    return max(1, isl), max(1, osl)


def generative_shape(model: str, classic: Sequence[str] = ()) -> ModelShape | None:
    """The shape of a generative ``model`` (packaged card name, card TOML, ``hf:DIR``), None for a model that is
    not generative (a card without ``[generative]``, a name in ``classic``); ``BadInputError`` for a card that cannot be read or a folder that is no causal LM."""
    if model.startswith("hf:"):
        if not is_causal_lm_dir(model[3:]):
            raise BadInputError(f"{model}: no config.json naming a …ForCausalLM architecture in that folder")
        return causal_lm_card(Path(model[3:]).expanduser()).generative
    name = model.removeprefix("builtin:")
    try:
        return load_shape(name)
    except BadInputError as err:
        if "has no [generative] table" in str(err):
            return None
        if name in classic:
            return None
        if "not found" not in str(err):
            raise
        raise BadInputError(
            f"unknown model {model!r}: not a generative card (packaged: llama-3.1-8b, llama-1b, ...; a card "
            f"TOML; hf:DIR) nor a classic model with a published graph cost ({', '.join(sorted(classic))})"
        ) from None


def _costs(catalog: Catalog) -> Mapping[str, Mapping[str, Mapping[str, float]]]:
    """The published models' graph costs: model → precision → graph cost."""
    return load_published(frozenset(catalog.targets))[1]


def _targets(catalog: Catalog, ids: Sequence[str]) -> dict[str, HardwareTarget]:
    return {tid: catalog.get(tid) for tid in ids} if ids else dict(catalog.targets)


def ask(request: Ask, catalog: Catalog, options: ReportOptions) -> ReportData:
    """The projected report for ``request``: generative rows for a generative model, classic rows otherwise."""
    targets = _targets(catalog, request.targets)
    shape = generative_shape(request.model, tuple(_costs(catalog)))
    # a generative model's precision is its weights' format (int4: W4A16 weight-only), a classic one's the catalog's
    known = tuple(WEIGHT_FORMATS) if shape is not None else PRECISIONS
    for p in request.precisions:
        if p not in known:
            raise BadInputError(f"unknown precision {p!r}; use one of {', '.join(known)}")
    baseline_id = options.baseline or catalog.baseline_id
    if shape is None:
        return _classic(request, catalog, targets, options)
    if request.trace is not None:
        if request.isl or request.osl:
            raise BadInputError("give the workload once: --trace FILE or --isl N --osl N")
        isl, osl = trace_lengths(request.trace)
        request = replace(request, isl=isl, osl=osl)
    if not request.isl or not request.osl:
        raise BadInputError("a generative model needs the workload: --isl N --osl N (or --trace FILE)")
    gen = ask_generative(request, shape, catalog, targets, options)
    return ReportData(options, baseline_id, [], {}, targets, {}, {}, generative=gen)


def ask_generative(
    request: Ask,
    shape: ModelShape,
    catalog: Catalog,
    targets: Mapping[str, HardwareTarget],
    options: ReportOptions,
) -> GenerativeReport:
    """One projected generative row per precision × target (every given target; without a list, the catalog's
    targets that run the precision), as ``report --project`` builds them, and the model's memory-fit table."""
    ttft_ms, tpot_ms, src = objectives(options, {})
    efficiencies = LlmEfficiencies(catalog)
    name = shape.name or request.model
    rows = []
    for precision in request.precisions or DEFAULT_PRECISIONS["generative"]:
        for _, t in sorted(targets.items()):
            if not request.targets and runs_precision(t, precision):
                continue
            req = ProjectionRequest(name, precision, request.isl, request.osl, options.kv_dtype, shape)
            rows.append(project_generative(req, t, efficiencies, ttft_ms, tpot_ms, target_prices(t, options)))
    rows = answer_rows(rows, options.min_tokens_per_user)
    rows.sort(key=lambda r: (r.model, r.precision, r.target))
    context = min(int(options.fit_context or (request.isl or 0) + (request.osl or 0)), shape.context_length)
    fits = [fit_table(shape, targets, context, kv_dtype=options.kv_dtype)]
    target_tps = options.target_tokens_per_s
    gen_plan = plan(rows, target_tps, options.headroom, options.price_basis) if target_tps else None
    return GenerativeReport(
        rows, ttft_ms, tpot_ms, src, options.min_tokens_per_user, fits, gen_plan, options.price_basis
    )


def _classic(
    request: Ask, catalog: Catalog, targets: Mapping[str, HardwareTarget], options: ReportOptions
) -> ReportData:
    name = request.model.removeprefix("builtin:")
    costs: Mapping[str, Mapping[str, Any]] = _costs(catalog).get(name, {})
    if not costs:
        raise BadInputError(
            f"model {request.model!r} is not generative and published_results.toml counts no graph cost for "
            f"it; measure it (accelbench run) and use `accelbench report --project`"
        )
    precisions = request.precisions or DEFAULT_PRECISIONS["classic"]
    missing = [p for p in precisions if p not in costs]
    if missing:
        raise BadInputError(
            f"no graph cost of {name} at {', '.join(missing)}; counted: {', '.join(sorted(costs))}"
        )
    return project_classic(name, precisions, costs, targets, catalog, options)
