"""The `/metrics` histograms kept in `figure_buckets` (bot/incidents/figures.py) equal the ones
recomputed from every incident, after every step of incidents' lives, on SQLite and PostgreSQL.

Aspects: each lifecycle write (open, diagnose, a second verdict moving the layer, acknowledge,
mitigate, resolve, reopen, a corrected fired_at, a failed incident, an outside resolution) and
the bulk-opened storm keep the buckets equal to the from-scratch computation, and the rendered
exposition equal to the old renderer's; a change made through a stale copy of an incident
moves it from where the database holds it; a rolled-back transaction leaves the buckets as they
were, and an open the database refuses inside a committed transaction counts nothing; the
incidents counted by state (maintained beside the buckets) equal a scan after every step;
transactions moving incidents between the same series in opposite orders never deadlock on the
bucket rows, and replicas changing incidents at once lose no increment (both PostgreSQL); the
rebuild fills an empty table once (`ensure_built`), also on a database upgraded from 0003.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.incidents import figures, lifecycle
from bot.incidents.opening import OpenRequest, open_or_attach_many
from bot.incidents.states import IncidentState
from bot.incidents.views import incident_view
from bot.intake.counters import IntakeCounters
from bot.serving.exposition import counted_histograms, figure_histograms, render_metrics
from storage import incidents as store
from storage.db import create_schema, make_engine, session_scope
from storage.errors import IncidentAlreadyOpenError
from storage.figures import BucketKey
from storage.migrating import alembic_config, head, upgrade
from storage.tables import Incident

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
    else:
        url = f"sqlite:///{tmp_path / 'oncall.db'}"
    engine = make_engine(url)
    create_schema(engine)
    yield engine
    engine.dispose()


def maintained(engine: Engine) -> dict[BucketKey, tuple[int, int]]:
    with session_scope(engine) as session:
        counts = figures.without_states(figures.read_counts(session))  # the histograms
        return {k: v for k, v in counts.items() if v != (0, 0)}


def recomputed(engine: Engine) -> dict[BucketKey, tuple[int, int]]:
    with session_scope(engine) as session:
        counts = figures.without_states(figures.from_scratch(session))
        return {k: v for k, v in counts.items() if v != (0, 0)}


def exposition_now(engine: Engine) -> str:
    with session_scope(engine) as session:
        counts = figures.read_counts(session)
    return render_metrics(IntakeCounters(), by_state={}, histograms=counted_histograms(counts))


def exposition_from_scratch(engine: Engine) -> str:
    """The renderer `/metrics` used before the buckets: every incident loaded and measured."""
    with session_scope(engine) as session:
        views = [incident_view(row) for row in store.list_incidents(session, limit=100_000)]
    return render_metrics(IntakeCounters(), by_state={}, histograms=figure_histograms(views))


def assert_in_step(engine: Engine, step: str) -> None:
    assert maintained(engine) == recomputed(engine), step
    assert exposition_now(engine) == exposition_from_scratch(engine), step
    with session_scope(engine) as session:  # incidents by state, maintained = scanned
        assert figures.state_counts(figures.read_counts(session)) == store.count_by_state(
            session
        ), step


def open_one(session: Session, target: str, *, at: datetime, fired: timedelta | None) -> Incident:
    incident, _ = lifecycle.open_or_attach(
        session,
        runbook="ecc-storm",
        target=target,
        target_kind="node",
        severity="critical",
        title=f"ECC storm on {target}",
        fired_at=None if fired is None else at - fired,
        detected_at=at,
        actor="alertmanager",
    )
    return incident


def get(session: Session, incident_id: int) -> Incident:
    incident = store.get_incident(session, incident_id)
    assert incident is not None
    return incident


def test_every_lifecycle_step_keeps_the_buckets_equal_to_the_incidents(db: Engine) -> None:
    at = T0
    with session_scope(db) as session:
        a = open_one(session, "gpu-node-01", at=at, fired=timedelta(minutes=3)).id
        b = open_one(session, "gpu-node-02", at=at, fired=timedelta(seconds=20)).id
        c = open_one(session, "gpu-node-03", at=at, fired=None).id  # a slash command: no fired_at
    assert a and b and c
    assert_in_step(db, "opened")
    assert maintained(db), "the opened incidents have an MTTD"

    moves: list[tuple[str, Callable[[Session], object]]] = [
        ("diagnosed", lambda s: lifecycle.mark_diagnosed(
            s, get(s, a), at=at + timedelta(seconds=0.35), layer="gpu_hardware",
            confidence=0.9, culprits=["gpu-node-01"])),
        ("second verdict moves the layer", lambda s: lifecycle.mark_diagnosed(
            s, get(s, a), at=at + timedelta(seconds=40), layer="fabric", confidence=0.7,
            culprits=[])),
        ("acknowledged", lambda s: lifecycle.mark_acknowledged(
            s, get(s, a), at=at + timedelta(minutes=2), actor="U-alice")),
        ("mitigating", lambda s: lifecycle.transition(
            s, get(s, a), to=IncidentState.MITIGATING, at=at + timedelta(minutes=4), actor="bot")),
        ("monitoring", lambda s: lifecycle.transition(
            s, get(s, a), to=IncidentState.MONITORING, at=at + timedelta(minutes=6), actor="bot")),
        ("resolved", lambda s: lifecycle.transition(
            s, get(s, a), to=IncidentState.RESOLVED, at=at + timedelta(minutes=20), actor="bot")),
        ("fired_at corrected", lambda s: lifecycle.correct_fired_at(
            s, get(s, a), fired_at=at - timedelta(hours=2), actor="U-alice",
            at=at + timedelta(minutes=30))),
        ("reopened", lambda s: lifecycle.transition(
            s, get(s, a), to=IncidentState.TRIAGING, at=at + timedelta(minutes=31),
            actor="U-bob")),
        ("resolved again", lambda s: lifecycle.resolve_as_reported(
            s, get(s, a), at=at + timedelta(hours=3), reported_at=at + timedelta(hours=3),
            actor="alertmanager", reason="alert resolved")),
        ("fired_at set on a slash-command incident", lambda s: lifecycle.correct_fired_at(
            s, get(s, c), fired_at=at - timedelta(minutes=50), actor="U-alice",
            at=at + timedelta(minutes=5))),
        ("failed", lambda s: lifecycle.transition(
            s, get(s, b), to=IncidentState.FAILED, at=at + timedelta(minutes=1), actor="bot")),
        ("failed one resolved by a human", lambda s: lifecycle.transition(
            s, get(s, b), to=IncidentState.RESOLVED, at=at + timedelta(minutes=9),
            actor="U-carol")),
        ("a new incident for the failed one's target", lambda s: open_one(
            s, "gpu-node-02", at=at + timedelta(hours=3, minutes=30), fired=timedelta(hours=2))),
    ]
    for name, change in moves:
        with session_scope(db) as session:
            change(session)
        assert_in_step(db, name)
    with session_scope(db) as session:
        storm = [
            OpenRequest("ecc-storm", f"gpu-node-{n:02d}", "node",
                        "critical" if n % 3 else "warning", "ECC storm",
                        at - timedelta(seconds=n * 17))
            for n in range(1, 40)
        ]
        opened = open_or_attach_many(session, storm, detected_at=at + timedelta(hours=4),
                                     actor="alertmanager")
    assert sum(new for _, new in opened) == 37, "gpu-node-02 and -03 were open: attached"
    assert_in_step(db, "storm opened in bulk")
    with session_scope(db) as session:
        for incident, _ in opened[:10]:
            lifecycle.mark_diagnosed(session, incident, at=at + timedelta(hours=4, seconds=2),
                                     layer="fabric", confidence=None, culprits=[])
            lifecycle.transition(session, incident, to=IncidentState.RESOLVED,
                                 at=at + timedelta(hours=5), actor="alertmanager")
    assert_in_step(db, "storm partly diagnosed and resolved in one transaction")


def test_a_change_through_a_stale_copy_moves_the_incident_from_where_the_database_has_it(
    db: Engine,
) -> None:
    with session_scope(db) as session:
        stale = open_one(session, "gpu-node-07", at=T0, fired=timedelta(minutes=5))
    with session_scope(db) as session:  # another replica resolves it meanwhile
        lifecycle.transition(session, get(session, int(stale.id or 0)),
                             to=IncidentState.RESOLVED, at=T0 + timedelta(minutes=9), actor="bot")
    assert stale.resolved_at is None
    with session_scope(db) as session:  # ours still believes it is open and undiagnosed
        stale.layer = "fabric"
        session.add(stale)
    assert_in_step(db, "layer set through a stale copy")
    assert any(k[0] == "mttr" and k[2] == "fabric" for k in maintained(db))


def test_a_rolled_back_change_leaves_the_buckets_as_they_were(db: Engine) -> None:
    with session_scope(db) as session:
        incident = open_one(session, "gpu-node-08", at=T0, fired=timedelta(minutes=1))
        incident_id = int(incident.id or 0)
    before = maintained(db)
    with pytest.raises(RuntimeError), session_scope(db) as session:
        lifecycle.transition(session, get(session, incident_id), to=IncidentState.RESOLVED,
                             at=T0 + timedelta(minutes=3), actor="bot")
        session.flush()
        raise RuntimeError("the request failed after the write")
    assert maintained(db) == before
    assert_in_step(db, "rolled back")


def test_an_open_refused_by_the_database_is_not_counted(db: Engine) -> None:
    with session_scope(db) as session:
        open_one(session, "gpu-node-11", at=T0, fired=timedelta(minutes=1))
    with session_scope(db) as session:  # a replica that missed it tries to open it again
        with pytest.raises(IncidentAlreadyOpenError):
            store.create_incident(
                session,
                runbook="ecc-storm",
                target="gpu-node-11",
                target_kind="node",
                severity="critical",
                title="again",
                at=T0 + timedelta(minutes=1),
                fired_at=T0 - timedelta(hours=1),
                detected_at=T0 + timedelta(minutes=1),
            )
        open_one(session, "gpu-node-12", at=T0, fired=timedelta(minutes=4))
    assert_in_step(db, "savepoint rolled back, transaction committed")
    assert sum(n for n, _ in maintained(db).values()) == 2, "one MTTD per opened incident"


def test_replicas_changing_incidents_at_once_lose_no_increment(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    create_schema(engine)

    def replica(name: str) -> None:
        for n in range(15):
            with session_scope(engine) as session:
                incident = open_one(session, f"{name}-{n}", at=T0, fired=timedelta(minutes=2))
                session.flush()
                lifecycle.transition(
                    session,
                    incident,
                    to=IncidentState.RESOLVED,
                    at=T0 + timedelta(minutes=10),
                    actor="bot",
                )

    with ThreadPoolExecutor(max_workers=3) as pool:
        for done in [pool.submit(replica, f"node-{r}") for r in range(3)]:
            done.result()  # re-raises a replica's error
    counts = maintained(engine)
    assert counts == recomputed(engine)
    assert counts[("mttr", "ecc-storm", "undiagnosed", "critical", 5)] == (45, 45 * 720_000_000)
    engine.dispose()


def test_transactions_moving_series_in_opposite_orders_do_not_deadlock(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    create_schema(engine)
    with session_scope(engine) as session:
        ids = [int(open_one(session, f"n{i}", at=T0, fired=None).id or 0) for i in range(4)]
    both_flushed_once = threading.Barrier(2)

    def replica(first: int, second: int, first_for: timedelta, second_for: timedelta) -> None:
        with session_scope(engine) as session:
            for n, (incident_id, lasted) in enumerate([(first, first_for), (second, second_for)]):
                lifecycle.correct_fired_at(
                    session, get(session, incident_id), fired_at=T0 - lasted, actor="U-a", at=T0
                )
                session.flush()
                if n == 0:
                    both_flushed_once.wait(timeout=60)

    short, long = timedelta(minutes=10), timedelta(hours=2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [
            pool.submit(replica, ids[0], ids[1], short, long),
            pool.submit(replica, ids[2], ids[3], long, short),
        ]
        for job in jobs:
            job.result()  # a deadlock would abort one of them here
    assert maintained(engine) == recomputed(engine)
    engine.dispose()


def test_ensure_built_fills_an_emptied_table_once(db: Engine) -> None:
    with session_scope(db) as session:
        open_one(session, "gpu-node-09", at=T0, fired=timedelta(minutes=1))
        open_one(session, "gpu-node-10", at=T0, fired=timedelta(hours=2))
    expected = maintained(db)
    with session_scope(db) as session:
        session.connection().execute(text("DELETE FROM figure_buckets"))
        assert figures.ensure_built(session) is True
    assert maintained(db) == expected
    with session_scope(db) as session:
        assert figures.ensure_built(session) is False


def test_an_empty_database_needs_no_build(db: Engine) -> None:
    with session_scope(db) as session:
        assert figures.ensure_built(session) is False
    assert maintained(db) == {}


def test_a_database_of_revision_0003_gets_the_buckets_built_from_its_incidents(
    tmp_path: Path,
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0003")
        connection.execute(
            text(
                "INSERT INTO incidents (runbook, target, target_kind, severity, title, state, "
                "group_key, culprits, fired_at, detected_at, resolved_at, created_at) VALUES "
                "('ecc-storm', 'n1', 'node', 'critical', 't', 'resolved', 'ecc-storm:n1', '[]', "
                "'2026-01-01 11:50:00', '2026-01-01 12:00:00', '2026-01-01 13:00:00', "
                "'2026-01-01 12:00:00')"
            )
        )
    assert upgrade(engine) == ("0003", head())
    with session_scope(engine) as session:
        assert figures.ensure_built(session) is True
    assert maintained(engine) == {
        ("mttd", "ecc-storm", "undiagnosed", "critical", 4): (1, 600_000_000),
        ("mttr", "ecc-storm", "undiagnosed", "critical", 8): (1, 4_200_000_000),
    }
    engine.dispose()
