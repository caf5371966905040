"""How good is a projection? Leave-one-model-out over the catalog's published results.

    .venv/bin/python bench/projection_check.py [--baseline a100-sxm4-80gb] [--json]

For every target with published results (accelbench/hardware/published_results.toml) and every model it has:
refit the target's efficiency model (achieved ÷ roofline on intensity, accelbench/reports/efficiency.py)
without that model's points, project that model at each published batch, and print projected ÷ published.
Then the same with the baseline refitted without the model too: (projected target ÷ projected baseline) ÷
(published target ÷ published baseline) for the same model and scenario — the ratio a hardware choice rests
on. Prints the worst factor of each (a factor f and 1/f count alike). Points marked ``fit = false`` (Jetson
GPU + 2 DLA results) are projected for reference but not counted in the worst factors; MLPerf BERT points are
not fitted (variable-length sequences) but are projected from the target's other models and counted.

Then the generative points (``[[llm_points]]``, accelbench/reports/llm_projection.py): each published output-token
rate projected from the efficiency refitted without it (its target's other points, else its toolchain's, else
all), projected ÷ published per point and the worst (``--json`` prints both lists under "classic" and
"generative" with ``--generative``).
"""

from __future__ import annotations

import argparse
import json
import sys

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.roofline import roofline_point
from accelbench.reports.efficiency import leave_one_model_out
from accelbench.reports.llm_projection import LlmEfficiencies, leave_one_out


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def worst(rows: list[dict], key: str) -> tuple[float | None, dict | None]:
    """The factor farthest from 1 (f and 1/f alike) among counted rows (not GPU + DLA), and its row."""
    best: tuple[float | None, dict | None] = (None, None)
    for row in rows:
        value = row[key]
        if value is None or not row["counted"]:
            continue
        spread = max(value, 1 / value)
        if best[0] is None or spread > best[0]:
            best = (spread, row)
    return best


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
    rows = leave_one_model_out(catalog, roofline_point, baseline)
    llm_rows = leave_one_out(LlmEfficiencies(catalog))
    if args.json:
        out = {"classic": rows, "generative": llm_rows} if args.generative else rows
        print(json.dumps(out, indent=2, sort_keys=True))
        return
    print(f"| target | model | precision | batch | published inf/s | projected inf/s | projected ÷ published "
          f"| ratio to {baseline}: projected ÷ published | note |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['target']} | {r['model']} | {r['precision']} | {r['batch']} | {r['published_ips']:,.1f} | "
              f"{_fmt(r['projected_ips'], 6)} | {_fmt(r['factor'])} | {_fmt(r['ratio_factor'])} | {r['reason']} |")  # fmt: skip
    for key, what in (("factor", "projected ÷ published"), ("ratio_factor", f"ratio to {baseline}")):
        spread, row = worst(rows, key)
        where = f" ({row['target']} {row['model']} batch {row['batch']}: {row[key]:.3g})" if row else ""
        print(f"worst {what}: {_fmt(spread)}×{where}")
    counted = [r for r in rows if r["ratio_factor"] is not None and r["counted"]]
    within = sum(1 for r in counted if max(r["ratio_factor"], 1 / r["ratio_factor"]) <= 1.25)
    print(f"ratios to {baseline} within 1.25×: {within} of {len(counted)}")
    print_generative(llm_rows)


def print_generative(rows: list[dict]) -> None:
    """The generative leave-one-out table: each published LLM point projected from the others."""
    print()
    print("| target | model | precision | ISL/OSL | batch | published tok/s | roofline tok/s | efficiency "
          "| projected tok/s (left out) | projected ÷ published | fitted from | target left out: projected ÷ published "
          "| fitted from |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        batch = r["batch"] or f"max ({r['inferred_batch']} fit)"
        print(f"| {r['target']} | {r['model']} | {r['precision']} | {r['isl']}/{r['osl']} | {batch} | "
              f"{r['published_tokens_per_s']:,.1f} | {r['bound_tokens_per_s']:,.1f} | {r['efficiency']:.3g} | "
              f"{_fmt(r['projected_tokens_per_s'], 6)} | {_fmt(r['factor'])} | {r['fitted_from'] or '—'} | "
              f"{_fmt(r['factor_target_out'])} | {r['target_out_from'] or '—'} |")  # fmt: skip
    for key, what in (("factor", "point left out"), ("factor_target_out", "its target left out")):
        spread, row = worst([{**r, "counted": True} for r in rows], key)
        where = (
            f" ({row['target']} {row['isl']}/{row['osl']} batch {row['batch'] or 'max'}: {row[key]:.3g})"
            if row
            else ""
        )
        print(f"worst generative projected ÷ published, {what}: {_fmt(spread)}×{where}")


if __name__ == "__main__":
    main()
