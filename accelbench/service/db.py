"""The database: one engine per URL (SQLite in WAL mode or PostgreSQL), sessions, and migrations at start.

SQLite is the default (a file in the user's data directory), PostgreSQL (``postgresql+psycopg://…``) for a
shared server; the same ORM models and Alembic scripts serve both because only portable types are used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.errors import BadInputError, ServerError

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.engine.interfaces import DBAPIConnection
    from sqlalchemy.orm import Session, sessionmaker
    from sqlalchemy.pool import ConnectionPoolEntry

MIGRATIONS = Path(__file__).parent / "migrations"


def default_db_url() -> str:
    """An SQLite file in the user's data directory (e.g. ~/.local/share/accelbench/results.db)."""
    from platformdirs import user_data_dir

    return f"sqlite:///{Path(user_data_dir('accelbench')) / 'results.db'}"


def describe(url: str) -> str:
    """The URL without its password, for the line printed at start."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    # WAL: readers never block the writer and a killed server loses no committed transaction.
    # synchronous=NORMAL (SQLite's advice for WAL): a commit is not fsynced on its own, the WAL is at each
    # checkpoint, so a killed server still loses nothing it answered for and the file is never corrupted; an
    # operating-system crash or power cut may lose the last commits (pushes are idempotent: push again).
    # FULL fsyncs every commit, several ms each, which one-document pushes paid one by one.
    # busy_timeout: concurrent writers (several uvicorn threads) wait for the lock instead of failing.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def make_engine(url: str) -> Engine:
    """An engine for ``url``; a malformed URL or a missing driver is one clear line (BadInputError)."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise BadInputError(
            f"--db {url!r} is not a database URL (sqlite:///PATH or postgresql+psycopg://…)"
        ) from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise BadInputError(f"--db {describe(url)}: only sqlite and postgresql databases are supported")
    try:
        if parsed.get_backend_name() == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(parsed, connect_args={"check_same_thread": False, "timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
            return engine
        return create_engine(parsed, pool_pre_ping=True, pool_size=10, max_overflow=20)
    except NoSuchModuleError as err:
        raise BadInputError(f"--db {describe(url)}: no driver for it ({err})") from None


def migrate(engine: Engine) -> str:
    """Apply every Alembic migration (idempotent); returns the head revision. Unreachable → ServerError."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy.exc import OperationalError

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except OperationalError as err:
        reason = str(err.orig).strip().splitlines()[0] if err.orig else str(err).splitlines()[0]
        raise ServerError(f"database {describe(str(engine.url))} is not reachable: {reason}") from None
    return head_revision()


def head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head() or ""


def open_database(url: str) -> Engine:
    """Engine for ``url`` with the schema migrated to head: what the server and ``token`` commands use."""
    engine = make_engine(url)
    migrate(engine)
    return engine


def sessionmaker_for(engine: Engine) -> sessionmaker[Session]:
    from sqlalchemy.orm import sessionmaker

    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session committed on success and rolled back on error (CLI commands, scripts)."""
    factory = sessionmaker_for(engine)
    with factory() as session, session.begin():
        yield session
