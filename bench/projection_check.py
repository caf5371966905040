"""How good is a projection? The efficiency model checked on published results it was not fitted on.

    .venv/bin/python bench/projection_check.py [--baseline a100-sxm4-80gb] [--json]

Three checks (accelbench/reports/validation.py): leave one *model* out of its target's fit; leave one *target*
out entirely (its chip's other targets and its toolchain still speak for it, as for a target nobody published);
and *cross-family*: fit on MLPerf only and predict the vendors' tables, and the other way round. Each prints
projected ÷ published per point and, where the baseline (or a target with its chip) published the same model,
precision and batch, the ratio to it ÷ the published ratio — the figure a hardware choice rests on. The worst
factor of each (f and 1/f count alike) closes each table. Points with ``fit = false`` (Jetson GPU + 2 DLA,
MLPerf's variable-length BERT) count for ratios only: their absolute throughput is not the padded graph's.

Then the fixed term of a graph never published: each published graph's placed from the others (by its depth,
by its op count) and by the median graph, against its own fit (``fixed_term_by_size``).

Then the generative points (``[[llm_points]]``, accelbench/reports/llm_projection.py): each published output-token
rate projected with the compute and memory efficiencies refitted without it, without its target's points and
without its source family's (worst and median, per family); the ratios between targets of one published table at
one ISL/OSL; how many published values the projected ranges hold; every fit point reproduced through the report's
own path (``llm_report.reproduce``); and the held-out family's figure (``--json`` prints both lists under
"classic" and "generative" with ``--generative``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.catalog_schema import PUBLISHED_FAMILIES
from accelbench.hardware.roofline import roofline_point
from accelbench.reports.llm_projection import (
    LLM_HELD_OUT_FAMILY,
    LLM_HELD_OUT_NOTE,
    LlmCheckRow,
    LlmEfficiencies,
    leave_one_out,
    llm_coverage,
    ratio_checks,
)
from accelbench.reports.llm_report import reproduce
from accelbench.reports.validation import (
    HELD_OUT_FAMILY,
    CheckRow,
    FixedTermRow,
    coverage,
    cross_family,
    fixed_term_by_size,
    held_out,
    leave_one_model_out,
    leave_one_target_out,
    worst,
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def checks(catalog, baseline: str) -> dict[str, list[CheckRow]]:
    out = {
        "leave one model out": leave_one_model_out(catalog, roofline_point, baseline),
        "leave one target out": leave_one_target_out(catalog, roofline_point, baseline),
    }
    for family in PUBLISHED_FAMILIES:
        out[f"cross-family: fitted on {family} only"] = cross_family(
            catalog, roofline_point, baseline, family
        )
    return out


def print_table(title: str, rows: list[CheckRow]) -> None:
    print(f"\n## {title}\n")
    print("| target | model | precision | batch | family | published inf/s | projected inf/s | projected ÷ "
          "published | ratio to reference ÷ published ratio | reference | note |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.target} | {r.model} | {r.precision} | {r.batch} | {r.family} | "
            f"{r.published_ips:,.1f} | {_fmt(r.projected_ips, 6)} | {_fmt(r.factor)} | "
            f"{_fmt(r.ratio_factor)} | {r.reference or '—'} | {r.reason} |"
        )
    for key, what in (("factor", "projected ÷ published"), ("ratio_factor", "ratio to the reference")):
        w, row = worst(rows, key)
        if w is None or row is None:
            print(f"worst {what}: none counted")
        else:
            counted = "counted_factor" if key == "factor" else "counted"
            factors = [getattr(r, key) for r in rows if getattr(r, key) and getattr(r, counted)]
            within = sum(1 for f in factors if max(f, 1 / f) <= 1.25)
            n = len(factors)
            median = statistics.median(max(f, 1 / f) for f in factors)
            print(f"worst {what}: {w:.3g}× ({row.target} {row.model} {row.precision} batch "
                  f"{row.batch}: {getattr(row, key):.3g}); median {median:.3g}×; {within} of {n} within 1.25×")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=None, help="target the ratios are taken to (catalog baseline)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--generative", action="store_true", help="with --json: print the LLM rows too")
    args = parser.parse_args()
    try:
        catalog = load_catalog()
        baseline = args.baseline or catalog.baseline_id
        catalog.get(baseline)
    except BadInputError as err:
        print(f"projection_check: {err}", file=sys.stderr)
        sys.exit(2)
    results = checks(catalog, baseline)
    llm_eff = LlmEfficiencies(catalog)
    llm_rows = leave_one_out(llm_eff)
    if args.json:
        tables = {title: [asdict(r) for r in rows] for title, rows in results.items()}
        if args.generative:
            tables["generative"] = [asdict(r) for r in llm_rows]
        print(json.dumps(tables, indent=2, sort_keys=True))
        return
    for title, rows in results.items():
        print_table(title, rows)
    cov = coverage(catalog, results["leave one target out"])
    print(
        f"\ncoverage, leave one target out: {cov.in_report_range} of {cov.points} published values "
        f"({cov.share(cov.in_report_range):.0%}) inside the report's projected range (widened by the other "
        f"targets' factors only); {cov.in_fit_range} ({cov.share(cov.in_fit_range):.0%}) inside the fit's own"
    )
    print_held_out(held_out(catalog, roofline_point, baseline))
    print_fixed_terms(fixed_term_by_size(catalog, roofline_point))
    print_generative(llm_rows, llm_eff, baseline)


def _summary(rows: list[CheckRow], key: str) -> str:
    w, row = worst(rows, key)
    if w is None or row is None:
        return "none counted"
    counted = "counted_factor" if key == "factor" else "counted"
    factors = [max(f, 1 / f) for f in (getattr(r, key) for r in rows if getattr(r, counted)) if f]
    return (f"{w:.3g}× ({row.target} {row.model} {row.precision} batch {row.batch}), median "
            f"{statistics.median(factors):.3g}× over {len(factors)}")  # fmt: skip


def print_held_out(rows: list[CheckRow]) -> None:
    """The family held out of development, projected from the other family's fits (docs/projections.md)."""
    print(
        f"\nheld-out family: {HELD_OUT_FAMILY} (excluded from tuning; fitted on the other family only): "
        f"worst projected ÷ published {_summary(rows, 'factor')}; worst ratio to the reference "
        f"{_summary(rows, 'ratio_factor')}"
    )


def print_fixed_terms(rows: list[FixedTermRow]) -> None:
    """A user's graph's fixed term: each published graph placed from the others, against its own fit."""
    print("\n## fixed term of a graph never published: each published graph left out\n")
    print("| toolchain | graph | kind | depth | ops | fitted d | by depth ÷ fitted | by ops ÷ fitted "
          "| median graph ÷ fitted |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.toolchain} | {r.graph} | {r.kind} | {r.depth:.0f} | {r.ops:.0f} | {r.d:.3g} | "
              f"{r.by_depth:.3g} | {r.by_ops:.3g} | {r.by_median:.3g} |")  # fmt: skip
    for key, what in (("by_depth", "by depth"), ("by_ops", "by op count"), ("by_median", "the median graph")):
        factors = [max(f, 1 / f) for f in (getattr(r, key) for r in rows)]
        if factors:
            w = max(rows, key=lambda r: max(getattr(r, key), 1 / getattr(r, key)))
            print(f"fixed term {what}: worst {max(factors):.3g}× ({w.toolchain} {w.graph}), median "
                  f"{statistics.median(factors):.3g}× over {len(factors)}; "
                  f"{sum(f <= 1.5 for f in factors)} within 1.5×, {sum(f <= 2 for f in factors)} within 2×")  # fmt: skip


def _spread(factors: list[float]) -> tuple[float, float]:
    off = [max(f, 1 / f) for f in factors]
    return max(off), statistics.median(off)


def print_generative(rows: list[LlmCheckRow], eff: LlmEfficiencies, baseline: str) -> None:
    """The generative checks: each published LLM point projected with itself, its target and its source family
    left out; the ratios between targets of one table; the ranges' coverage; the fit reproduced by the report."""
    print("\n## generative (LLM) points: each projected from the others\n")
    print("| target | model | precision | family | ISL/OSL | batch | published tok/s | roofline tok/s | "
          "published ÷ roofline | point left out ÷ published | target left out ÷ published | fitted from | "
          "family left out ÷ published | fitted from |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        batch = r.batch or f"max ({r.inferred_batch} fit)"
        print(f"| {r.target} | {r.model} | {r.precision} | {r.family or '—'} | {r.isl}/{r.osl} | {batch} | "
              f"{r.published_tokens_per_s:,.1f} | {r.bound_tokens_per_s:,.1f} | {r.efficiency:.3g} | "
              f"{_fmt(r.factor)} | {_fmt(r.factor_target_out)} | {r.target_out_from or '—'} | "
              f"{_fmt(r.factor_family_out)} | {r.family_out_from or '—'} |")  # fmt: skip
    for key, what in (
        ("factor", "point left out"),
        ("factor_target_out", "its target left out"),
        ("factor_family_out", "its source family left out"),
    ):
        spread, row = worst(rows, key)  # every published LLM point counts
        factors = [getattr(r, key) for r in rows if getattr(r, key)]
        where = (
            f" ({row.target} {row.precision} {row.isl}/{row.osl} batch {row.batch or 'max'}: {getattr(row, key):.3g})"
            if row
            else ""
        )
        median = _spread(factors)[1] if factors else None
        print(f"worst generative projected ÷ published, {what}: {_fmt(spread)}×{where}; median {_fmt(median)}× "
              f"over {len(factors)}")  # fmt: skip
        if key == "factor_target_out":
            # a target whose toolchain has no other target with points borrows another toolchain's fit (labelled
            # NO published ... LLM result, range five times wider downwards): counted apart
            same = [
                r for r in rows if r.factor_target_out and not (r.target_out_from or "").startswith("other-")
            ]
            w_same, _ = worst(same, key)
            print(f"  of which fitted within their own toolchain: worst {_fmt(w_same)}× over {len(same)}; "
                  f"borrowed from another toolchain: {len(rows) - len(same)} "
                  f"({', '.join(sorted({r.target for r in rows if r not in same})) or 'none'})")  # fmt: skip
    for family in sorted({r.family for r in rows if r.family}):
        fs = [r.factor_family_out for r in rows if r.family == family and r.factor_family_out]
        if fs:
            w, m = _spread(fs)
            print(f"  family {family} left out: worst {w:.3g}×, median {m:.3g}× over {len(fs)} point(s)")
    for key, what in (("factor", "each point left out"), ("factor_target_out", "both targets left out")):
        ratios = ratio_checks(rows, baseline, key)
        if not ratios:
            continue
        wr = max(ratios, key=lambda r: max(r.ratio_factor, 1 / r.ratio_factor))
        off = [max(r.ratio_factor, 1 / r.ratio_factor) for r in ratios]
        print(f"ratios between targets of one table ({what}): worst "
              f"{max(off):.3g}× ({wr.family} {wr.isl}/{wr.osl} {wr.target} {wr.precision} ÷ {wr.reference}: published "
              f"{wr.published_ratio:.3g}, projected ÷ published {wr.ratio_factor:.3g}); median "
              f"{statistics.median(off):.3g}×; {sum(f <= 1.25 for f in off)} of {len(off)} within 1.25×")  # fmt: skip
    cov = llm_coverage(rows)
    print(f"range coverage: {cov.in_target_out_range} of {cov.points} published values inside the range projected "
          f"with their target left out; {cov.in_family_out_range} of {cov.family_points} with their source "
          f"family left out")  # fmt: skip
    fitted = [p for p in eff.points if eff.fitted_on(p.point)]
    got = [reproduce(p.point, eff.catalog.get(p.point.target), eff) for p in fitted]
    ratios_fit = [g.ratio for g in got if g is not None]
    if ratios_fit:
        w, m = _spread(ratios_fit)
        print(f"fit points reproduced through the report path (llm_report.reproduce): {len(ratios_fit)} of "
              f"{len(fitted)}, worst {w:.3g}×, median {m:.3g}×, {sum(max(r, 1 / r) <= 1.1 for r in ratios_fit)} "
              f"within 1.1×; {sum(bool(g.covered) for g in got if g is not None)} inside the report row's range")  # fmt: skip
    held = [r.factor_family_out for r in rows if r.family == LLM_HELD_OUT_FAMILY and r.factor_family_out]
    figure = f"worst {_spread(held)[0]:.3g}× over {len(held)} point(s)" if held else "no point"
    print(f"held-out source family: {LLM_HELD_OUT_FAMILY}, fitted without it: {figure} ({LLM_HELD_OUT_NOTE})")


if __name__ == "__main__":
    main()
