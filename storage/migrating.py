"""Schema migrations with Alembic: `gpu-oncall db upgrade` / `db current`, and the start-up check.

The revisions live in `storage/migrations/versions/` (0001 is the schema of release 0.1.0).
A new, empty database gets `create_all` and is stamped at head (Alembic's recipe for fresh
databases; the drift test keeps models and migrations equal). A database of release 0.1.0,
made by `create_all` before migrations existed, is stamped at 0001 and upgraded in place.
On PostgreSQL every upgrade runs under an advisory lock, so replicas starting together apply
each revision once. Alembic is configured in code: no alembic.ini, no environment reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.autogenerate.api import AutogenContext
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel
from sqlmodel.sql.sqltypes import AutoString

from storage import tables as _tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from storage.columns import UTCDateTime
from storage.engines import read_only
from storage.errors import SchemaOutOfDateError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
BASELINE = "0001"
"""The revision of release 0.1.0's schema, which databases made before migrations existed have."""

#: Arbitrary constant: the advisory-lock key that serialises migrations across replicas.
_MIGRATE_LOCK_KEY = 0x6D696772617465  # "migrate"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision this release knows."""
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None
    return revision


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: not under migrations: empty, or release 0.1.0)."""
    with read_only(engine).connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Bring the database to `revision`; returns (before, after). Fresh databases are created
    from the models and stamped; release-0.1.0 databases are stamped at the baseline first."""
    with _migration_lock(engine) as connection:
        before = MigrationContext.configure(connection).get_current_revision()
        config = alembic_config(connection)
        if before is None and not _has_tables(connection):
            SQLModel.metadata.create_all(connection)
            command.stamp(config, "head")
        else:
            if before is None:
                command.stamp(config, BASELINE)
            command.upgrade(config, revision)
        after = MigrationContext.configure(connection).get_current_revision()
        return before, after


def check_current(engine: Engine) -> None:
    """Refuse to run on a database behind (or ahead of) this release's schema."""
    at, newest = current(engine), head()
    if at == newest:
        return
    with read_only(engine).connect() as connection:
        if at is None and not _has_tables(connection):
            return  # empty: the caller creates it
    raise SchemaOutOfDateError(
        f"the database schema is at revision {at or 'none (release 0.1.0)'}, this release needs "
        f"{newest}: run `gpu-oncall db upgrade` (or set GPU_ONCALL_STORAGE__MIGRATE=true)"
    )


def drift(engine: Engine) -> list[Any]:
    """What autogenerate would write: differences between the models and the database."""
    with read_only(engine).connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "render_item": render_item}
        )
        return list(compare_metadata(context, SQLModel.metadata))


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Render the models' custom column types as plain SQLAlchemy types in revisions, so a
    revision never changes when the models' Python classes do."""
    if type_ == "type" and isinstance(obj, AutoString):
        return "sa.String()"
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _has_tables(connection: Connection) -> bool:
    names = set(inspect(connection).get_table_names())
    return bool(names & set(SQLModel.metadata.tables))


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction; on PostgreSQL holding a transaction-scoped advisory lock."""
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATE_LOCK_KEY})")
        yield connection
