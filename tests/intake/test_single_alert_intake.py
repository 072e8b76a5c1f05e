"""A single alert's webhook, firing then resolved (issue 21 item 2): what it writes is unchanged
while it sends fewer and lighter statements.

Covers, on a real SQLite bot (open_runtime, the app's WebhookIntake; triage runs recorded in
the webhook's transaction, not run): the firing webhook opens one incident with
`alert_fired` and `incident_opened`, records one triage, and the resolved one adds
`alert_resolved`, `state_changed` and `incident_resolved` in that order and resolves it; the
`/metrics` buckets kept at each commit equal the ones recomputed from the incidents; a
redelivery of either stores nothing. The resolved webhook reads its incident once (one
SELECT of the incidents table before the state change, none of `received_alerts` for the
incident id alone), and the statements each webhook sends stay within today's budget (the
count, not time: 13 for the firing webhook, 17 for the resolved one, BEGINs included). With
the alert fired again every minute, the storm check still reads one row for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from servers.oncall import alert, webhook
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import select

from bot.config import ServerSettings, Settings, StorageSettings
from bot.incidents import figures
from bot.intake.webhooks import WebhookIntake
from bot.serving.app import create_app
from bot.wiring.runtime import Runtime, open_runtime
from bot.work.dispatching import TriageWorkers
from storage import alerts as alert_store
from storage import incidents as incident_store
from storage.db import session_scope
from storage.tables import WorkItem

FIRING_BUDGET = 13
RESOLVED_BUDGET = 17


class RecordingOnly(TriageWorkers):
    """Records the triage in the webhook's transaction, as the app does; never runs it."""

    def submit_run(self, received: Any) -> bool:
        return True

    def submit_expiry(self, incident_id: int) -> bool:
        return True


@pytest.fixture
def intake(tmp_path: Path, scenario_dir: Path) -> Iterator[tuple[Runtime, WebhookIntake]]:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(workers=1),
    )
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        app = create_app(settings, rt)
        app.workers.shutdown()
        queue = RecordingOnly(
            rt.engine, db=rt.db, catalog=rt.catalog, clock=rt.clock, silences=rt.deps.silences,
            workers=1, queue_limit=1, counters=app.counters,
        )  # fmt: skip
        app.workers = app.webhooks.queue = queue
        try:
            yield rt, app.webhooks
        finally:
            queue.shutdown()


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        sent.append(" ".join(sql.split()))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def body(status: str, rt: Runtime, *, minutes_ago: int = 10) -> bytes:
    starts = rt.clock.now() - timedelta(minutes=minutes_ago)
    ends = rt.clock.now() if status == "resolved" else None
    one = alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts, status=status,
                ends_at=ends)  # fmt: skip
    return json.dumps(webhook([one])).encode()


def test_firing_then_resolved_writes_the_same_story_in_fewer_statements(
    intake: tuple[Runtime, WebhookIntake],
) -> None:
    rt, webhooks = intake
    firing, resolved = body("firing", rt), body("resolved", rt)
    with statements(rt.db) as fired_sql:
        answer = webhooks.receive(firing)
    assert (answer.status, answer.body["incidents"]) == (200, ["INC-1"]), answer
    with statements(rt.db) as resolved_sql:
        answer = webhooks.receive(resolved)
    assert (answer.status, answer.body["incidents"]) == (200, ["INC-1"]), answer

    with session_scope(rt.db) as session:
        incident = incident_store.get_incident(session, 1)
        kinds = [e.kind for e in sorted(incident_store.list_events(session, 1), key=by_id)]
        works = session.exec(select(WorkItem).where(WorkItem.kind == "triage")).all()
        kept, recomputed = figures.read_counts(session), figures.from_scratch(session)
    assert incident is not None and incident.state == "resolved" and incident.resolved_at
    assert kinds == [
        "alert_fired", "incident_opened", "alert_resolved", "state_changed", "incident_resolved",
    ]  # fmt: skip
    assert [w.incident_id for w in works] == [1]
    assert {k: v for k, v in kept.items() if v[0]} == {k: v for k, v in recomputed.items() if v[0]}

    whole = "SELECT incidents.id, incidents.runbook, incidents.target,"
    incident_reads = [s for s in resolved_sql if s.startswith(whole)]
    assert len(incident_reads) == 1, resolved_sql
    assert not any(s.startswith("SELECT received_alerts.incident_id") for s in resolved_sql)
    assert len(fired_sql) <= FIRING_BUDGET, "\n".join(fired_sql)
    assert len(resolved_sql) <= RESOLVED_BUDGET, "\n".join(resolved_sql)

    for again in (firing, resolved):
        with statements(rt.db) as sent:
            answer = webhooks.receive(again)
        assert answer.body["duplicates"] == 1, answer
        assert not any(s.startswith(("INSERT", "UPDATE")) for s in sent), sent


def test_an_alert_that_flaps_is_one_row_of_the_storm_check(
    intake: tuple[Runtime, WebhookIntake],
) -> None:
    rt, webhooks = intake
    for minute in range(4):
        assert webhooks.receive(body("firing", rt, minutes_ago=10 - minute)).status == 200
        assert webhooks.receive(body("resolved", rt, minutes_ago=10 - minute)).status == 200
        rt.clock.sleep(60)
    with statements(rt.db) as sent:
        answer = webhooks.receive(body("firing", rt, minutes_ago=5))
    assert answer.status == 200 and answer.body["incidents"] == ["INC-5"], answer
    checks = [s for s in sent if "GROUP BY CAST(received_alerts.labels AS TEXT)" in s]
    assert len(checks) == 1, sent
    with session_scope(rt.db) as session:
        since = rt.clock.now() - timedelta(minutes=5)
        found = alert_store.recent_firing_labels(session, alertname="GPUEccStorm", since=since)
        every = alert_store.recent_firing(session, alertname="GPUEccStorm", since=since)
    assert len(every) >= 4 and len(found) == 1, (every, found)
    assert found[0][0] == every[0].labels
    assert found[0][1] == min(row.starts_at for row in every)


def by_id(event: Any) -> int:
    """Events in the order they were written (the alert's own end may precede the opening)."""
    return int(event.id)
