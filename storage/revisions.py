"""Whether a database is already at this release's schema revision, answered without importing
Alembic: one `SELECT` of `alembic_version` against the head read from the revision files.

Every command that opens the database asks this first (`db.create_schema`); only a database
that is not current (new, older, or unreadable here) pays for Alembic (storage/migrating.py).
The head is the revision no other revision names as its `down_revision` (Alembic's rule);
files it cannot read make the answer "not current", so Alembic decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

VERSIONS_DIR = Path(__file__).resolve().parent / "migrations" / "versions"
_FIELD = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*['\"]?([\w]+)['\"]?", re.M)


@cache
def known_head() -> str | None:
    """The newest revision among the files (None when there is not exactly one head)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in VERSIONS_DIR.glob("*.py"):
        fields = dict(_FIELD.findall(path.read_text(encoding="utf-8")))
        if "revision" in fields:
            revisions.add(fields["revision"])
        if fields.get("down_revision", "None") != "None":
            parents.add(fields["down_revision"])
    heads = revisions - parents
    return next(iter(heads)) if len(heads) == 1 else None


def schema_is_current(engine: Engine) -> bool:
    """True when the database's `alembic_version` is this release's head. Any failure (no such
    table, no database yet) is "no": the caller then runs the full Alembic path."""
    from sqlalchemy import exc, text

    from storage.engines import read_only

    try:  # a read: on SQLite it neither waits for nor takes the write lock
        with read_only(engine).connect() as connection:
            rows = connection.execute(text(VERSION_QUERY)).all()
    except exc.SQLAlchemyError:
        return False
    return is_head([row[0] for row in rows])


VERSION_QUERY = "SELECT version_num FROM alembic_version"
"""The revision a database is at (one row), read the same way with or without SQLAlchemy."""


def is_head(versions: Sequence[str]) -> bool:
    """Whether the `alembic_version` rows read (`VERSION_QUERY`) are this release's head."""
    head = known_head()
    return head is not None and list(versions) == [head]
