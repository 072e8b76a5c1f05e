"""Incident lifecycle: opening, transitions, timestamps and the timeline they leave.

Covers: opening records alert_fired (at startsAt, by alertmanager) and incident_opened; a
startsAt later than detection is clamped; open_or_attach attaches a re-firing alert to the open
incident; the full journey stamps detected/diagnosed/acknowledged/mitigated/resolved and the
figures follow; machines never acknowledge and the first human wins; the first diagnosis time
is kept; refused transitions record nothing; staying put is a no-op; reopening clears
resolved_at; a transition dated before the incident's history is refused; correcting fired_at
validates order and is on the timeline; naive datetimes are refused.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.clock import FakeClock
from bot.errors import UserInputError
from bot.incidents import lifecycle
from bot.incidents.mttr import MttrFigures, TimestampOrderError
from bot.incidents.states import IncidentState, InvalidTransitionError
from bot.incidents.views import incident_view
from storage import incidents as store
from storage.db import session_scope
from storage.tables import Incident
from tests.incidents.incident_helpers import open_ecc_storm

S = IncidentState


def _open(session: Session, clock: FakeClock, *, fired_ago: timedelta | None = None) -> Incident:
    fired = clock.now() - (fired_ago if fired_ago is not None else timedelta(minutes=2))
    return open_ecc_storm(session, clock, fired=fired)


def _kinds(session: Session, incident: Incident) -> list[str]:
    return [e.kind for e in store.list_events(session, incident.id or 0)]


def test_opening_records_the_alert_and_the_incident(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
    with session_scope(engine) as session:
        events = store.list_events(session, incident.id or 0)
        assert [(e.kind, e.actor, e.at) for e in events] == [
            ("alert_fired", "alertmanager", clock.now() - timedelta(minutes=2)),
            ("incident_opened", "bot", clock.now()),
        ]
        assert all(e.pinned for e in events)
        assert (incident.state, incident.detected_at) == ("open", clock.now())


def test_a_start_after_detection_is_clamped_to_detection(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock, fired_ago=-timedelta(seconds=3))  # clock skew
        assert incident.fired_at == clock.now()
        fired = store.list_events(session, incident.id or 0)[0]
        assert fired.payload["clamped_to"] == clock.now().isoformat()


def test_a_re_firing_alert_attaches_to_the_open_incident(engine: Engine, clock: FakeClock) -> None:
    kwargs = dict(
        runbook="ecc-storm",
        target="gpu-node-03",
        target_kind="node",
        severity="critical",
        title="ECC",
        fired_at=clock.now(),
        detected_at=clock.now(),
        actor="bot",
    )
    with session_scope(engine) as session:
        first, opened = lifecycle.open_or_attach(session, **kwargs)  # type: ignore[arg-type]
    clock.advance(timedelta(minutes=1))
    with session_scope(engine) as session:
        again, opened_again = lifecycle.open_or_attach(session, **kwargs)  # type: ignore[arg-type]
        assert (opened, opened_again, again.id) == (True, False, first.id)
        assert len(_kinds(session, again)) == 2


def test_the_full_journey_stamps_every_timestamp(engine: Engine, clock: FakeClock) -> None:
    fired = clock.now() - timedelta(minutes=2)
    with session_scope(engine) as session:
        incident = _open(session, clock)
        lifecycle.transition(session, incident, to=S.TRIAGING, at=clock.now(), actor="bot")
        clock.advance(timedelta(seconds=1))
        lifecycle.mark_diagnosed(
            session,
            incident,
            at=clock.now(),
            layer="gpu_hardware",
            confidence=0.92,
            culprits=["gpu-node-03"],
            run_id="r1",
            step_id="where",
        )
        lifecycle.transition(session, incident, to=S.AWAITING_APPROVAL, at=clock.now(), actor="bot")
        clock.advance(timedelta(minutes=3))
        lifecycle.transition(
            session, incident, to=S.MITIGATING, at=clock.now(), actor="U042", reason="approved"
        )
        clock.advance(timedelta(minutes=5))
        lifecycle.transition(session, incident, to=S.MONITORING, at=clock.now(), actor="bot")
        clock.advance(timedelta(minutes=10))
        lifecycle.transition(session, incident, to="resolved", at=clock.now(), actor="alertmanager")
    with session_scope(engine) as session:
        stored = store.get_incident(session, incident.id or 0)
        assert stored is not None
        assert stored.state == "resolved" and stored.acknowledged_by == "U042"
        assert incident_view(stored).figures() == MttrFigures(
            mttd=timedelta(minutes=2),
            mtta=timedelta(minutes=5, seconds=1),
            time_to_diagnosis=timedelta(seconds=1),
            mttm=timedelta(minutes=10, seconds=1),
            mttr=timedelta(minutes=20, seconds=1),
        )
        assert stored.resolved_at is not None and stored.resolved_at.tzinfo is UTC
        assert stored.fired_at == fired
        assert _kinds(session, stored) == [
            "alert_fired",
            "incident_opened",
            "state_changed",
            "verdict",
            "state_changed",
            "incident_acknowledged",
            "state_changed",
            "state_changed",
            "state_changed",
            "incident_resolved",
        ]
        resolved = store.list_events(session, stored.id or 0)[-1]
        assert resolved.summary == f"{stored.ref} resolved after 20m 1s (MTTR)"


def test_machines_never_acknowledge_and_the_first_human_wins(
    engine: Engine, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        assert not lifecycle.mark_acknowledged(session, incident, at=clock.now(), actor="bot")
        clock.advance(timedelta(minutes=1))
        assert lifecycle.mark_acknowledged(session, incident, at=clock.now(), actor="cli:alice")
        first = clock.now()
        clock.advance(timedelta(minutes=1))
        lifecycle.add_note(session, incident, at=clock.now(), actor="U9", text="looking")
        assert (incident.acknowledged_at, incident.acknowledged_by) == (first, "cli:alice")


def test_a_resolved_incident_is_no_longer_acknowledged(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        lifecycle.transition(session, incident, to=S.RESOLVED, at=clock.now(), actor="bot")
        clock.advance(timedelta(minutes=1))
        lifecycle.add_note(session, incident, at=clock.now(), actor="U1", text="late")
        assert incident.acknowledged_at is None


def test_the_first_diagnosis_time_is_kept(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        first = clock.now()
        lifecycle.mark_diagnosed(
            session, incident, at=first, layer="fabric", confidence=0.4, culprits=[]
        )
        clock.advance(timedelta(minutes=5))
        lifecycle.mark_diagnosed(
            session,
            incident,
            at=clock.now(),
            layer="gpu_hardware",
            confidence=0.9,
            culprits=["gpu-node-03"],
        )
        assert (incident.diagnosed_at, incident.layer, incident.culprits) == (
            first,
            "gpu_hardware",
            ["gpu-node-03"],
        )


def test_a_refused_transition_records_nothing(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        lifecycle.transition(session, incident, to=S.MONITORING, at=clock.now(), actor="bot")
    with (
        pytest.raises(InvalidTransitionError, match="from monitoring to mitigating"),
        session_scope(engine) as session,
    ):
        stored = store.get_incident(session, incident.id or 0)
        assert stored is not None
        lifecycle.transition(session, stored, to=S.MITIGATING, at=clock.now(), actor="bot")
    with session_scope(engine) as session:
        stored = store.get_incident(session, incident.id or 0)
        assert stored is not None and stored.state == "monitoring"
        assert _kinds(session, stored).count("state_changed") == 1


def test_staying_in_the_same_state_is_a_no_op(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        lifecycle.transition(session, incident, to=S.TRIAGING, at=clock.now(), actor="bot")
        lifecycle.transition(session, incident, to=S.TRIAGING, at=clock.now(), actor="bot")
        assert _kinds(session, incident).count("state_changed") == 1


def test_reopening_clears_resolved_at(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        lifecycle.transition(session, incident, to=S.RESOLVED, at=clock.now(), actor="bot")
        clock.advance(timedelta(minutes=1))
        lifecycle.transition(session, incident, to=S.TRIAGING, at=clock.now(), actor="bot")
        assert (incident.state, incident.resolved_at) == ("triaging", None)
        last = store.list_events(session, incident.id or 0)[-1]
        assert last.summary == "reopened"


def test_a_transition_dated_before_detection_is_refused(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        with pytest.raises(TimestampOrderError, match="resolved_at .* is before detected_at"):
            lifecycle.transition(
                session,
                incident,
                to=S.RESOLVED,
                at=clock.now() - timedelta(minutes=1),
                actor="bot",
            )
        assert incident.state == "open" and incident.resolved_at is None
        with pytest.raises(TimestampOrderError, match="triaging time .* is before detected_at"):
            lifecycle.transition(
                session,
                incident,
                to=S.TRIAGING,
                at=clock.now() - timedelta(seconds=1),
                actor="bot",
            )


def test_correcting_fired_at_is_validated_and_on_the_timeline(
    engine: Engine, clock: FakeClock
) -> None:
    earlier = clock.now() - timedelta(minutes=30)
    with session_scope(engine) as session:
        incident = _open(session, clock)
        with pytest.raises(UserInputError, match="fired_at .* is after detected_at"):
            lifecycle.correct_fired_at(
                session,
                incident,
                fired_at=clock.now() + timedelta(minutes=1),
                actor="U1",
                at=clock.now(),
            )
        lifecycle.correct_fired_at(session, incident, fired_at=earlier, actor="U1", at=clock.now())
    with session_scope(engine) as session:
        stored = store.get_incident(session, incident.id or 0)
        assert stored is not None
        assert (stored.fired_at, stored.fired_at_corrected_by) == (earlier, "U1")
        last = store.list_events(session, stored.id or 0)[-1]
        assert last.kind == "fired_at_corrected"
        assert last.payload["fired_at"] == earlier.isoformat()


def test_naive_datetimes_are_refused(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = _open(session, clock)
        with pytest.raises(ValueError, match="timezone-aware"):
            lifecycle.transition(
                session,
                incident,
                to=S.TRIAGING,
                at=datetime(2026, 1, 1),  # noqa: DTZ001 (naive on purpose)
                actor="bot",
            )
