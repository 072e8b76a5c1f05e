"""The settings of the CLI's read-only commands (`incidents`, `incident`, `mttr`), read without
pydantic-settings when that changes nothing.

The reads need two settings: where the database is (`storage.url`) and where the incident pages
are (`pages.base_url`). Both are plain strings that `Settings` takes as written, so reading them
from the environment and `.env` gives the same values `Settings` would. Every other case is the
full reader's (`bot.cli.main.read_settings`): any other `GPU_ONCALL_*` variable set, a name in
another case, a `.env` line without a value. Then `read_light` returns None and the command reads
`Settings`, so its validation rules and error messages are the only ones: this module forks none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from storage.defaults import DEFAULT_DATABASE_URL

STORAGE_URL = "GPU_ONCALL_STORAGE__URL"
PAGES_BASE_URL = "GPU_ONCALL_PAGES__BASE_URL"
LIGHT = frozenset({STORAGE_URL, PAGES_BASE_URL})
"""The only variables the light reader takes; any other `GPU_ONCALL_*` one sends the command to
the full reader."""
PREFIX = "GPU_ONCALL_"
ENV_FILE = Path(".env")
"""Where `Settings` reads its `.env` (relative to the working directory, as pydantic-settings)."""


@dataclass(frozen=True)
class ReadConfig:
    """What a read-only command needs of the settings."""

    storage_url: str
    pages_base_url: str | None = None

    def incident_url(self, ref: str) -> str | None:
        """As `PagesSettings.incident_url`: the page of incident `ref`, or None when unset."""
        base = self.pages_base_url
        return None if base is None else f"{base.rstrip('/')}/incidents/{ref}"


def read_light(
    environ: Mapping[str, str] | None = None, *, env_file: Path = ENV_FILE
) -> ReadConfig | None:
    """The read settings from the environment over `.env`, or None when only the full reader
    may say what they are (see the module's docstring)."""
    values: dict[str, str] = {}
    if env_file.is_file():
        from dotenv import dotenv_values

        found = _taken(dotenv_values(env_file))
        if found is None:
            return None
        values.update(found)
    found = _taken(os.environ if environ is None else environ)
    if found is None:
        return None
    values.update(found)  # the environment wins over .env, as in Settings
    return ReadConfig(
        storage_url=values.get(STORAGE_URL, DEFAULT_DATABASE_URL),
        pages_base_url=values.get(PAGES_BASE_URL),
    )


def _taken(variables: Mapping[str, str | None]) -> dict[str, str] | None:
    """The light variables among `variables`, or None if any other setting variable is there."""
    taken: dict[str, str] = {}
    for name, value in variables.items():
        if not name.upper().startswith(PREFIX):
            continue
        if name not in LIGHT or value is None:
            return None
        taken[name] = value
    return taken
