"""The reads behind `/gpu incident`, `/gpu postmortem` and `/gpu mttr`: rows in, views out.

The renderers (`postmortem.py`, Slack blocks, the terminal) only ever see `IncidentView`,
`EventView` and `MttrFigures`; this module fetches the rows and converts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session

from bot.errors import NotFound
from bot.incidents.mttr import FigureSummary, MttrFigures, TimestampOrderError, aggregate
from bot.incidents.postmortem import render_postmortem
from bot.incidents.views import EventView, IncidentView, event_views, incident_view
from storage import incidents as store
from storage.tables import Incident


def read_incident(session: Session, ref: str | int) -> Incident:
    """The incident named by `ref` (INC-7, 7); NotFound naming the reference otherwise."""
    incident = store.get_incident(session, ref)
    if incident is None:
        raise NotFound(f"unknown incident '{ref}' (try /gpu incidents to list them)")
    return incident


def read_views(
    session: Session, ref: str | int, *, pinned_only: bool = False
) -> tuple[IncidentView, list[EventView]]:
    """The incident and its timeline as views."""
    incident = read_incident(session, ref)
    events = store.list_events(session, incident.id or 0, pinned_only=pinned_only)
    return incident_view(incident), event_views(events)


def read_postmortem(
    session: Session, ref: str | int, *, fmt: str = "md", pinned_only: bool = False
) -> str:
    """The rendered postmortem of one incident (see `postmortem.render_postmortem`)."""
    incident, events = read_views(session, ref, pinned_only=pinned_only)
    return render_postmortem(incident, events, fmt=fmt, pinned_only=pinned_only)


def read_mttr_summary(
    session: Session, *, since: datetime, until: datetime | None = None
) -> dict[str, FigureSummary]:
    """Mean/median figures over the incidents resolved in [since, until)."""
    rows = store.list_resolved(session, since=since, until=until)
    return aggregate(_figures_or_skip([incident_view(r) for r in rows]))


def _figures_or_skip(views: Sequence[IncidentView]) -> list[MttrFigures]:
    figures: list[MttrFigures] = []
    for view in views:
        try:
            figures.append(view.figures())
        except TimestampOrderError:
            continue  # lifecycle refuses such writes; a hand-edited row must not break a summary
    return figures
