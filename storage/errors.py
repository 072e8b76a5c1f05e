"""Errors raised by `storage/`. SQLAlchemy and sqlite3 errors are translated into these at the
session boundary (`db.session_scope`) with `raise ... from exc`; nothing above `storage/` needs to
know which database library is underneath.

Every message is fit for a human on call: what failed, where, and what to do. Each class says
whether a retry can help (`retryable`).
"""

from __future__ import annotations

from datetime import datetime


class StorageError(Exception):
    """Root of every error raised by `storage/`."""

    retryable = False


class InvalidDatabaseUrlError(StorageError, ValueError):
    """The database URL cannot be parsed or names an unsupported backend."""


class BackendNotInstalledError(StorageError):
    """The database URL needs a Python package that is not installed."""

    def __init__(self, what: str, *, package: str) -> None:
        super().__init__(f"{what} needs the '{package}' package: pip install {package}")
        self.package = package


class DatabaseUnavailableError(StorageError):
    """The database cannot be reached or opened (file permissions, server down, bad URL)."""

    retryable = True


class SchemaOutOfDateError(StorageError):
    """The database's schema revision is not the one this release needs (run `db upgrade`)."""


class DatabaseBusyError(DatabaseUnavailableError):
    """Another writer held the database lock for longer than the busy timeout."""


class ConflictError(StorageError):
    """A write broke a uniqueness or foreign-key rule (e.g. an unknown incident id)."""


class NaiveDatetimeError(StorageError, ValueError):
    """A timezone-naive datetime reached the database; every stored time must be aware UTC."""

    def __init__(self, value: datetime) -> None:
        super().__init__(
            f"refusing to store naive datetime {value.isoformat()}: pass a timezone-aware UTC time "
            "(from the injected Clock)"
        )


class InvalidValueError(StorageError, ValueError):
    """A value outside a column's vocabulary (e.g. an unknown run or approval state)."""


class RecordNotFoundError(StorageError, LookupError):
    """A row that an update needs (run, action, approval) does not exist."""


class ApprovalNotPendingError(StorageError):
    """An approval was already decided (approved, rejected or expired) and cannot change."""


class ApprovalExpiredError(ApprovalNotPendingError):
    """An approval's expiry passed before it was approved; it can only be expired or rejected."""


class ActionNotRunningError(StorageError):
    """`finish_action` on an action that is not running (already finished, or never claimed)."""


class IncidentAlreadyOpenError(ConflictError):
    """Another open incident already exists for the same (runbook, target) group key."""

    def __init__(self, group_key: str, *, incident_id: int | None) -> None:
        ref = f"INC-{incident_id}" if incident_id is not None else "another incident"
        super().__init__(f"{ref} is already open for {group_key}; attach to it instead")
        self.group_key = group_key
        self.incident_id = incident_id
