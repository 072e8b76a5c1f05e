"""What people put on an incident's record (bot/incidents/humans.py), on a SQLite database.

Covers: `fired` refuses a time after detected_at (naming both) and one in the future, accepts an
earlier one, marks its source `human`, acknowledges, audits the previous value and reason on the
timeline, and the MTTx and `/metrics` buckets follow; a check that someone dates becomes an
incident again; ack refuses a resolved incident; notes are bounded and never empty; pin/unpin
record who and when, pinning twice changes nothing, an event of another incident is not found;
resolve needs a reason and stores the GPU-hours; the grammar's new verbs and their refusals.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.errors import NotFound, UserInputError
from bot.incidents import figures, humans, lifecycle
from bot.incidents.views import incident_view
from bot.intake import commands as grammar
from storage import incidents as store
from storage.db import session_scope
from storage.tables import Incident
from tests.incidents.incident_helpers import open_ecc_storm


def test_fired_after_detection_is_refused_naming_both_times(
    engine: Engine, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        incident = open_ecc_storm(session, clock, fired=clock.now() - timedelta(minutes=2))
        late = clock.now() + timedelta(seconds=30)
        with pytest.raises(UserInputError) as refused:
            humans.correct_fired_at(session, 1, fired_at=late, actor="U1", at=late)
    assert str(refused.value) == (
        "INC-1: fired_at 2026-01-01 12:00:30 UTC is after detected_at (2026-01-01 12:00:00 UTC); "
        "impact must begin at or before it"
    )
    with session_scope(engine) as session:
        stored = store.get_incident(session, incident.id or 0)
        assert stored is not None and stored.fired_at == clock.now() - timedelta(minutes=2)
        assert stored.fired_at_source == "alert"


def test_fired_in_the_future_is_refused(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        open_ecc_storm(session, clock, fired=None)
        ahead = clock.now() + timedelta(hours=1)
        # a check against now, for incidents with no detection stamp to bound it
        session.get(Incident, 1).detected_at = None  # type: ignore[union-attr]
        with pytest.raises(UserInputError, match="is in the future"):
            humans.correct_fired_at(session, 1, fired_at=ahead, actor="U1", at=clock.now())


def test_a_human_fired_at_is_audited_acknowledges_and_moves_the_figures(
    engine: Engine, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        open_ecc_storm(session, clock, fired=clock.now() - timedelta(minutes=2))
    clock.advance(timedelta(minutes=1))
    earlier = clock.now() - timedelta(minutes=20)
    with session_scope(engine) as session:
        humans.correct_fired_at(
            session, "INC-1", fired_at=earlier, actor="U1", at=clock.now(), reason="DCGM"
        )
    with session_scope(engine) as session:
        incident = store.get_incident(session, 1)
        assert incident is not None
        assert (incident.fired_at, incident.fired_at_source) == (earlier, "human")
        assert (incident.acknowledged_by, incident.acknowledged_at) == ("U1", clock.now())
        figures_now = incident_view(incident).figures()
        assert figures_now.mttd == timedelta(minutes=19)
        event = store.list_events(session, 1)[-1]
        assert event.kind == "fired_at_corrected" and event.pinned
        assert event.payload["previous"] == (clock.now() - timedelta(minutes=3)).isoformat()
        assert (event.payload["previous_source"], event.payload["reason"]) == ("alert", "DCGM")
        kept = {k: v for k, v in figures.read_counts(session).items() if v != (0, 0)}
        assert kept == figures.from_scratch(session)  # /metrics moved with the correction


def test_dating_a_check_makes_it_an_incident_again(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = open_ecc_storm(session, clock, fired=None)
        assert lifecycle.mark_check(session, incident, at=clock.now(), actor="bot")
        lifecycle.transition(session, incident, to="resolved", at=clock.now(), actor="bot")
        assert incident.gpu_hours_lost is None  # a check costs nothing on the record
    with session_scope(engine) as session:
        humans.correct_fired_at(
            session, 1, fired_at=clock.now() - timedelta(minutes=5), actor="U1", at=clock.now()
        )
        assert store.get_incident(session, 1).kind == "incident"  # type: ignore[union-attr]


def test_ack_refuses_a_resolved_incident_and_the_first_wins(
    engine: Engine, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        open_ecc_storm(session, clock, fired=clock.now())
        first = humans.acknowledge(session, 1, actor="U1", at=clock.now())
        second = humans.acknowledge(session, 1, actor="U2", at=clock.now())
        assert (first.stamped, second.stamped, second.by) == (True, False, "U1")
        lifecycle.transition(session, store.get_incident(session, 1), to="resolved",  # type: ignore[arg-type]
                             at=clock.now(), actor="U1")  # fmt: skip
        with pytest.raises(UserInputError, match="INC-1 is resolved"):
            humans.acknowledge(session, 1, actor="U2", at=clock.now())


def test_notes_are_bounded_and_never_empty(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        open_ecc_storm(session, clock, fired=clock.now())
        with pytest.raises(UserInputError, match="a note needs text"):
            humans.add_note(session, 1, text="  ", actor="U1", at=clock.now())
        with pytest.raises(UserInputError, match="at most 3000"):
            humans.add_note(session, 1, text="x" * 3001, actor="U1", at=clock.now())
        note = humans.add_note(session, 1, text=" swapped the cable ", actor="U1", at=clock.now())
        assert (note.summary, note.pinned, note.actor) == ("swapped the cable", False, "U1")


def test_pin_records_who_and_when_and_is_idempotent(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        open_ecc_storm(session, clock, fired=clock.now())
        other = lifecycle.open_incident(
            session, runbook="ib", target="gpu-node-09", target_kind="node", severity="warning",
            title="t", fired_at=None, detected_at=clock.now(), actor="bot",
        )  # fmt: skip
        note = humans.add_note(session, 1, text="look here", actor="U1", at=clock.now())
        event_id = note.id or 0
    clock.advance(timedelta(seconds=5))
    with session_scope(engine) as session:
        pinned = humans.set_pinned(
            session, 1, event_id=event_id, pinned=True, actor="U2", at=clock.now()
        )
        assert (pinned.pinned, pinned.pinned_by, pinned.pinned_at) == (True, "U2", clock.now())
        again = humans.set_pinned(
            session, 1, event_id=event_id, pinned=True, actor="U3", at=clock.now()
        )
        assert again.pinned_by == "U2"  # pinning twice changes nothing
        assert [e.id for e in store.list_events(session, 1, pinned_only=True)][-1] == event_id
        with pytest.raises(NotFound, match=f"INC-{other.id} has no timeline event #{event_id}"):
            humans.set_pinned(
                session, other.id or 0, event_id=event_id, pinned=False, actor="U2",
                at=clock.now(),
            )  # fmt: skip
        humans.set_pinned(session, 1, event_id=event_id, pinned=False, actor="U2", at=clock.now())
        assert event_id not in [e.id for e in store.list_events(session, 1, pinned_only=True)]


def test_resolve_needs_a_reason_and_stores_the_gpu_hours(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        open_ecc_storm(session, clock, fired=clock.now())
        with pytest.raises(UserInputError, match="resolving needs a reason"):
            humans.resolve(session, 1, actor="U1", at=clock.now(), reason=" ")
        clock.advance(timedelta(minutes=30))
        incident = humans.resolve(session, 1, actor="U1", at=clock.now(), reason="swapped")
        assert (incident.state, incident.gpu_hours_lost) == ("resolved", 0.0)
        with pytest.raises(UserInputError, match="already resolved"):
            humans.resolve(session, 1, actor="U1", at=clock.now(), reason="again")
        resolved = store.list_events(session, 1)[-1]
        assert resolved.payload["gpu_hours"]["total"] == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fired INC-3 14:05", grammar.FiredAt(3, time(14, 5, tzinfo=UTC), "")),
        (
            "fired 3 2026-11-24T14:05:30+02:00 impact began earlier",
            grammar.FiredAt(3, datetime(2026, 11, 24, 12, 5, 30, tzinfo=UTC), "impact began earlier"),  # noqa: E501
        ),
        ("note inc-3 saw XID 79", grammar.Note(3, "saw XID 79")),
        ("pin 3 #17", grammar.Pin(3, 17, pinned=True)),
        ("unpin 3 17", grammar.Pin(3, 17, pinned=False)),
        ("resolve 3 node replaced", grammar.Resolve(3, "node replaced")),
        ("mttr by layer", grammar.Mttr(timedelta(days=7), "7d", by="layer")),
        ("mttr 30d by week", grammar.Mttr(timedelta(days=30), "30d", by="week")),
    ],
)
def test_the_human_verbs_parse(text: str, expected: grammar.Command) -> None:
    assert grammar.parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fired INC-3", "/gpu fired takes <id> <time> [reason]"),
        ("fired 3 25:00", "'25:00' is not a time of day"),
        ("fired 3 yesterday", "'yesterday' is not a time (UTC: 14:05"),
        ("note 3", "/gpu note takes <id> <text>"),
        ("pin 3 17 18", "one event number (got '17 18')"),
        ("pin 3 last", "'last' is not a timeline event number"),
        ("mttr by team", "/gpu mttr by takes one of runbook, layer, week"),
    ],
)
def test_the_human_verbs_refuse_with_what_is_valid(text: str, message: str) -> None:
    with pytest.raises(UserInputError, match=re.escape(message)):
        grammar.parse_command(text)


def test_a_clock_time_falls_on_the_detection_day() -> None:
    detected = datetime(2026, 11, 24, 0, 5, tzinfo=UTC)
    assert grammar.on_day_of(time(23, 55, tzinfo=UTC), detected) == datetime(
        2026, 11, 24, 23, 55, tzinfo=UTC
    )  # after detection: refused by the lifecycle, never silently moved to the day before
