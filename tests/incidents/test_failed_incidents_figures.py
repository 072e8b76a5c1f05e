"""A failed incident (its run could not start or never finished) has no MTTR figures, even after
someone resolves it by hand; taken back into triage it is an incident again.

Covers: `failed` then `resolved` leaves the incident out of `mttr` groups and out of the
`/metrics` buckets (which still equal the from-scratch computation); its resolution stores no
GPU-hours; taking a failed incident back into triage counts it again; dating a failed incident
with `fired` does not turn it back into one that counts.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.incidents import figures, lifecycle
from bot.incidents.reporting import read_mttr_groups
from bot.incidents.states import IncidentState
from storage.db import session_scope
from storage.tables import Incident
from tests.incidents.incident_helpers import open_ecc_storm


def _fail_then_resolve(engine: Engine, clock: FakeClock) -> int:
    with session_scope(engine) as session:
        incident = open_ecc_storm(session, clock, fired=clock.now() - timedelta(minutes=5))
        clock.advance(timedelta(minutes=1))
        lifecycle.transition(
            session, incident, to=IncidentState.FAILED, at=clock.now(), actor="bot"
        )
        clock.advance(timedelta(minutes=1))
        lifecycle.transition(
            session, incident, to=IncidentState.RESOLVED, at=clock.now(), actor="cli:alice"
        )
        return int(incident.id or 0)


def test_a_failed_incident_resolved_by_hand_counts_in_no_figure(
    engine: Engine, clock: FakeClock
) -> None:
    incident_id = _fail_then_resolve(engine, clock)
    with session_scope(engine) as session:
        row = session.get(Incident, incident_id)
        assert row is not None
        assert (row.state, row.kind, row.gpu_hours_lost) == ("resolved", "failed", None)
        groups = read_mttr_groups(
            session, since=clock.now() - timedelta(days=1), until=clock.now(), by="runbook"
        )
        assert groups == []
        # Only the incidents-by-state gauge counts it (it exists, resolved); no MTTx histogram.
        histograms = figures.without_states(figures.read_counts(session))
        assert all(n == 0 for n, _ in histograms.values())
        assert figures.without_states(figures.from_scratch(session)) == {}


def test_a_failed_incident_taken_back_into_triage_counts_again(
    engine: Engine, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        incident = open_ecc_storm(session, clock, fired=clock.now() - timedelta(minutes=5))
        lifecycle.transition(
            session, incident, to=IncidentState.FAILED, at=clock.now(), actor="bot"
        )
        clock.advance(timedelta(minutes=1))
        lifecycle.correct_fired_at(
            session,
            incident,
            fired_at=clock.now() - timedelta(minutes=30),
            actor="cli:alice",
            at=clock.now(),
        )
        assert incident.kind == "failed", "dating it does not make a failed run count"
        lifecycle.transition(
            session, incident, to=IncidentState.TRIAGING, at=clock.now(), actor="cli:alice"
        )
        clock.advance(timedelta(minutes=1))
        lifecycle.transition(
            session, incident, to=IncidentState.RESOLVED, at=clock.now(), actor="cli:alice"
        )
    with session_scope(engine) as session:
        (group,) = read_mttr_groups(
            session, since=clock.now() - timedelta(days=1), until=clock.now(), by="runbook"
        )
        assert (group.key, group.incidents) == ("ecc-storm", 1)
        assert figures.read_counts(session) == figures.from_scratch(session) != {}
