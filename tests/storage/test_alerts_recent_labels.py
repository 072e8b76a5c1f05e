"""The storm check's light read (storage.alerts.recent_firing_labels, issue 21 item 2) on both
backends: one row per distinct label set among the alerts `recent_firing` returns, with the
earliest startsAt it fired with.

Covers: an alert that fired five times in the window is one row, at its first start; another
node's alert is another row; alerts received before the window, of another name, or resolved
are not read; on SQLite the query searches the storm-window index.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from storage import alerts
from storage.db import session_scope

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def new(fingerprint: str, node: str, *, starts: datetime, status: str = "firing",
        name: str = "GPUEccStorm") -> alerts.NewAlert:  # fmt: skip
    labels = {"alertname": name, "severity": "critical", "Hostname": node}
    return alerts.NewAlert(fingerprint, status, starts, None, name, labels)


def test_one_row_per_alert_at_its_first_start(engine: Engine) -> None:
    flapping = [new("a", "gpu-node-03", starts=T0 - timedelta(minutes=m)) for m in range(5)]
    with session_scope(engine) as session:
        alerts.record_alerts(session, flapping, received_at=T0)
        alerts.record_alerts(
            session, [new("b", "gpu-node-04", starts=T0 - timedelta(minutes=2))], received_at=T0
        )
        alerts.record_alerts(
            session,
            [
                new("c", "gpu-node-05", starts=T0, status="resolved"),
                new("d", "gpu-node-06", starts=T0, name="GPUXidBurst"),
            ],
            received_at=T0,
        )
        alerts.record_alerts(
            session, [new("e", "gpu-node-07", starts=T0 - timedelta(hours=2))],
            received_at=T0 - timedelta(hours=1),
        )  # fmt: skip
    with session_scope(engine) as session:
        found = alerts.recent_firing_labels(session, alertname="GPUEccStorm", since=T0)
        every = alerts.recent_firing(session, alertname="GPUEccStorm", since=T0)
    assert sorted((labels["Hostname"], at) for labels, at in found) == [
        ("gpu-node-03", T0 - timedelta(minutes=4)),
        ("gpu-node-04", T0 - timedelta(minutes=2)),
    ]
    assert all(at.tzinfo is not None for _, at in found)
    distinct = {tuple(sorted(row.labels.items())) for row in every}
    assert {tuple(sorted(labels.items())) for labels, _ in found} == distinct


@pytest.mark.sqlite_only("SQLite's EXPLAIN QUERY PLAN (PostgreSQL's: test_alerts_lookup)")
def test_the_light_read_searches_the_storm_window_index(engine: Engine) -> None:
    with session_scope(engine) as session:
        alerts.record_alerts(session, [new("a", "gpu-node-03", starts=T0)], received_at=T0)
    sent: list[tuple[str, object]] = []

    def record(_conn: object, _cursor: object, sql: str, params: object, *_: object) -> None:
        sent.append((sql, params))

    event.listen(engine, "before_cursor_execute", record)
    try:
        with session_scope(engine) as session:
            alerts.recent_firing_labels(session, alertname="GPUEccStorm", since=T0)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    sql, params = next((s, p) for s, p in sent if "GROUP BY" in s)
    with engine.connect() as connection:
        plan = [row[-1] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)]
    assert any("ix_received_alerts_storm_window" in p for p in plan), plan
