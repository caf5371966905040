"""The results service (``accelbench server``): a second composition root beside ``accelbench/cli.py``.

It wires the stages (documents, reports) behind an HTTP API and server-rendered pages; no stage imports it.
FastAPI, SQLAlchemy and Alembic are imported only inside this package (the ``service`` extra). Its clients
(push, run --push, submit, the agent) are ``accelbench/client/``, which imports nothing from here. What the
JSON routes answer is typed in ``accelbench/answers.py``, below both: the server returns it, the client
reads it.

  the app
    app.py             the app factory: ``create_app(Settings(...))``, a FastAPI app bound to one database
    server.py          ``accelbench server``: migrate, print where the database is, run uvicorn
    state.py           what one app holds, typed (``app.state.service``): settings, database, catalog, reports
    deps.py            FastAPI dependencies shared by the API and the pages (a database session per request)
  storage
    db.py              engine (SQLite WAL / PostgreSQL), sessions, Alembic upgrade at start
    models.py          ORM tables: results, variants, tokens (portable types only)
    campaign_models.py ORM tables of campaigns, their jobs and the runner agents
    migrations/        Alembic scripts; revision ids are stable names ("0001_results", ...)
  results
    ingest.py          POST /api/v1/results: size limit, validation, content-hash idempotency
    validate.py        pushed documents checked with ``accelbench.documents``: a 422 naming the field
    queries.py         reading stored results: listings, one result with provenance, report documents
    history.py         one (model, target, precision) over time, with ``report --compare``'s rule
    report_cache.py    reports from stored documents, kept per app and rebuilt after a push (``Reports``)
    build_process.py   what the niced report build processes run and hand back
    query_options.py   the report's options as query parameters (the API's and the pages')
  campaigns
    jobs.py            the job state machine and lease arithmetic (pure)
    queue.py           the job queue in the database: submit, claim atomically, heartbeat, finish, expire
    campaign_reads.py  what both campaign routers read (campaigns, jobs, runners, a campaign's report)
    campaigns.py       the campaign and queue API: submit campaigns, register runners, claim and work jobs
    runner_probe.py    the typed, bounded probe a runner registers with (what /runners reads of it)
    campaign_pages.py  the pages of campaigns and runners
  HTTP
    api.py             the JSON API routes under /api/v1 (health, results, report, history)
    web.py             the HTML pages (Jinja2, no JavaScript): dashboard, report, result, history, login
    templates/         the Jinja2 templates of the pages
    tables.py          the pages' tables: cells for people and raw values for their CSV
    auth.py            API tokens (prefixed, sha256-hashed, scoped) and the FastAPI dependency ``require``
    connections.py     time limits on every phase of a connection (head, body, keep-alive) and a connection cap
    errors.py          every error is one line of JSON ``{"error": "..."}`` with the right status
    limits.py          limits that hold before any route or token check (ASGI middleware, outermost)
    framing.py         request framing a proxy can trust: an ambiguous body length is 400 and the connection closed
    security.py        browser-facing defences: security headers, a cross-site check on unsafe methods
"""
