"""``accelbench report --compare OLD NEW [--history DIR...]``: build both tables with the same options and
compare them; earlier runs of the same configuration (``--history``) give the between-run variance."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import Catalog
from accelbench.reports.build import ReportData, build_report
from accelbench.reports.capacity import percentile_key
from accelbench.reports.compare import RULE, compare_markdown, compare_rows
from accelbench.reports.groups import GroupKey, group_key
from accelbench.reports.inputs import load_documents
from accelbench.reports.options import ReportOptions
from accelbench.reports.repeats import repeat_key
from accelbench.reports.rows import ReportRow
from accelbench.util import atomic_write_text


def _sources(data: ReportData) -> set[str]:
    return {s for r in data.rows for s in (r.sources or "").split(";") if s}


def _loads(data: ReportData, key: GroupKey) -> set[str]:
    """The load profiles the runs of ``key`` ran on one side (empty when it has none)."""
    return {repeat_key(r.doc)[1] for r in data.groups[key].results} if key in data.groups else set()


def _same_load(old: ReportData, new: ReportData, key: GroupKey) -> bool:
    """Whether the old side's runs of ``key`` ran the new side's load profile (then the old run is history)."""
    return key in old.groups and _loads(old, key) <= _loads(new, key)


def history_rows(
    paths: Sequence[str], catalog: Catalog, options: ReportOptions, like: ReportData, exclude: set[str]
) -> dict[GroupKey, list[ReportRow]]:
    """One measured row per earlier result document (each a single run) of the same (model, precision,
    target) *and load profile* as a group of ``like`` (the new side); documents in ``exclude`` left out."""
    loads = {key: _loads(like, key) for key in like.groups}
    found: dict[GroupKey, list[ReportRow]] = {}
    for doc in load_documents(list(paths)):
        key = group_key(doc)
        if key is None or repeat_key(doc)[1] not in loads.get(key, ()):
            continue
        try:
            rows = build_report([doc], catalog, options).rows
        except BadInputError:
            continue  # a document that names no target or precision cannot be one of these runs
        for row in rows:
            if (
                row.status == "measured"
                and row.target == doc.target
                and row.capacity_rps
                and row.sources not in exclude
            ):
                found.setdefault(key, []).append(row)
    return found


def run_compare(
    old: str,
    new: str,
    catalog: Catalog,
    options: ReportOptions,
    out_dir: str | None,
    as_json: bool,
    history: Sequence[str] = (),
) -> str:
    """Write compare.md (and compare.json) under ``out_dir``; return what to print."""
    old_data = build_report(load_documents([old]), catalog, options)
    new_data = build_report(load_documents([new]), catalog, options)
    earlier = history_rows(history, catalog, options, new_data, _sources(new_data)) if history else {}
    for row in old_data.rows:  # the old run is one of the earlier runs (as the service's history counts it)
        key = (row.model, row.precision, row.target)
        runs = earlier.get(key)
        if (
            runs is not None
            and row.status == "measured"
            and row.capacity_rps
            and int(row.runs or 1) == 1
            and row.sources not in {r.sources for r in runs}
            and _same_load(old_data, new_data, key)
        ):
            runs.append(row)
    rows = compare_rows(old_data, new_data, earlier)
    text_md = compare_markdown(rows, percentile_key(options.percentile))
    text_json = (
        json.dumps({"rule": RULE, "rows": [r.as_json() for r in rows]}, indent=2, sort_keys=True) + "\n"
    )
    if out_dir is not None:
        atomic_write_text(Path(out_dir) / "compare.md", text_md)
        atomic_write_text(Path(out_dir) / "compare.json", text_json)
    return text_json if as_json else text_md
