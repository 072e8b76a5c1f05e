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
from datetime import UTC, datetime, timedelta
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
loaded = sorted(sys.modules)
sys.stdout.flush()
sys.stderr.write("LOADED " + " ".join(loaded) + "\\n")
raise SystemExit(code)
"""


def loaded_by(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    """Run the CLI in a fresh interpreter; return its exit code and the top-level packages it
    had imported when the command finished."""
    code, modules = modules_loaded_by(tmp_path, *args)
    return code, {name.split(".")[0] for name in modules}


def modules_loaded_by(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    """Run the CLI in a fresh interpreter; return its exit code and every module it had
    imported when the command finished."""
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
    assert "storage" in loaded  # the probe did run the command
    assert not loaded & {*HEAVY, "alembic"}


@pytest.fixture
def incident_db(current_db: Path) -> Path:
    """A current database holding INC-1, resolved (its GPU-hours stored) with a routed alert:
    what the light reads answer from."""
    from bot.incidents import lifecycle
    from bot.incidents.states import IncidentState
    from storage import alerts
    from storage.db import session_scope

    at = datetime.now(UTC) - timedelta(hours=2)
    engine = make_engine(f"sqlite:///{current_db / 'oncall.db'}")
    with session_scope(engine) as session:
        row = lifecycle.open_incident(
            session,
            runbook="ecc-storm",
            target="gpu-node-03",
            target_kind="node",
            severity="critical",
            title="ECC storm",
            fired_at=at,
            detected_at=at,
            actor="bot",
        )
        stored, _ = alerts.record_alert(
            session,
            fingerprint="f1",
            status="firing",
            starts_at=at,
            ends_at=None,
            alertname="GPUEccStorm",
            labels={"Hostname": "gpu-node-03"},
            annotations={},
            received_at=at,
        )
        alerts.attach_alert(
            session, alert_id=stored.id or 0, incident_id=row.id or 0, runbook="ecc-storm"
        )
        lifecycle.transition(
            session, row, to=IncidentState.RESOLVED, at=at + timedelta(minutes=30), actor="bot"
        )
    engine.dispose()
    return current_db


LIGHT_NEVER = (
    "pydantic_settings",  # the settings are read by bot/cli/read_config.py
    "bot.config",
    "sqlalchemy",  # the driver's own rows (storage/glance.py): SQLAlchemy's import alone is ~0.3 s
    "sqlmodel",
    "storage.tables",
    "alembic",  # the schema is checked by its revision, not migrated
    "yaml",  # no runbook is read
    "jinja2",  # no template is compiled
    "bot.engine.catalog",  # nor the catalog linked (bot.engine.summaries, pure, is fine)
    "bot.engine.loading",
    "bot.engine.running",
    "bot.wiring",
    "bot.intake.commands",  # the `/gpu` grammar: `mttr` parses its window with bot.intake.windows
    *HEAVY,
)
"""What the light read-only commands may not load (a prefix names the package and its modules)."""


@pytest.mark.parametrize(
    "args",
    [
        ("incidents",),
        ("incidents", "--all", "--json"),
        ("incident", "INC-1"),
        ("mttr", "--since", "1d"),
        ("alerts",),
    ],
)
def test_each_read_only_command_answers_on_the_light_path(
    incident_db: Path, args: tuple[str, ...]
) -> None:
    code, modules = modules_loaded_by(incident_db, *args)
    assert code == 0
    assert "storage.glance" in modules  # the light path did answer
    loaded = sorted(
        name
        for name in modules
        for never in LIGHT_NEVER
        if name == never or name.startswith(never + ".")
    )
    assert not loaded, f"{' '.join(args)} loaded {loaded}"


def test_classify_log_loads_no_engine_storage_adapters_or_simulator(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n")
    code, loaded = loaded_by(tmp_path, "classify-log", str(log))
    assert code == 0
    assert "yaml" in loaded  # the probe did run the command: the catalog was read
    assert not loaded & {*HEAVY, "sqlalchemy", "sqlmodel", "httpx", "simulator", "jinja2"}


def test_the_fast_schema_check_agrees_with_alembic(tmp_path: Path) -> None:
    assert known_head() == head()
    engine = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        assert not schema_is_current(engine)  # empty: Alembic must create it
        create_schema(engine)
        assert schema_is_current(engine)
    finally:
        engine.dispose()
