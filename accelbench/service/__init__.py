"""The results service (``accelbench server``): a second composition root beside ``accelbench/cli.py``.

It wires the stages (documents, reports) behind an HTTP API and server-rendered pages; no stage imports it.
FastAPI, SQLAlchemy and Alembic are imported only inside this package (the ``service`` extra). Its clients
(push, run --push, submit, the agent) are ``accelbench/client/``, which imports nothing from here.

    db.py          engine (SQLite WAL / PostgreSQL), sessions, Alembic upgrade at start
    models.py      ORM tables: results, variants, tokens (portable types only)
    migrations/    Alembic scripts; revision ids are stable names ("0001_results", ...)
    auth.py        API tokens (prefixed, sha256-hashed, scoped) and the FastAPI dependency ``require``
    errors.py      every error is one line of JSON ``{"error": "..."}`` with the right status
    ingest.py      POST /api/v1/results: size limit, validation, content-hash idempotency
    api.py         the JSON API routes; web.py the HTML pages; app.py the app factory
    server.py      ``accelbench server``: migrate, print where the database is, run uvicorn
"""
