"""A fleet-wide alert storm as Alertmanager delivers it, and the database's duplicate census,
for the multi-replica tests and the replica benchmark.

`storm_scenario(nodes, per_rack=..., faulty=...)` is a simulated fleet (every replica loads the
same file, so all of them simulate the same nodes) with double-bit ECC errors on `faulty`.
`rack_webhooks(...)` builds one Alertmanager v4 webhook per rack (Alertmanager grouping by
`alertname` and `rack`), one GPUEccStorm alert per node carrying its `rack` label.
`census(url)` counts, with SQL on the bot's database (SQLite or PostgreSQL), the rows intake and
the engine wrote and every way one of them could be a duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import text

from simulator.topology import NODE_PREFIX, node_name_width
from storage.db import make_engine
from tests.servers.oncall import alert, webhook

ALERTNAME = "GPUEccStorm"


def node_name(index: int, nodes: int) -> str:
    return f"{NODE_PREFIX}{index:0{node_name_width(nodes)}d}"


def rack_of(index: int, per_rack: int) -> str:
    return f"rack-{index // per_rack:02d}"


def storm_scenario(path: Path, *, nodes: int, per_rack: int, faulty: Sequence[int]) -> Path:
    """Write a scenario of `nodes` nodes in racks of `per_rack`, DBE errors on GPU 4 of each
    node index in `faulty` since nine minutes ago; return its path."""
    names = [node_name(i, nodes) for i in faulty]
    body = {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {
            "name": f"replicas-storm-{nodes}",
            "description": f"DBE errors on {len(names)} of {nodes} nodes, every node alerting.",
        },
        "fleet": {"nodes": nodes, "nodes_per_rack": per_rack, "dcgm_counters": "all"},
        "faults": [{"kind": "ecc_dbe_storm", "nodes": names, "gpu": 4, "start": "-9m"}],
        "trigger": {"storm": {"alertname": ALERTNAME, "nodes": ",".join(names)}},
    }
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def rack_webhooks(*, nodes: int, per_rack: int, starts: datetime) -> list[dict[str, Any]]:
    """One webhook per rack holding a firing GPUEccStorm for each of its nodes."""
    bodies = []
    for first in range(0, nodes, per_rack):
        alerts = [
            alert(ALERTNAME, {"Hostname": node_name(i, nodes), "rack": rack_of(i, per_rack)},
                  starts_at=starts)
            for i in range(first, min(first + per_rack, nodes))
        ]  # fmt: skip
        bodies.append(webhook(alerts))
    return bodies


@dataclass(frozen=True)
class Census:
    """Rows in the bot's database and, for each kind, how many are surplus duplicates."""

    alerts: int
    duplicate_alerts: int
    """Alerts stored more than once under one (fingerprint, status, startsAt)."""
    unattached_alerts: int
    incidents: int
    duplicate_incidents: int
    """Incidents beyond the first of one group key (open or not)."""
    incident_kinds: dict[str, int]
    runs: int
    duplicate_runs: int
    """Runs beyond the first of one incident and runbook."""
    run_statuses: dict[str, int]
    actions: list[tuple[str, str, str]]
    """(action, target, status) of every action row, sorted."""
    duplicate_actions: int
    """Action rows beyond the first of one (run, action, target)."""
    open_work: int
    """Work items still pending."""


def census(url: str) -> Census:
    """Count rows and duplicates with SQL on the database at `url`."""
    engine = make_engine(url)
    try:
        with engine.connect() as db:

            def one(sql: str) -> int:
                return int(db.execute(text(sql)).scalar_one())

            def surplus(table: str, columns: str) -> int:
                return one(
                    f"SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM {table}"
                    f" GROUP BY {columns}) AS g"
                )

            kinds = db.execute(
                text("SELECT target_kind, COUNT(*) FROM incidents GROUP BY target_kind")
            ).all()
            statuses = db.execute(text("SELECT status, COUNT(*) FROM runbook_runs GROUP BY status"))
            actions = db.execute(text("SELECT action, target, status FROM actions")).all()
            return Census(
                alerts=one("SELECT COUNT(*) FROM received_alerts"),
                duplicate_alerts=surplus("received_alerts", "fingerprint, status, starts_at"),
                unattached_alerts=one(
                    "SELECT COUNT(*) FROM received_alerts WHERE incident_id IS NULL"
                ),
                incidents=one("SELECT COUNT(*) FROM incidents"),
                duplicate_incidents=surplus("incidents", "group_key"),
                incident_kinds={str(k): int(n) for k, n in kinds},
                runs=one("SELECT COUNT(*) FROM runbook_runs"),
                duplicate_runs=surplus("runbook_runs", "incident_id, runbook"),
                run_statuses={str(s): int(n) for s, n in statuses},
                actions=sorted((str(a), str(t), str(s)) for a, t, s in actions),
                duplicate_actions=surplus("actions", "run_id, action, target"),
                open_work=one("SELECT COUNT(*) FROM work_items WHERE state = 'pending'"),
            )
    finally:
        engine.dispose()
