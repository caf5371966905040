"""Migrations 0007 and 0008 on a database that already holds results, on SQLite and PostgreSQL: each document moves to
``result_documents`` byte for byte, host labels are backfilled as the pages showed them, a result a job links
to keeps its link (SQLite's foreign keys are on), the listing reads the new indexes, and the downgrade puts
the documents back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from accelbench.reports.formatting import host_label
from accelbench.service import db, queries
from accelbench.service.campaign_models import Campaign, Job, JobResult
from accelbench.service.models import utcnow

pytestmark = pytest.mark.slow
DOC = (
    Path(__file__).parent
    / "data"
    / "reports"
    / "cpu-local"
    / "resnet50__cpu-local__fp32__closed-http-b1.json"
)


def _alembic(conn, action, revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    cfg.attributes["connection"] = conn
    action(cfg, revision)


def test_0007_moves_documents_out_and_backfills_host_labels(db_url):
    engine = db.make_engine(db_url)
    try:
        with engine.begin() as conn:
            _alembic(conn, command.upgrade, "0006_queue")
        text = json.dumps(json.loads(DOC.read_text()), indent=3) + "\n"  # an unusual layout, kept as is
        doc = json.loads(text)
        with engine.begin() as conn:
            result_id = conn.execute(
                sa.text(
                    "INSERT INTO results (content_hash, schema, run_id, source, model, target, precision, host, "
                    "created_at, received_at, summary, document) VALUES ('ab', 'accelbench.result/1', 'r1', "
                    "'r1.json', 'resnet50', 'cpu-local', 'fp32', 'h', :now, :now, '{}', :doc) RETURNING id"
                ),
                {"now": utcnow(), "doc": text},
            ).scalar_one()
        with db.sessionmaker_for(engine)() as session:
            campaign = Campaign(name="c", spec="", projected=[], created_by="t", created_at=utcnow())
            session.add(campaign)
            session.flush()
            # the columns of 0006 only (the model has later ones: offered_at, 0008)
            job_id = session.execute(
                sa.insert(Job).values(campaign_id=campaign.id, target="cpu-local", labels={}, status="done",
                                      attempts=1, max_attempts=3, lease_s=30.0, log_tail="", history=[])
                .returning(Job.id)
            ).scalar_one()  # fmt: skip
            session.add(JobResult(job_id=job_id, result_id=result_id))
            session.commit()

        db.migrate(engine)  # to head: what a server does at start
        columns = {c["name"] for c in sa.inspect(engine).get_columns("results")}
        assert "document" not in columns and "host_label" in columns
        assert "offered_at" in {c["name"] for c in sa.inspect(engine).get_columns("jobs")}  # 0008
        with db.sessionmaker_for(engine)() as session:
            assert queries.document_texts(session, [result_id]) == {result_id: text}
            rows, total = queries.list_results(session, {"origin": None}, 10, 0)
            assert total == 1 and rows[0].host_label == host_label(doc["provenance"]["host"])
            assert session.execute(sa.select(JobResult.result_id)).scalars().all() == [result_id]

        with engine.begin() as conn:
            _alembic(conn, command.downgrade, "0006_queue")
        with engine.connect() as conn:
            back = conn.execute(sa.text("SELECT document FROM results WHERE id = :i"), {"i": result_id})
            assert back.scalar_one() == text
            assert "result_documents" not in sa.inspect(conn).get_table_names()
            assert "offered_at" not in {c["name"] for c in sa.inspect(conn).get_columns("jobs")}
    finally:
        engine.dispose()
