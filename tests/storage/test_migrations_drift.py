"""Schema migrations (Alembic): the revisions build exactly the models' schema, on SQLite and on
PostgreSQL; a database of release 0.1.0 upgrades in place with its data; a fresh database is
created and stamped; a database behind this release is refused with the command to run.

Aspects: migrations-from-scratch equal the models (autogenerate finds nothing), legacy upgrade
keeps every row, `current`/`head`, the start-up check, concurrent upgrades of one database.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Engine

from storage.db import make_engine
from storage.errors import SchemaOutOfDateError
from storage.migrating import BASELINE, alembic_config, check_current, current, drift, head, upgrade

RELEASE_DUMP = Path(__file__).with_name("fixtures") / "release-0.1.0.sql"


@pytest.fixture(params=["sqlite", "postgres"])
def empty_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
    else:
        url = f"sqlite:///{tmp_path / 'oncall.db'}"
    engine = make_engine(url)
    yield engine
    engine.dispose()


def test_the_migrations_build_exactly_the_models_schema(empty_engine: Engine) -> None:
    with empty_engine.begin() as connection:
        command.upgrade(alembic_config(connection), "head")  # every revision, from nothing
    assert drift(empty_engine) == []
    assert current(empty_engine) == head()


def test_a_fresh_database_is_created_from_the_models_and_stamped(empty_engine: Engine) -> None:
    assert upgrade(empty_engine) == (None, head())
    assert drift(empty_engine) == []
    assert upgrade(empty_engine) == (head(), head())  # idempotent


def test_a_release_0_1_0_sqlite_file_upgrades_in_place_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "oncall.db"
    legacy = sqlite3.connect(path)
    legacy.executescript(RELEASE_DUMP.read_text())
    legacy.close()
    engine = make_engine(f"sqlite:///{path}")
    with pytest.raises(SchemaOutOfDateError, match="gpu-oncall db upgrade"):
        check_current(engine)
    before, after = upgrade(engine)
    assert (before, after) == (None, head())
    assert drift(engine) == []
    check_current(engine)
    with engine.connect() as connection:
        counts = {
            table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("incidents", "timeline_events", "actions", "approvals", "findings")
        }
    assert counts == {
        "incidents": 1,
        "timeline_events": 35,
        "actions": 3,
        "approvals": 1,
        "findings": 3,
    }
    engine.dispose()


def test_the_baseline_is_the_first_revision() -> None:
    engine = make_engine("sqlite://")
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), BASELINE)
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    assert version == BASELINE


def test_replicas_upgrading_one_postgres_database_together_apply_it_once(
    postgres_url: str,
) -> None:
    engines = [make_engine(postgres_url) for _ in range(4)]
    results: list[tuple[str | None, str | None]] = []
    errors: list[BaseException] = []

    def run(engine: Engine) -> None:
        try:
            results.append(upgrade(engine))
        except Exception as exc:  # noqa: BLE001  (a thread's failure, asserted below)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(engine,)) for engine in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(results, key=str) == sorted(
        [(None, head())] + [(head(), head())] * 3, key=str
    )
    assert drift(engines[0]) == []
    for engine in engines:
        engine.dispose()
