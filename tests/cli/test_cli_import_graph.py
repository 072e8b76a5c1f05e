"""The CLI imports only what each command uses (issue 13, part 7): checked on real processes by
the modules loaded when the command ends, not by timing (timings live in bench/cli_startup.py).

Covers: `--help` and a subcommand's `--help` load neither pydantic-settings, SQLAlchemy,
LangGraph, Slack nor Kubernetes; the incident reads (`incidents`, `incident`, `alerts`, `mttr`)
and a human verb (`ack`) answer without LangGraph, LangChain, Slack, Kubernetes or Alembic (on a
database already at this release's schema); and the fast schema check agrees with Alembic.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage.db import create_schema, make_engine
from storage.migrating import head
from storage.revisions import known_head, schema_is_current

HEAVY = ("langgraph", "langchain_core", "slack_bolt", "slack_sdk", "kubernetes")
PROBE = """
import sys
from bot.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --help exits inside argparse
    code = exc.code
loaded = sorted({name.split(".")[0] for name in sys.modules})
sys.stdout.flush()
sys.stderr.write("LOADED " + " ".join(loaded) + "\\n")
raise SystemExit(code)
"""


def loaded_by(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    """Run the CLI in a fresh interpreter; return its exit code and the top-level packages it
    had imported when the command finished."""
    env = dict(os.environ)
    env["GPU_ONCALL_STORAGE__URL"] = f"sqlite:///{tmp_path / 'oncall.db'}"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    return int(done.returncode), set(line.split()[1:])


@pytest.fixture
def current_db(tmp_path: Path) -> Path:
    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(engine)
    engine.dispose()
    return tmp_path


@pytest.mark.parametrize("args", [("--help",), ("incident", "--help"), ("mttr", "--help")])
def test_help_loads_no_settings_database_engine_or_clients(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, loaded = loaded_by(tmp_path, *args)
    assert code == 0
    assert not loaded & {*HEAVY, "pydantic_settings", "sqlalchemy", "sqlmodel", "alembic"}


@pytest.mark.parametrize(
    "args",
    [
        ("incidents", "--all"),
        ("incident", "INC-1"),
        ("alerts",),
        ("mttr", "--by", "week"),
        ("ack", "INC-1"),
    ],
)
def test_incident_reads_and_verbs_load_no_engine_slack_or_kubernetes(
    current_db: Path, args: tuple[str, ...]
) -> None:
    _, loaded = loaded_by(current_db, *args)  # INC-1 does not exist: exit 2, same imports
    assert "sqlalchemy" in loaded  # the probe did run the command
    assert not loaded & {*HEAVY, "alembic"}


def test_the_fast_schema_check_agrees_with_alembic(tmp_path: Path) -> None:
    assert known_head() == head()
    engine = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        assert not schema_is_current(engine)  # empty: Alembic must create it
        create_schema(engine)
        assert schema_is_current(engine)
    finally:
        engine.dispose()
