"""The CLI's light reads print what the full path prints, on SQLite and PostgreSQL.

`incidents`, `incident INC-N`, `mttr` and `alerts` answer from the database driver's rows
(storage/glance.py) with the settings read by bot/cli/read_config.py when nothing needs more;
the full path reads `Settings` and the ORM. Aspects: on one database holding an open and a
resolved incident (timeline with an approval's impact, a cordon with its GPUs, a routed alert,
stored GPU-hours) every command, as text and as JSON, prints the same on both paths, and the
light path did answer (it did not hand over to the full one); an alert no incident took, an
unknown incident and a database not at this release's schema go the full way (None).
"""

from __future__ import annotations

import io
import json
from argparse import Namespace
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from bot.cli import listings
from bot.cli.main import dispatch
from bot.cli.read_config import ReadConfig
from bot.cli.terminal import Terminal
from bot.clock import FakeClock, SystemClock
from bot.config import PagesSettings, Settings, StorageSettings
from bot.incidents import lifecycle
from bot.incidents.states import IncidentState
from bot.incidents.timeline import EventKind
from bot.wiring.database import open_database
from storage import actions, alerts, glance, incidents
from storage.db import session_scope

BASE = "https://oncall.example.com"


def seed(engine: Engine, incident_id: int, run_id: str, clock: FakeClock) -> int:
    """A resolved incident with the records its views read, one open incident, one alert."""
    t0 = SystemClock().now() - timedelta(days=1)  # `mttr` windows end now
    with session_scope(engine) as session:
        incidents.append_event(
            session,
            incident_id=incident_id,
            at=t0 + timedelta(minutes=1),
            kind=EventKind.APPROVAL_REQUESTED,
            actor="bot",
            summary="cordon + drain gpu-node-03?",
            payload={"proposals": [{"impact": {"jobs": [{"job": "train-7", "gpus_total": 16}]}}]},
            run_id=run_id,
        )
        note = incidents.append_event(
            session,
            incident_id=incident_id,
            at=t0 + timedelta(minutes=2),
            kind="note",
            actor="cli:alice",
            summary="saw XID 48",
        )
        note.pinned, note.pinned_by = True, "cli:alice"
        session.add(note)
        actions.claim_action(
            session,
            key="k1",
            run_id=run_id,
            step_id="cordon",
            action="cordon",
            target="gpu-node-03",
            params={},
            at=t0 + timedelta(minutes=2),
        )
        actions.finish_action(
            session,
            key="k1",
            status="succeeded",
            at=t0 + timedelta(minutes=3),
            result={"data": {"gpus": 8}},
        )
        stored, _ = alerts.record_alert(
            session,
            fingerprint="f1",
            status="firing",
            starts_at=t0,
            ends_at=None,
            alertname="GPUEccStorm",
            labels={"Hostname": "gpu-node-03"},
            annotations={"summary": "ECC"},
            received_at=t0,
        )
        alerts.attach_alert(
            session, alert_id=stored.id or 0, incident_id=incident_id, runbook="ecc-storm"
        )
        row = incidents.get_incident(session, incident_id)
        assert row is not None
        lifecycle.transition(
            session,
            row,
            to=IncidentState.RESOLVED,
            at=t0 + timedelta(minutes=30),
            actor="bot",
            reason="verified",
        )
        other = lifecycle.open_incident(
            session,
            runbook="nccl-hang",
            target="job-9",
            target_kind="job",
            severity="warning",
            title="NCCL hang",
            fired_at=t0,
            detected_at=t0 + timedelta(minutes=1),
            actor="bot",
        )
        return other.id or 0


def printed(call: Any) -> tuple[Any, str]:
    out = io.StringIO()
    result = call(Terminal(out, color=False))
    return result, out.getvalue()


COMMANDS: tuple[dict[str, Any], ...] = (
    {"command": "incidents", "all": False, "json": False},
    {"command": "incidents", "all": True, "json": False},
    {"command": "incidents", "all": True, "json": True},
    {"command": "incident", "incident": "INC-{id}", "json": False},
    {"command": "incident", "incident": "{id}", "json": True},
    {"command": "alerts", "unrouted": False, "limit": 50, "json": False},
    {"command": "alerts", "unrouted": False, "limit": 1, "json": True},
    {"command": "mttr", "since": "2w", "by": "runbook", "json": False},
    {"command": "mttr", "since": "2w", "by": "week", "json": False},
)


@pytest.fixture
def full_engines(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The full path's engines, disposed after the test (the CLI's process exits instead)."""
    opened: list[Engine] = []

    def open_and_keep(settings: Settings) -> Engine:
        opened.append(open_database(settings))
        return opened[-1]

    monkeypatch.setattr(listings, "_db", open_and_keep)
    yield
    for db in opened:
        db.dispose()


@pytest.mark.usefixtures("full_engines")
def test_the_light_reads_print_what_the_full_path_prints(
    engine: Engine, db_url: str, incident_id: int, run_id: str, clock: FakeClock
) -> None:
    seed(engine, incident_id, run_id, clock)
    settings = Settings(storage=StorageSettings(url=db_url), pages=PagesSettings(base_url=BASE))
    config = ReadConfig(storage_url=db_url, pages_base_url=BASE)
    for options in COMMANDS:
        values = {
            k: v.format(id=incident_id) if isinstance(v, str) else v for k, v in options.items()
        }
        args = Namespace(**values)
        light, light_out = printed(lambda term, args=args: listings.light_read(args, config, term))
        full, full_out = printed(lambda term, args=args: dispatch(args, settings, term))
        assert (light, full) == (0, 0), values
        assert light_out == full_out, values
        assert full_out.strip(), values
    _, shown = printed(
        lambda term: dispatch(
            Namespace(**COMMANDS[4] | {"incident": str(incident_id)}), settings, term
        )
    )
    data = json.loads(shown)
    assert (
        data["gpu_hours"]["total"] is not None
        and data["page"] == f"{BASE}/incidents/INC-{incident_id}"
    )


def test_what_only_the_full_path_knows_goes_the_full_way(
    engine: Engine, db_url: str, tmp_path: Path, incident_id: int, clock: FakeClock
) -> None:
    config = ReadConfig(storage_url=db_url)
    with session_scope(engine) as session:  # an alert no incident took: its reason needs routing
        alerts.record_alert(
            session,
            fingerprint="f2",
            status="firing",
            starts_at=clock.now(),
            ends_at=None,
            alertname="NoSuchAlert",
            labels={},
            annotations={},
            received_at=clock.now(),
        )
    args = Namespace(command="alerts", unrouted=False, limit=50, json=False)
    assert printed(lambda term, args=args: listings.light_read(args, config, term)) == (None, "")
    unknown = Namespace(command="incident", incident="INC-999", json=False)
    assert printed(lambda term: listings.light_read(unknown, config, term)) == (None, "")
    assert glance.incident_record(db_url, incident_id) is not None
    fresh = ReadConfig(storage_url=f"sqlite:///{tmp_path / 'fresh' / 'oncall.db'}")
    for command in ("incidents", "incident", "mttr", "alerts"):
        args = Namespace(
            command=command,
            all=True,
            json=False,
            incident="INC-1",
            since="7d",
            by="runbook",
            unrouted=False,
            limit=5,
        )
        answer, _ = printed(lambda term, args=args: listings.light_read(args, fresh, term))
        assert answer is None, command


@pytest.mark.sqlite_only(reason="the light settings reader is about variables, not a backend")
def test_other_settings_send_the_command_to_the_full_reader(tmp_path: Path, backend: str) -> None:
    from bot.cli.read_config import read_light

    env = tmp_path / ".env"
    assert read_light({}, env_file=env) == ReadConfig("sqlite:///.gpu-oncall/oncall.db")
    url = "postgresql+psycopg://bot@db/oncall"
    assert read_light({"GPU_ONCALL_STORAGE__URL": url, "PATH": "/bin"}, env_file=env) == (
        ReadConfig(url)
    )
    env.write_text(f"GPU_ONCALL_STORAGE__URL={url}\nGPU_ONCALL_PAGES__BASE_URL={BASE}\n")
    assert read_light({}, env_file=env) == ReadConfig(url, BASE)
    assert read_light({"GPU_ONCALL_STORAGE__URL": "sqlite:///x.db"}, env_file=env) == ReadConfig(
        "sqlite:///x.db", BASE
    )  # the environment wins over .env, as in Settings
    for other in (
        {"GPU_ONCALL_LOG__LEVEL": "DEBUG"},
        {"gpu_oncall_storage__url": url},
        {"GPU_ONCALL_STORAGE": "{}"},
        {"GPU_ONCALL_STORAGE__MIGRATE": "false"},
    ):
        assert read_light(other, env_file=env) is None, other
    env.write_text("GPU_ONCALL_STORAGE__URL\n")  # no value: only Settings says what that means
    assert read_light({}, env_file=env) is None
