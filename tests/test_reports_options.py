"""The report's options have one definition (reports/options.py): `accelbench report`'s flags and the results
server's query parameters both come from it, with its defaults, and reach the report as the same options."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

from accelbench.commands.reports import report_cmd
from accelbench.errors import BadInputError
from accelbench.reports.build import ReportOptions
from accelbench.reports.options import CLASSIC, DEFAULTS, GENERATIVE, option_specs, options_from

# the server's query parameter for each option it takes (the same names as the flags, as a query spells them)
QUERY_NAMES = {"slo_ms": "slo_p99_ms", "price_overrides": "price"}
# kv_dtype (issue 48): the CLI's for now; the server's reports take the engines' default KV dtype
NOT_ON_THE_SERVER = {"target_tokens_per_s", "fit_models", "fit_context", "kv_dtype"}


def cli_options(*args: str) -> ReportOptions:
    """What `accelbench report RESULTS ARGS...` would report with, parsed by the command itself."""
    ctx = report_cmd.make_context("report", ["results", *args])
    names = {f.name for f in fields(ReportOptions)}
    return options_from({k: v for k, v in ctx.params.items() if k in names})


def test_every_option_is_a_flag_of_the_report_command_in_its_group():
    flags = {p.name: p for p in report_cmd.params}
    assert {s.group for s in option_specs()} == {CLASSIC, GENERATIVE}
    for spec in option_specs():
        assert spec.name in flags and spec.flag in flags[spec.name].opts, spec.name
    # the order of --help: the classic options, --out and --json, the generative ones, then --compare
    order = [p.name for p in report_cmd.params]
    last_classic = max(order.index(s.name) for s in option_specs(CLASSIC))
    first_generative = min(order.index(s.name) for s in option_specs(GENERATIVE))
    assert (
        last_classic
        < order.index("out_dir")
        < order.index("as_json")
        < first_generative
        < order.index("compare")
    )


def test_no_flags_are_the_defaults_and_each_flag_reaches_its_option():
    assert cli_options() == ReportOptions() == DEFAULTS
    got = cli_options("--slo-p99-ms", "50", "--percentile", "95", "--project", "l4", "--project", "l40s,t4",
                      "--price", "cpu-local=0.05", "--headroom", "0.5", "--include-failed", "--context", "4096",
                      "--fit-model", "llama-3.1-8b", "--min-tokens-per-user", "20", "--baseline", "l4")  # fmt: skip
    assert (got.slo_ms, got.percentile, got.project, dict(got.price_overrides)) == (
        50.0, "95", ("l4", "l40s", "t4"), {"cpu-local": 0.05}
    )  # fmt: skip
    assert (got.headroom, got.include_failed, got.fit_context, got.fit_models) == (
        0.5,
        True,
        4096,
        ("llama-3.1-8b",),
    )
    assert (got.min_tokens_per_user, got.baseline, got.price_basis) == (20.0, "l4", DEFAULTS.price_basis)


def test_bad_option_values_are_refused_by_the_ranges_of_the_definition():
    import click

    for args in (
        ["--headroom", "1"],
        ["--slo-p99-ms", "0"],
        ["--context", "0"],
        ["--price-basis", "monthly"],
    ):
        with pytest.raises(click.BadParameter):
            cli_options(*args)
    with pytest.raises(BadInputError, match="expected TARGET_ID=USD_PER_HOUR"):
        cli_options("--price", "cpu-local")


def test_the_servers_query_parameters_default_to_the_same_definition():
    query_options = pytest.importorskip("accelbench.service.query_options")
    params = inspect.signature(query_options.report_options).parameters
    for spec in option_specs():
        if spec.name in NOT_ON_THE_SERVER:
            assert QUERY_NAMES.get(spec.name, spec.name) not in params
            continue
        name = QUERY_NAMES.get(spec.name, spec.name)
        default = params[name].default
        if spec.meta.get("multiple"):
            assert default == [], name  # a repeatable query parameter: none given
        else:
            assert default == spec.default, name
    # the page with no query reports with the options the CLI uses with no flags (and caches them as one)
    assert query_options.default_page_options() == ReportOptions()
