"""Timestamps out of this world (issue 20): a person's `fired` and the pages/charts.

Covers: `/gpu fired INC-1 0500-01-01T00:00Z` (parsed by the grammar) is refused naming the
window, while a time within it is taken; whatever times an incident holds (year 500, year 1),
the chart draws at most CHART_MAX_TICKS ticks, the axis never overflows, and the HTML and
Markdown postmortems stay small (the year-500 page was 61.5 MB).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.errors import UserInputError
from bot.incidents import humans
from bot.incidents.charts import TimeAxis
from bot.incidents.reporting import read_postmortem
from bot.intake import commands as grammar
from bot.limits import CHART_MAX_TICKS
from storage.db import create_schema, make_engine, session_scope
from storage.tables import Incident
from tests.incidents.incident_helpers import open_ecc_storm

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_fired_centuries_before_detection_is_refused_naming_the_window(
    engine: Engine, clock: FakeClock
) -> None:
    command = grammar.parse_command("fired INC-1 0500-01-01T00:00Z")
    assert isinstance(command, grammar.FiredAt)
    when = grammar.on_day_of(command.when, clock.now())
    with session_scope(engine) as session:
        open_ecc_storm(session, clock, fired=clock.now() - timedelta(minutes=5))
        with pytest.raises(UserInputError, match="more than 30 days before the incident was"):
            humans.correct_fired_at(session, 1, fired_at=when, actor="U1", at=clock.now())
        week = clock.now() - timedelta(days=7)
        dated = humans.correct_fired_at(session, 1, fired_at=week, actor="U1", at=clock.now())
        assert dated.fired_at == week


@pytest.mark.parametrize("year", [1, 500, 1970])
def test_postmortems_of_an_ancient_incident_stay_small(
    engine: Engine, clock: FakeClock, year: int
) -> None:
    with session_scope(engine) as session:
        incident = open_ecc_storm(session, clock, fired=None)
        # Written past the checks, as an older release or a direct database edit could have.
        row = session.get(Incident, incident.id)
        assert row is not None
        row.fired_at = datetime(year, 1, 1, tzinfo=UTC)
        session.add(row)
    with session_scope(engine) as session:
        html = read_postmortem(session, 1, fmt="html", now=clock.now())
        markdown = read_postmortem(session, 1, fmt="md", now=clock.now())
    assert len(html) < 1_000_000
    assert len(markdown) < 1_000_000
    assert html.count("<text") < 200


@settings(max_examples=80, deadline=None)
@given(
    start=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9998, 1, 1)),  # noqa: DTZ001
    span=st.timedeltas(min_value=timedelta(seconds=1), max_value=timedelta(days=3_000_000)),
)
def test_any_span_has_at_most_the_tick_budget(start: datetime, span: timedelta) -> None:
    begin = start.replace(tzinfo=UTC)
    try:
        end = begin + span
    except OverflowError:
        end = datetime(9999, 12, 31, tzinfo=UTC)
    ticks = TimeAxis(start=begin, end=min(end, datetime(9999, 12, 31, tzinfo=UTC))).ticks()
    assert len(ticks) <= CHART_MAX_TICKS
