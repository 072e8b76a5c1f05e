"""Shared fixtures: isolated Settings (a SQLite file under tmp_path), shipped scenarios, and one
real PostgreSQL server per test session (each test that needs it makes its own database)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings, StorageSettings
from simulator import SCENARIO_DIR
from tests.servers.postgres import PostgresServer, start_postgres


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"))


@pytest.fixture
def scenario_dir() -> Path:
    return Path(SCENARIO_DIR)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Debian's PostgreSQL on 127.0.0.1, started once for the whole session."""
    with start_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The SQLAlchemy URL of a new, empty database on the session's PostgreSQL."""
    return postgres_server.url(postgres_server.create_database())
