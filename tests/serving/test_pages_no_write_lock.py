"""A page render holds no SQLite lock (issue 20): `IncidentPages` reads under a read-only
transaction (it begins DEFERRED, never IMMEDIATE) and renders after it has ended.

Covers: while the incident page renders, another connection takes the write lock at once (a
27 s render used to turn 3 of 5 webhooks into 503s); while a read-only session is open and has
read, a writer still gets the lock; the list page answers from the same kind of session.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.config import PagesSettings
from bot.serving import pages as pages_module
from bot.serving.exchange import Head, Request
from bot.serving.pages import IncidentPages
from storage.db import create_schema, make_engine, read_scope, session_scope
from storage.tables import Incident
from tests.incidents.incident_helpers import open_ecc_storm

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "oncall.db"


@pytest.fixture
def engine(db_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{db_path}")
    create_schema(engine)
    with session_scope(engine) as session:
        open_ecc_storm(session, FakeClock(T0), fired=None)
    yield engine
    engine.dispose()


def writer_gets_the_lock_at_once(db_path: Path) -> bool:
    """Whether another connection can begin a write transaction without waiting."""
    other = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


def pages(engine: Engine) -> IncidentPages:
    return IncidentPages(
        db=engine, settings=PagesSettings(auth="none"), runbooks=lambda: ["ecc-storm"],
        now=lambda: T0,
    )


def test_the_incident_page_renders_outside_any_transaction(
    engine: Engine, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    render = pages_module.render_postmortem

    def observing(*args: Any, **kwargs: Any) -> str:
        seen.append(writer_gets_the_lock_at_once(db_path))
        return render(*args, **kwargs)

    # Observation only: the render is where the lock was held; we look from inside it.
    monkeypatch.setattr(pages_module, "render_postmortem", observing)
    reply = pages(engine).handle(Request(Head("GET", "/incidents/INC-1"), b""))
    assert reply.status == 200
    assert seen == [True]


def test_a_read_only_session_never_takes_the_write_lock(engine: Engine, db_path: Path) -> None:
    with read_scope(engine) as session:
        assert session.get(Incident, 1) is not None
        assert writer_gets_the_lock_at_once(db_path)
    with session_scope(engine) as session:  # a write session does take it
        assert session.get(Incident, 1) is not None
        assert not writer_gets_the_lock_at_once(db_path)


def test_the_list_page_answers_from_a_read_only_session(engine: Engine) -> None:
    reply = pages(engine).handle(Request(Head("GET", "/incidents", "state=open"), b""))
    assert reply.status == 200
    assert b"INC-1" in reply.body
