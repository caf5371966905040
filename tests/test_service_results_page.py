"""The results list at 10,000 stored results: filters, paging and the query plans that keep a page cheap
(the listing walks the ``created_at`` index; it never sorts the table). Timings are in
``bench/results_page.py``; here, what can be checked exactly."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from accelbench.service import db, queries

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import results_page  # noqa: E402  (the bench script fills the table; the test checks plans and filters)

pytestmark = pytest.mark.slow  # 10,000 rows filled once for the module
N = 10_000
T0 = results_page.T0


def fill(session, n: int = N) -> None:
    results_page.fill(session, n)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    engine = db.open_database(f"sqlite:///{tmp_path_factory.mktemp('page') / 'r.db'}")
    with db.sessionmaker_for(engine)() as s:
        fill(s)
        yield s
    engine.dispose()


def _statements(session, run) -> list[tuple[str, Any]]:
    """The SQL (and parameters) ``run(session)`` sends: the plans checked are those of the real queries."""
    seen: list[tuple[str, Any]] = []

    def grab(_conn, _cursor, statement, parameters, _context, _many):
        seen.append((statement, parameters))

    engine = session.get_bind()
    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        run(session)
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    return seen


def _plans(session, run) -> list[str]:
    with session.get_bind().connect() as conn:
        return [" | ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
                for sql, params in _statements(session, run)]  # fmt: skip


def test_a_page_deep_in_ten_thousand_results_walks_the_index_not_a_sort(session):
    rows, total = queries.list_results(session, {}, 50, N - 50)
    assert total == N and len(rows) == 50 and rows[-1].run_id == "run-0"  # the oldest, last
    plans = _plans(session, lambda s: queries.list_results(s, {}, 50, N - 50))
    assert len(plans) == 2 and "COVERING INDEX" in plans[0], plans  # the count reads an index only
    assert "ix_results_visible_created" in plans[1] and "TEMP B-TREE" not in plans[1], plans[1]


def test_filters_combine_and_use_their_indexes(session):
    filters = {"model": "model-1", "target": "l4", "precision": "int8", "host": None, "origin": None,
               "since": T0 + timedelta(hours=1000), "until": T0 + timedelta(hours=2000)}  # fmt: skip
    rows, total = queries.list_results(session, filters, 500, 0)
    expected = [i for i in range(1000, 2000) if i % 4 == 1 and i % 3 == 1 and i % 2 == 1]
    assert total == len(expected) and sorted(int(r.run_id[4:]) for r in rows) == expected
    for plan in _plans(session, lambda s: queries.list_results(s, filters, 500, 0)):
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, plan
    for name, value in (("origin", "device-check"), ("host", "host-1"), ("model", "model-2")):
        count, page = _plans(session, lambda s, f={name: value}: queries.list_results(s, f, 50, 0))
        assert "COVERING INDEX" in count, (name, count)
        assert "TEMP B-TREE" not in page and ("visible_" + name in page or "model_visible" in page), (
            name,
            page,
        )


def test_the_dashboard_and_the_filter_choices_read_indexes_only(session):
    """Every query of the filter choices, the dashboard's model and target lists, its history links and the
    report fingerprint reads an index only: none reads a results row, let alone a document."""
    runs = [queries.filter_choices, queries.models_and_targets, queries.series, queries.fingerprint,
            lambda s: queries.fingerprint(s, "model-1")]  # fmt: skip
    for run in runs:
        for plan in _plans(session, run):
            assert "COVERING INDEX" in plan and "SCAN results" not in plan.replace("COVERING", ""), plan


def test_filter_choices_list_each_value_once(session):
    choices = queries.filter_choices(session)
    assert choices["model"] == [f"model-{i}" for i in range(4)]
    assert [h for h, _ in choices["host"]] == [f"host-{i}" for i in range(5)]
    first = choices["host"][0][1]
    assert json.loads(queries.document_texts(session, [first])[first])["run_id"]
