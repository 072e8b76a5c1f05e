"""`gpu-oncall db upgrade` / `db current` and the start-up schema check, as real subprocesses.

Covers: an empty database is behind (exit 1) until `db upgrade` creates it; a release-0.1.0
SQLite file is refused with the command to run when `GPU_ONCALL_STORAGE__MIGRATE=false`, then
upgraded in place by `db upgrade` with its incident intact; with the default (migrate at
start-up) a command upgrades it by itself; both commands work on PostgreSQL.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

RELEASE_DUMP = Path(__file__).resolve().parents[1] / "storage" / "fixtures" / "release-0.1.0.sql"


def cli(
    tmp_path: Path, *args: str, url: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full["GPU_ONCALL_STORAGE__URL"] = url or f"sqlite:///{tmp_path / 'oncall.db'}"
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args],
        cwd=tmp_path,
        env=full,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _release_database(tmp_path: Path) -> None:
    legacy = sqlite3.connect(tmp_path / "oncall.db")
    legacy.executescript(RELEASE_DUMP.read_text())
    legacy.close()


def test_an_empty_database_is_behind_until_db_upgrade(tmp_path: Path) -> None:
    behind = cli(tmp_path, "db", "current")
    assert behind.returncode == 1
    assert "run `gpu-oncall db upgrade`" in behind.stdout
    upgraded = cli(tmp_path, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "upgraded from revision none to" in upgraded.stdout
    assert cli(tmp_path, "db", "current").returncode == 0
    again = cli(tmp_path, "db", "upgrade")
    assert "already at revision" in again.stdout


def test_a_release_database_is_refused_without_migrate_then_upgraded_in_place(
    tmp_path: Path,
) -> None:
    _release_database(tmp_path)
    refused = cli(tmp_path, "incidents", "--all", GPU_ONCALL_STORAGE__MIGRATE="false")
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert "run `gpu-oncall db upgrade`" in refused.stderr
    upgraded = cli(tmp_path, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    listed = cli(tmp_path, "incidents", "--all", GPU_ONCALL_STORAGE__MIGRATE="false")
    assert listed.returncode == 0, listed.stderr
    assert "INC-1" in listed.stdout and "resolved" in listed.stdout


def test_by_default_a_command_migrates_a_release_database_itself(tmp_path: Path) -> None:
    _release_database(tmp_path)
    listed = cli(tmp_path, "incidents", "--all")
    assert listed.returncode == 0, listed.stderr
    assert "INC-1" in listed.stdout
    assert cli(tmp_path, "db", "current").returncode == 0


def test_db_commands_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    assert cli(tmp_path, "db", "current", url=postgres_url).returncode == 1
    upgraded = cli(tmp_path, "db", "upgrade", url=postgres_url)
    assert upgraded.returncode == 0, upgraded.stderr
    current = cli(tmp_path, "db", "current", url=postgres_url)
    assert current.returncode == 0
    assert "postgresql+psycopg://oncall@127.0.0.1" in current.stdout
