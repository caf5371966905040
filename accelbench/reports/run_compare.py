"""``accelbench report --compare OLD NEW``: build both tables with the same options and compare them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbench.reports.build import ReportOptions, build_report
from accelbench.reports.capacity import percentile_key
from accelbench.reports.compare import RULE, compare_markdown, compare_rows
from accelbench.reports.inputs import load_documents
from accelbench.util import atomic_write_text


def run_compare(
    old: str, new: str, catalog: Any, options: ReportOptions, out_dir: str | None, as_json: bool
) -> str:
    """Write compare.md (and compare.json) under ``out_dir``; return what to print."""
    old_data = build_report(load_documents([old]), catalog, options)
    new_data = build_report(load_documents([new]), catalog, options)
    rows = compare_rows(old_data, new_data)
    text_md = compare_markdown(rows, percentile_key(options.percentile))
    text_json = json.dumps({"rule": RULE, "rows": rows}, indent=2, sort_keys=True) + "\n"
    if out_dir is not None:
        atomic_write_text(Path(out_dir) / "compare.md", text_md)
        atomic_write_text(Path(out_dir) / "compare.json", text_json)
    return text_json if as_json else text_md
