"""The bot's own HTTP server (`bot.serving.app`) on 127.0.0.1:<ephemeral> over a fresh runtime, for
tests that talk to it the way Alertmanager does: over HTTP, with the bearer token.

`running_bot` opens the runtime (SQLite under tmp_path, the simulated fleet of a scenario),
serves the app with the production server (uvicorn, `bot.serving.app.RunningServer`) on a background
thread and yields it with an httpx client; on exit it stops the server gracefully (in-flight
requests finish, queued triage is handed back to the database). `webhook` builds an
Alertmanager v4 body.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import func, select

from bot.config import Settings
from bot.serving.app import RunningServer, create_app
from bot.wiring.runtime import Runtime, open_runtime
from storage.db import session_scope
from storage.tables import Incident, ReceivedAlert, RunbookRun, TimelineEvent

TOKEN = "test-webhook-token"


@dataclass
class Bot:
    rt: Runtime
    server: RunningServer
    http: httpx.Client

    @property
    def url(self) -> str:
        return self.server.url

    def post_alerts(self, body: Any, *, token: str | None = TOKEN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if isinstance(body, bytes | str):
            return self.http.post("/alerts", content=body, headers=headers)
        return self.http.post("/alerts", json=body, headers=headers)

    def settle(self, seconds: float = 60.0) -> None:
        """Wait (bounded) until every queued triage run has finished or stopped at approval."""
        assert self.server.app.workers.wait_idle(seconds), "triage runs still busy"


@contextmanager
def running_bot(settings: Settings, *, scenario: Path | None = None) -> Iterator[Bot]:
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        server = RunningServer(create_app(settings, rt)).start()
        try:
            with httpx.Client(base_url=server.url, timeout=30.0) as http:
                yield Bot(rt, server, http)
        finally:
            server.stop()


def alert(
    alertname: str,
    labels: Mapping[str, str],
    *,
    starts_at: datetime,
    status: str = "firing",
    ends_at: datetime | None = None,
    severity: str = "critical",
) -> dict[str, Any]:
    """One alert as Alertmanager sends it (fingerprint = hash of the label set)."""
    full = {"alertname": alertname, "severity": severity, **labels}
    fingerprint = hashlib.sha256(json.dumps(sorted(full.items())).encode()).hexdigest()[:16]
    return {
        "status": status,
        "labels": full,
        "annotations": {"summary": f"{alertname} on {next(iter(labels.values()), '')}"},
        "startsAt": starts_at.isoformat(),
        "endsAt": ends_at.isoformat() if ends_at else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.example/graph",
        "fingerprint": fingerprint,
    }


def webhook(alerts: Sequence[Mapping[str, Any]], *, status: str | None = None) -> dict[str, Any]:
    """An Alertmanager v4 webhook body holding `alerts`."""
    first = alerts[0]["labels"] if alerts else {}
    statuses = {a["status"] for a in alerts}
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{first.get("alertname", "")}"}}',
        "truncatedAlerts": 0,
        "status": status or ("firing" if "firing" in statuses else "resolved"),
        "receiver": "gpu-oncall",
        "groupLabels": {"alertname": first.get("alertname", "")},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example",
        "alerts": list(alerts),
    }


def row_counts(db: Engine) -> dict[str, int]:
    """How many alerts, incidents, timeline events and runs the database holds."""
    tables: dict[str, type[Any]] = {
        "alerts": ReceivedAlert,
        "incidents": Incident,
        "events": TimelineEvent,
        "runs": RunbookRun,
    }
    with session_scope(db) as session:
        return {
            name: int(session.exec(select(func.count()).select_from(table)).one())
            for name, table in tables.items()
        }
