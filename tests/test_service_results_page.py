"""The results list at 10,000 stored results: filters, paging and the query plans that keep a page cheap
(the listing walks the ``created_at`` index; it never sorts the table). Timings are in
``bench/results_page.py``; here, what can be checked exactly."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from accelbench.service import db, queries
from accelbench.service.models import Result

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


def _plan(session, query) -> str:
    sql = str(query.compile(session.get_bind(), compile_kwargs={"literal_binds": True}))
    return " | ".join(str(r[-1]) for r in session.execute(sa.text("EXPLAIN QUERY PLAN " + sql)))


def test_a_page_deep_in_ten_thousand_results_walks_the_index_not_a_sort(session):
    rows, total = queries.list_results(session, {}, 50, N - 50)
    assert total == N and len(rows) == 50 and rows[-1].run_id == "run-0"  # the oldest, last
    query = sa.select(Result).order_by(Result.created_at.desc(), Result.id.desc()).limit(50).offset(N - 50)
    plan = _plan(session, query)
    assert "ix_results_created_at" in plan and "TEMP B-TREE" not in plan, plan


def test_filters_combine_and_use_their_indexes(session):
    filters = {"model": "model-1", "target": "l4", "precision": "int8", "host": None, "origin": None,
               "since": T0 + timedelta(hours=1000), "until": T0 + timedelta(hours=2000)}  # fmt: skip
    rows, total = queries.list_results(session, filters, 500, 0)
    expected = [i for i in range(1000, 2000) if i % 4 == 1 and i % 3 == 1 and i % 2 == 1]
    assert total == len(expected) and sorted(int(r.run_id[4:]) for r in rows) == expected
    query = sa.select(Result).where(Result.model == "model-1", Result.target == "l4")
    assert "USING INDEX" in _plan(session, query)
    for name in ("model", "target", "precision", "host"):
        plan = _plan(session, sa.select(getattr(Result, name)).distinct())
        assert "COVERING INDEX" in plan, (name, plan)  # the filter choices never read the documents


def test_filter_choices_list_each_value_once(session):
    choices = queries.filter_choices(session)
    assert choices["model"] == [f"model-{i}" for i in range(4)]
    assert [h for h, _ in choices["host"]] == [f"host-{i}" for i in range(5)]
    assert json.loads(session.get(Result, choices["host"][0][1]).document)["run_id"]
