"""Test helper: `gpu-oncall` as a real subprocess in a temporary directory, on the SQLite
database `oncall.db` there, with no terminal on stdin; and what `/metrics` serves from that
database.

Shared by the CLI tests that run the command line itself (tests/cli/test_cli_incident_verbs.py,
test_cli_safety_switches.py, test_cli_identity.py, test_cli_postmortem_html.py,
test_cli_config_errors.py, tests/incidents/test_gpu_hours.py, and for the exposition
tests/deploy/test_grafana_dashboard.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from bot.config import Settings, StorageSettings
from bot.intake.counters import IntakeCounters
from bot.serving.exposition import scrape
from bot.wiring.database import open_database


def run_cli(
    tmp_path: Path, *args: str, env: Mapping[str, str | None] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m bot.cli.main ARGS` in `tmp_path`; `env` is laid over this process's environment
    (a None value removes the variable)."""
    full = dict(os.environ)
    full["GPU_ONCALL_STORAGE__URL"] = f"sqlite:///{tmp_path / 'oncall.db'}"
    for name, value in (env or {}).items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def cli_output(tmp_path: Path, *args: str, timeout: float = 120) -> str:
    """`run_cli`'s standard output, asserting it succeeded."""
    done = run_cli(tmp_path, *args, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def metrics_exposition(tmp_path: Path) -> str:
    """The `/metrics` exposition of the database `oncall.db` in `tmp_path` (intake counters at
    zero)."""
    settings = Settings(storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"))
    db = open_database(settings)
    try:
        return scrape(db, IntakeCounters())
    finally:
        db.dispose()
