"""Column types shared by the ORM tables (storage/tables.py) and the Core reads that skip the
ORM (storage/glance.py). SQLAlchemy only."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from storage.errors import NaiveDatetimeError


class UTCDateTime(TypeDecorator[datetime]):
    """A datetime column that only accepts aware datetimes and always returns aware UTC.

    SQLite has no timezone type and hands back naive values: they are stored as UTC wall time
    and re-labelled UTC on read. PostgreSQL stores `timestamptz`; values are normalised to UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise NaiveDatetimeError(value)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
