"""Shared fixtures: isolated Settings (a SQLite file under tmp_path) and shipped scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Settings, StorageSettings
from integrations.sim import SCENARIO_DIR


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"))


@pytest.fixture
def scenario_dir() -> Path:
    return Path(SCENARIO_DIR)
