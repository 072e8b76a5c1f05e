"""Fixtures for storage tests: a database, its engine, a fake clock, and the incident and run rows
that other rows refer to.

The storage suite is a conformance suite: every test that uses `db_url` (or `engine`) runs twice,
on a SQLite file under tmp_path and on a fresh database of the session's PostgreSQL
(tests/servers/postgres.py), so both backends keep the same rules. A test about SQLite only (WAL
pragmas, file paths) says so with `@pytest.mark.sqlite_only(reason)` and runs once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import incidents, runs
from storage.db import create_schema, make_engine, session_scope

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

IncidentFactory = Callable[..., int]


BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): a storage test about SQLite only, not run on PostgreSQL"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test needing `backend` (through `db_url`, `engine`...) runs on each backend."""
    if "backend" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("sqlite_only")
    if only is not None and not (only.args or only.kwargs.get("reason")):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: sqlite_only needs a reason")
    metafunc.parametrize("backend", ("sqlite",) if only is not None else BACKENDS)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path / 'state' / 'oncall.db'}"


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    create_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def other_engine(db_url: str, engine: Engine) -> Iterator[Engine]:
    """A second engine on the same file: another process or replica, with its own connections."""
    other = make_engine(db_url)
    yield other
    other.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def make_incident(engine: Engine, clock: FakeClock) -> IncidentFactory:
    def make(target: str = "gpu-node-03") -> int:
        with session_scope(engine) as session:
            incident = incidents.create_incident(
                session,
                runbook="ecc-storm",
                target=target,
                target_kind="node",
                severity="critical",
                title=f"ECC error storm on {target}",
                at=clock.now(),
                fired_at=clock.now(),
                detected_at=clock.now(),
            )
            assert incident.id is not None
            return incident.id

    return make


@pytest.fixture
def incident_id(make_incident: IncidentFactory) -> int:
    return make_incident()


@pytest.fixture
def run_id(engine: Engine, incident_id: int, clock: FakeClock) -> str:
    with session_scope(engine) as session:
        runs.create_run(
            session,
            run_id="0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            incident_id=incident_id,
            runbook="ecc-storm",
            inputs={"node": "gpu-node-03"},
            at=clock.now(),
        )
    return "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
