"""A glance at the incidents without SQLAlchemy: the CLI's read-only commands on the DB-API.

`gpu-oncall incidents` answers while an incident runs, often in a hurry. Importing SQLAlchemy
alone costs about 0.3 s on the machines we measure (more than the rest of the command), so the
four reads here (`incidents`, `incident INC-N`, `mttr`, `alerts`) are plain SQL over the
driver itself: the standard library's `sqlite3` (the file opened read-only) or `psycopg`.
Each read names only the columns the listing shows, converts them as the ORM's column types do
(aware UTC datetimes, JSON, booleans), and answers only from a database already at this
release's schema. Anything else (no database yet, an older schema, a URL or driver this module
does not open, any database error) returns None and the full path answers, with its errors.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from storage.refs import parse_incident_ref
from storage.revisions import VERSION_QUERY, is_head

T = TypeVar("T")
Kind = Literal["int", "float", "text", "bool", "json", "stamp"]


class Record:
    """One row, its columns as attributes (the shape `storage.tables` rows have)."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"Record({self._values!r})"


_STAMPS = (
    "fired_at",
    "detected_at",
    "diagnosed_at",
    "acknowledged_at",
    "mitigated_at",
    "resolved_at",
    "created_at",
)
_TEXTS = (
    "runbook",
    "target",
    "target_kind",
    "severity",
    "title",
    "state",
    "layer",
    "acknowledged_by",
    "fired_at_corrected_by",
    "fired_at_source",
    "kind",
)

INCIDENTS: dict[str, Kind] = {
    "id": "int",
    "confidence": "float",
    "gpu_hours_lost": "float",
    "culprits": "json",
    **{name: "text" for name in _TEXTS},
    **{name: "stamp" for name in _STAMPS},
}
"""The columns of `storage.tables.Incident` the listing reads (the drift test keeps the ORM
table and the migrations equal; tests/storage/test_glance.py keeps this list in step)."""

EVENTS: dict[str, Kind] = {
    "id": "int",
    "incident_id": "int",
    "at": "stamp",
    "kind": "text",
    "actor": "text",
    "summary": "text",
    "payload": "json",
    "pinned": "bool",
    "pinned_by": "text",
    "run_id": "text",
    "step_id": "text",
}
"""The columns of `storage.tables.TimelineEvent` a timeline shows (`views.EventRow`)."""

ACTIONS: dict[str, Kind] = {
    "id": "int",
    "incident_id": "int",
    "action": "text",
    "target": "text",
    "status": "text",
    "result": "json",
    "finished_at": "stamp",
}
"""The columns of `storage.tables.ActionRow` the GPU-hours read (bot/incidents/gpu_hours.py)."""

RECEIVED: dict[str, Kind] = {
    "id": "int",
    "fingerprint": "text",
    "status": "text",
    "starts_at": "stamp",
    "ends_at": "stamp",
    "alertname": "text",
    "labels": "json",
    "annotations": "json",
    "received_at": "stamp",
    "incident_id": "int",
    "runbook": "text",
}
"""The columns of `storage.tables.ReceivedAlert` the alert listing shows."""

RESOLVED = "resolved"
SQLITE_STAMP = "%Y-%m-%d %H:%M:%S.%f"
"""How SQLAlchemy's `DateTime` stores a value in SQLite (UTC wall time, always microseconds):
text that sorts in time order, so a bound value must be written the same way."""


class _Reader:
    """One open connection and its dialect's rules for parameters and values."""

    def __init__(self, connection: Any, *, sqlite: bool) -> None:
        self.connection = connection
        self.sqlite = sqlite

    def rows(self, columns: Mapping[str, Kind], sql: str, **params: Any) -> list[Record]:
        names = ", ".join(columns)
        statement = sql.format(columns=names)
        if not self.sqlite:
            statement = re.sub(r":(\w+)", r"%(\1)s", statement)
        bound = {k: self._bind(v) for k, v in params.items()}
        with closing(self.connection.cursor()) as cursor:
            cursor.execute(statement, bound)
            fetched = cursor.fetchall()
        return [
            Record({n: _value(v, kind) for (n, kind), v in zip(columns.items(), row, strict=True)})
            for row in fetched
        ]

    def _bind(self, value: Any) -> Any:
        if isinstance(value, datetime) and self.sqlite:
            return value.astimezone(UTC).strftime(SQLITE_STAMP)
        return value

    def schema_is_current(self) -> bool:
        with closing(self.connection.cursor()) as cursor:
            cursor.execute(VERSION_QUERY)
            return is_head([row[0] for row in cursor.fetchall()])


def _value(value: Any, kind: Kind) -> Any:
    """A driver's value as the ORM's column type gives it."""
    if value is None:
        return None
    if kind == "stamp":
        stamp = datetime.fromisoformat(value) if isinstance(value, str) else value
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
    if kind == "json":
        return json.loads(value) if isinstance(value, str | bytes) else value
    if kind == "bool":
        return bool(value)
    return value


def _sqlite_file(url: str) -> Path | None:
    """The file of a `sqlite:///path` URL (no query, not in memory), else None."""
    rest = url.removeprefix("sqlite:///")
    if rest == url or not rest or rest == ":memory:" or any(c in rest for c in "?%#"):
        return None
    return Path(rest)


def _postgres_conninfo(url: str) -> str | None:
    """A libpq URI for a `postgresql+psycopg://` or `postgresql://` URL, else None."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgresql+psycopg", "postgres"):
        return None
    return parts._replace(scheme="postgresql").geturl()


@contextmanager
def _reading(url: str) -> Iterator[_Reader | None]:
    """A reader of `url` on its driver, or None when this module does not open that URL or the
    database cannot be opened (the full path then answers, with its own errors)."""
    path = _sqlite_file(url)
    if path is not None:
        if not path.is_file():
            yield None
            return
        try:
            connection = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None
            )
        except sqlite3.Error:
            yield None
            return
        with closing(connection):
            connection.execute("PRAGMA busy_timeout=5000")
            connection.execute("BEGIN DEFERRED")  # one snapshot; reads never take the write lock
            yield _Reader(connection, sqlite=True)
        return
    conninfo = _postgres_conninfo(url)
    if conninfo is None:
        yield None
        return
    try:
        import psycopg
    except ImportError:  # the full path names the package to install
        yield None
        return
    try:
        server = psycopg.connect(conninfo, connect_timeout=5)
    except psycopg.Error:  # the server refusing or away: the full path explains
        yield None
        return
    with closing(server):
        yield _Reader(server, sqlite=False)


def _answer(url: str, read: Callable[[_Reader], T | None]) -> T | None:
    """`read` over a reader of `url`, or None: a database not at this release's schema, a URL
    this module does not open, or any database error (then the full path answers)."""
    try:
        with _reading(url) as reader:
            if reader is None or not reader.schema_is_current():
                return None
            return read(reader)
    except _database_errors():
        return None


def _database_errors() -> tuple[type[Exception], ...]:
    """The drivers' errors, psycopg's only when it was imported (a SQLite read never loads it)."""
    errors: tuple[type[Exception], ...] = (sqlite3.Error, ValueError, OSError)
    psycopg = sys.modules.get("psycopg")
    return errors if psycopg is None else (*errors, psycopg.Error)


def recent_incidents(url: str, *, open_only: bool, limit: int) -> Sequence[Record] | None:
    """The newest incidents first (not resolved ones only, with `open_only`), or None when the
    database is not at this release's schema (then the caller takes the full path)."""
    where = "WHERE state != :resolved " if open_only else ""
    sql = "SELECT {columns} FROM incidents " + where + "ORDER BY id DESC LIMIT :limit"
    return _answer(url, lambda r: r.rows(INCIDENTS, sql, resolved=RESOLVED, limit=limit))


@dataclass(frozen=True)
class IncidentRecord:
    """One incident with what `gpu-oncall incident` shows of it: its timeline and actions."""

    incident: Record
    events: Sequence[Record]
    actions: Sequence[Record]


def incident_record(url: str, ref: str | int) -> IncidentRecord | None:
    """The incident named `ref` with its timeline (time order, then insertion order) and its
    actions (claim order), in one transaction; None when the database is not at this release's
    schema, or holds no such incident (the full path then says which)."""
    incident_id = parse_incident_ref(ref)
    if incident_id is None:
        return None

    def read(reader: _Reader) -> IncidentRecord | None:
        found = reader.rows(INCIDENTS, "SELECT {columns} FROM incidents WHERE id = :id",
                            id=incident_id)  # fmt: skip
        if not found:
            return None
        events = reader.rows(
            EVENTS,
            "SELECT {columns} FROM timeline_events WHERE incident_id = :id ORDER BY at, id",
            id=incident_id,
        )
        actions = reader.rows(
            ACTIONS, "SELECT {columns} FROM actions WHERE incident_id = :id ORDER BY id",
            id=incident_id,
        )  # fmt: skip
        return IncidentRecord(found[0], events, actions)

    return _answer(url, read)


def resolved_incidents(url: str, *, since: datetime) -> Sequence[Record] | None:
    """As `storage.incidents.list_resolved`: incidents (not checks) resolved since `since`,
    oldest first; None when the database is not at this release's schema."""
    sql = (
        "SELECT {columns} FROM incidents WHERE resolved_at >= :since AND kind = :kind "
        "ORDER BY resolved_at, id"
    )
    return _answer(url, lambda r: r.rows(INCIDENTS, sql, since=since, kind="incident"))


def recent_alerts(url: str, *, limit: int) -> Sequence[Record] | None:
    """As `storage.alerts.list_alerts`: the newest received alerts first; None when the
    database is not at this release's schema."""
    sql = "SELECT {columns} FROM received_alerts ORDER BY received_at DESC, id DESC LIMIT :limit"
    return _answer(url, lambda r: r.rows(RECEIVED, sql, limit=limit))
