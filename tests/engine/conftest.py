"""The engine tests' runtime: the simulated fleet of `ecc-dbe-storm` (gpu-node-03's double-bit
ECC errors) on a fresh SQLite file, or with `@ON_BOTH` on that file and on a real PostgreSQL
(its saver holds blobs per channel version, its recorder's transactions are the server's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings, StorageSettings
from bot.wiring.runtime import Runtime, open_runtime

ON_BOTH = pytest.mark.parametrize("rt", ["sqlite", "postgresql"], indirect=True)
"""Run the test on the SQLite file and on a real PostgreSQL."""


@pytest.fixture
def rt(request: pytest.FixtureRequest, settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    if getattr(request, "param", "sqlite") == "postgresql":
        url = str(request.getfixturevalue("postgres_url"))
        settings = Settings(storage=StorageSettings(url=url))
    with open_runtime(
        settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True
    ) as runtime:
        yield runtime
