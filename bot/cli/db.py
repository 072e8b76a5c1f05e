"""`gpu-oncall db upgrade` / `db current`: the database's schema revision."""

from __future__ import annotations

from bot.cli.terminal import Terminal
from bot.config import Settings
from storage.db import session_scope


def db_upgrade(settings: Settings, term: Terminal) -> int:
    """`gpu-oncall db upgrade`: migrate the database to this release's schema (creating it when
    empty; a release-0.1.0 SQLite file is upgraded in place), then compute the `/metrics`
    histograms from the incidents if they never were. Safe to run from several replicas."""
    from bot.incidents import figures
    from storage.db import make_engine, redact
    from storage.migrating import upgrade

    db = make_engine(settings.storage.url)
    try:
        before, after = upgrade(db)
        with session_scope(db) as session:
            rebuilt = figures.ensure_built(session)
    finally:
        db.dispose()
    where = redact(settings.storage.url)
    if before == after:
        term.line(f"{where}: already at revision {after} (this release's schema)")
    else:
        term.line(f"{where}: upgraded from revision {before or 'none'} to {after}")
    if rebuilt:
        term.line(f"{where}: /metrics histograms computed from the incidents")
    return 0

def db_current(settings: Settings, term: Terminal) -> int:
    """`gpu-oncall db current`: the database's schema revision and this release's.
    Exit 0 when they match, 1 when the database needs `gpu-oncall db upgrade`."""
    from storage.db import make_engine, redact
    from storage.migrating import current, head

    db = make_engine(settings.storage.url)
    try:
        at, newest = current(db), head()
    finally:
        db.dispose()
    term.line(f"database: {redact(settings.storage.url)}")
    term.line(f"current:  {at or 'none (empty, or made by release 0.1.0)'}")
    term.line(f"head:     {newest} (this release)")
    if at != newest:
        term.line("run `gpu-oncall db upgrade` to migrate")
        return 1
    return 0
