"""Incident + timeline -> a postmortem document in Markdown or JSON (pure: no I/O imports).

JSON schema (`"schema": "gpu-oncall/postmortem/v1"`, stable; new keys may be added):

    {
      "schema": "gpu-oncall/postmortem/v1",
      "pinned_only": false,
      "incident": {"id": "INC-7", "number": 7, "runbook", "target", "target_kind", "severity",
                   "title", "state", "layer", "confidence", "culprits": [str],
                   "created_at", "fired_at", "detected_at", "diagnosed_at", "acknowledged_at",
                   "acknowledged_by", "mitigated_at", "resolved_at", "fired_at_corrected_by"},
      "figures": {"mttd", "mtta", "time_to_diagnosis", "mttm", "mttr"},   # seconds or null
      "formulas": {"mttd": "detected_at - fired_at", ...},
      "figures_error": null,      # a message instead of figures when timestamps are corrupt
      "timeline": [{"at", "kind", "actor", "summary", "pinned", "run_id", "step_id",
                    "payload": {}}],
      "story": {"verdict": {}, "approvals": [], "actions": [], "extra_figures": [],
                "snapshot": {"signal", "start", "end", "onset_at",
                             "series": [{"node", "role", "labels", "points": [[at, value]]}]}},
      "sections": {"summary": str, "impact": [str], "root_cause": str, "contributing": [str],
                   "went_well": [str], "went_badly": [str],
                   "action_items": [{"text", "owner", "due", "draft"}]},
      "follow_ups": [str]
    }

Times are ISO 8601 UTC strings (`2026-01-01T00:00:00+00:00`) or null. `parse_postmortem_json`
reads the document back into views. HTML is one self-contained page (`html_page.py`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from bot.errors import UserInputError
from bot.incidents.drafting import Sections, draft_sections
from bot.incidents.mttr import DEFINITIONS, MttrFigures, TimestampOrderError, format_duration
from bot.incidents.story import Story, follow_ups, verifications
from bot.incidents.views import EventView, IncidentView

SCHEMA = "gpu-oncall/postmortem/v1"
FORMATS = ("md", "json", "html")
_TIMESTAMPS = (
    "created_at",
    "fired_at",
    "detected_at",
    "diagnosed_at",
    "acknowledged_at",
    "mitigated_at",
    "resolved_at",
)


class UnsupportedFormatError(UserInputError, ValueError):
    """A postmortem format that cannot be rendered; the message lists the valid formats."""


def render_postmortem(
    incident: IncidentView,
    events: Sequence[EventView],
    fmt: str = "md",
    *,
    pinned_only: bool = False,
    story: Story | None = None,
    page_url: str | None = None,
    refresh_seconds: int | None = None,
) -> str:
    """The postmortem of `incident` as `md`, `json` or `html`; `pinned_only` keeps the curated
    story. `page_url` and `refresh_seconds` concern the HTML page only (its link, and a meta
    refresh for the live page of an open incident)."""
    shown = [e for e in sorted(events, key=lambda e: e.at) if e.pinned or not pinned_only]
    told = story or Story()
    if fmt == "md":
        return _markdown(incident, shown, pinned_only=pinned_only, story=told)
    if fmt == "json":
        document = _document(incident, shown, pinned_only=pinned_only, story=told)
        return json.dumps(document, indent=2) + "\n"
    if fmt == "html":
        from bot.incidents.html_page import render_html_page  # jinja2 only when asked for

        return render_html_page(
            incident,
            shown,
            story=told,
            pinned_only=pinned_only,
            page_url=page_url,
            refresh_seconds=refresh_seconds,
        )
    raise UnsupportedFormatError(
        f"unknown postmortem format '{fmt}' (formats: {', '.join(FORMATS)})"
    )


def _figures(incident: IncidentView) -> tuple[MttrFigures | None, str | None]:
    try:
        return incident.figures(), None
    except TimestampOrderError as exc:
        return None, f"figures unavailable: {exc}"


# -- Markdown -----------------------------------------------------------------------------------


def _markdown(
    incident: IncidentView, events: Sequence[EventView], *, pinned_only: bool, story: Story
) -> str:
    lines = [
        f"# {incident.ref}: {incident.runbook} on {_cell(incident.target)} "
        f"({incident.severity}, {incident.state})",
        "",
        _cell(incident.title),
        "",
        *_summary(incident),
        "",
        *_drafted(draft_sections(incident, story, events)),
        "## Timestamps (UTC)",
        "",
        *_timestamps(incident),
        "",
        "## Figures",
        "",
        *_figure_table(incident, story),
        "",
        *_story_sections(incident, events, story),
        "## Timeline" + (" (pinned events)" if pinned_only else ""),
        "",
        *_timeline(events),
    ]
    return "\n".join(lines) + "\n"


def _drafted(sections: Sections) -> list[str]:
    """Summary, impact, root cause, what went well / badly and action items (drafting.py),
    each ending with a blank line."""
    lines = ["## Summary", "", _cell(sections.summary), "", "## Impact", ""]
    lines += [f"- {_cell(x)}" for x in sections.impact]
    lines += ["", "## Root cause and contributing factors", "", _cell(sections.root_cause), ""]
    lines += [f"- {_cell(x)}" for x in sections.contributing]
    lines += ["", "## What went well", ""]
    lines += [f"- {_cell(x)}" for x in sections.went_well] or ["_Nothing recorded._"]
    lines += ["", "## What went badly", ""]
    lines += [f"- {_cell(x)}" for x in sections.went_badly] or ["_Nothing recorded._"]
    lines += ["", "## Action items", "", "| Item | Owner | Due |", "|---|---|---|"]
    lines += [
        f"| {_cell(i.text)} | {_cell(i.owner or 'unassigned')} | {_cell(i.due or '—')} |"
        for i in sections.action_items
    ] or ["| _none_ | | |"]
    return [*lines, ""]


def _summary(incident: IncidentView) -> list[str]:
    lines = [f"- Target: {_cell(incident.target)} ({incident.target_kind})"]
    if incident.layer:
        confidence = (
            "" if incident.confidence is None else f" (confidence {incident.confidence:.0%})"
        )
        lines.append(f"- Localized to: **{incident.layer}**{confidence}")
    else:
        lines.append("- Localized to: not diagnosed")
    lines.append(f"- Culprits: {_cell(', '.join(incident.culprits)) or 'none'}")
    return lines


def _timestamps(incident: IncidentView) -> list[str]:
    rows = ["| Timestamp | Time | Note |", "|---|---|---|"]
    notes = {
        "fired_at": f"corrected by {incident.fired_at_corrected_by}"
        if incident.fired_at_corrected_by
        else "",
        "acknowledged_at": f"by {incident.acknowledged_by}" if incident.acknowledged_by else "",
    }
    for name in _TIMESTAMPS:
        value = getattr(incident, name)
        rows.append(f"| {name} | {_time(value)} | {_cell(notes.get(name, ''))} |")
    return rows


def _figure_table(incident: IncidentView, story: Story) -> list[str]:
    figures, error = _figures(incident)
    if figures is None:
        return [f"_{error}_"]
    rows = ["| Figure | Value | Formula |", "|---|---|---|"]
    for d in DEFINITIONS:
        rows.append(f"| {d.label} | {format_duration(getattr(figures, d.name))} | {d.formula} |")
    for x in story.extra_figures:
        rows.append(f"| {_cell(x.label)} | {_cell(x.value)} | {_cell(x.formula)} |")
    rows += [
        "",
        "All figures are measured from fired_at (start of impact), except time to "
        "diagnosis, which is measured from detected_at.",
    ]
    return rows


def _story_sections(
    incident: IncidentView, events: Sequence[EventView], story: Story
) -> list[str]:
    """Evidence, actions, verification and follow-ups, each ending with a blank line."""
    lines = ["## Evidence", ""]
    evidence = story.evidence()
    if evidence:
        lines += ["| Finding | Summary | Cited |", "|---|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(s)} | {_cell(c)} |" for k, s, c in evidence]
    else:
        lines.append("_No findings._")
    lines += [
        "",
        f"- Ruled out: {', '.join(story.ruled_out()) or 'none'}",
        f"- Missing signals: {', '.join(story.missing_signals()) or 'none'}",
    ]
    if story.snapshot is not None:
        onset = story.snapshot.onset_at
        lines.append(
            f"- Evidence snapshot: {story.snapshot.signal}, {len(story.snapshot.series)} series, "
            f"{_time(story.snapshot.start)} to {_time(story.snapshot.end)} UTC"
            + (f", fault onset {_time(onset)}" if onset else "")
        )
    lines += ["", "## Actions", "", *_actions(story), "", "## Verification", ""]
    checks = verifications(events)
    lines += [f"- {_time(e.at)}: {_cell(e.summary)}" for e in checks] or ["_No verification ran._"]
    lines += ["", "## Follow-ups", ""]
    lines += [f"- {_cell(item)}" for item in follow_ups(incident, story, events)] or ["_None._"]
    return [*lines, ""]


def _actions(story: Story) -> list[str]:
    rows = []
    for a in story.approvals:
        who = f" by {_cell(a.actor)}" if a.actor else ""
        rows.append(f"- Approval ({a.step_id}): {a.state}{who} at {_time(a.decided_at)}")
    if story.actions:
        header = "| Action | Target | Status | Result | Finished (UTC) |"
        rows += ["", header, "|---|---|---|---|---|"]
        rows += [
            f"| {a.action} | {_cell(a.target)} | {a.status} | {_cell(a.detail)} "
            f"| {_time(a.finished_at)} |"
            for a in story.actions
        ]
    return rows or ["_No actions were carried out._"]


def _timeline(events: Sequence[EventView]) -> list[str]:
    if not events:
        return ["_No events._"]
    rows = ["| Time (UTC) | Actor | Event | Summary |", "|---|---|---|---|"]
    for e in events:
        marker = " (pinned)" if e.pinned else ""
        rows.append(f"| {_time(e.at)} | {_cell(e.actor)} | {e.kind}{marker} | {_cell(e.summary)} |")
    return rows


def _time(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell, and inert when the Markdown is rendered to HTML:
    `<`, `>` and `&` are escaped (a `<script>` in an alert label or a note stays text)."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


# -- JSON ---------------------------------------------------------------------------------------


def _document(
    incident: IncidentView, events: Sequence[EventView], *, pinned_only: bool, story: Story
) -> dict[str, Any]:
    figures, error = _figures(incident)
    return {
        "schema": SCHEMA,
        "pinned_only": pinned_only,
        "incident": incident.to_dict(),
        "figures": figures.as_seconds() if figures else {d.name: None for d in DEFINITIONS},
        "formulas": {d.name: d.formula for d in DEFINITIONS},
        "figures_error": error,
        "timeline": [e.to_dict() for e in events],
        "story": story.to_dict(),
        "sections": draft_sections(incident, story, events).to_dict(),
        "follow_ups": follow_ups(incident, story, events),
    }


def parse_postmortem_json(text: str) -> tuple[IncidentView, list[EventView]]:
    """Read a JSON postmortem (schema above) back into views."""
    data = json.loads(text)
    if data.get("schema") != SCHEMA:
        raise UserInputError(f"not a gpu-oncall postmortem (expected schema '{SCHEMA}')")
    raw = dict(data["incident"])
    raw.pop("id")
    raw["id"] = raw.pop("number")
    raw["culprits"] = tuple(raw.get("culprits") or ())
    for name in _TIMESTAMPS:
        raw[name] = _parse_time(raw.get(name))
    known = {f.name for f in fields(IncidentView)}
    incident = IncidentView(**{k: v for k, v in raw.items() if k in known})
    return incident, [_event_from(item) for item in data["timeline"]]


def _event_from(item: Mapping[str, Any]) -> EventView:
    at = _parse_time(item["at"])
    if at is None:
        raise UserInputError("postmortem timeline event without a time")
    return EventView(
        at=at,
        kind=str(item["kind"]),
        actor=str(item["actor"]),
        summary=str(item["summary"]),
        payload=dict(item.get("payload") or {}),
        pinned=bool(item.get("pinned", False)),
        run_id=item.get("run_id"),
        step_id=item.get("step_id"),
        id=item.get("id"),
        pinned_by=item.get("pinned_by"),
    )


def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
