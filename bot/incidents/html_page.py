"""Incident + timeline + story -> one self-contained HTML page (pure: no I/O imports).

The postmortem exported by `gpu-oncall postmortem --format html` and the live page served at
`/incidents/INC-N` are this one page. No script, no external URL: CSS and both charts (hand-drawn
SVG from `charts.py` geometry) are inline, and a Content-Security-Policy forbids any fetch. The
live page refreshes itself with a meta refresh while the incident is open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined, Template, select_autoescape

from bot.incidents.charts import (
    LANES,
    LEFT,
    WIDTH,
    make_axis,
    metric_chart,
    timeline_chart,
)
from bot.incidents.drafting import draft_sections
from bot.incidents.mttr import DEFINITIONS, TimestampOrderError, format_duration
from bot.incidents.story import Story, follow_ups, verifications
from bot.incidents.views import EventView, IncidentView


@dataclass(frozen=True)
class FigureRow:
    label: str
    value: str
    formula: str
    start_name: str
    start: str
    end_name: str
    end: str


def render_html_page(
    incident: IncidentView,
    events: Sequence[EventView],
    *,
    story: Story,
    pinned_only: bool = False,
    page_url: str | None = None,
    refresh_seconds: int | None = None,
) -> str:
    """The page; `refresh_seconds` (live pages of open incidents) adds a meta refresh."""
    axis = make_axis(incident, events, story.snapshot)
    figures, figures_error = _figure_rows(incident)
    metric = None if story.snapshot is None else metric_chart(incident, story.snapshot, axis)
    return _template().render(
        incident=incident,
        events=events,
        story=story,
        pinned_only=pinned_only,
        page_url=page_url,
        refresh_seconds=refresh_seconds,
        figures=figures,
        figures_error=figures_error,
        timeline=timeline_chart(incident, events, axis),
        metric=metric,
        snapshot=story.snapshot,
        table_rows=_snapshot_rows(story),
        verifications=verifications(events),
        follow_ups=follow_ups(incident, story, events),
        sections=draft_sections(incident, story, events),
        lanes=LANES,
        width=WIDTH,
        left=LEFT,
        time=_time,
        duration=format_duration,
    )


@dataclass(frozen=True)
class ListFilters:
    """The filters of the incident list (already validated)."""

    states: tuple[str, ...] = ()
    runbook: str | None = None
    layer: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.states or self.runbook or self.layer)


def render_incident_list(
    incidents: Sequence[IncidentView],
    *,
    chosen: ListFilters,
    states: Sequence[str],
    runbooks: Sequence[str],
    layers: Sequence[str],
    refresh_seconds: int,
) -> str:
    """The `/incidents` page: a filter form (plain GET, no script) and the incidents table."""
    rows = [(i, _mttr(i)) for i in incidents]
    return _template("incidents.html.j2").render(
        incidents=rows,
        chosen=chosen,
        states=states,
        runbooks=runbooks,
        layers=layers,
        refresh_seconds=refresh_seconds,
        time=_time,
    )


def _mttr(incident: IncidentView) -> str:
    try:
        return format_duration(incident.figures().mttr)
    except TimestampOrderError:
        return "n/a"


def _figure_rows(incident: IncidentView) -> tuple[list[FigureRow], str | None]:
    try:
        figures = incident.figures()
    except TimestampOrderError as exc:
        return [], f"figures unavailable: {exc}"
    stamps = incident.timestamps()
    rows = []
    for d in DEFINITIONS:
        end_name, start_name = (part.strip() for part in d.formula.split(" - "))
        rows.append(
            FigureRow(
                label=d.label,
                value=format_duration(getattr(figures, d.name)),
                formula=d.formula,
                start_name=start_name,
                start=_time(stamps.get(start_name)),
                end_name=end_name,
                end=_time(stamps.get(end_name)),
            )
        )
    return rows, None


def _snapshot_rows(story: Story) -> list[tuple[str, list[str]]]:
    """The metric chart's data table: one row per time, one column per series."""
    if story.snapshot is None:
        return []
    columns = [dict(s.points) for s in story.snapshot.series]
    times = sorted({at for s in story.snapshot.series for at, _ in s.points})
    return [
        (_time(at), ["—" if at not in c else f"{c[at]:g}" for c in columns]) for at in times
    ]


def _time(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


@cache
def _template(name: str = "postmortem.html.j2") -> Template:
    env = Environment(
        loader=PackageLoader("bot.incidents", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(name)
