"""Opening the database for a command: the engine, its schema made ready and the `/metrics`
histograms built. Light on purpose (SQLAlchemy and the storage package only, never the engine,
Slack or Kubernetes), so the CLI's incident reads start at once; `wiring` re-exports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from bot.incidents import figures
from storage.db import create_schema, make_engine, session_scope

if TYPE_CHECKING:
    from bot.config import Settings


def open_database(settings: Settings) -> Engine:
    """The database engine, its schema made ready (migrated, or checked when
    `storage.migrate` is false) and the `/metrics` histograms built if they never were."""
    storage = settings.storage
    db = make_engine(storage.url, pool_size=storage.pool_size, max_overflow=storage.max_overflow)
    try:
        create_schema(db, migrate=storage.migrate)
        with session_scope(db) as session:
            figures.ensure_built(session)
    except BaseException:
        db.dispose()
        raise
    return db
