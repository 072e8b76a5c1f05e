"""Fixtures for the webhook tests: Settings whose server requires the bearer token."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN

from bot.config import ServerSettings, Settings, StorageSettings


@pytest.fixture
def bot_settings(tmp_path: Path) -> Settings:
    return Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=2),
    )
