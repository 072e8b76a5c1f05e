"""The CLI's human verbs, the same as Slack's: `ack`, `fired`, `note`, `pin`/`unpin`,
`resolve`. Presentation: parses nothing itself (`bot.intake.commands` does), writes through
`bot.incidents.humans`, prints one line per outcome. Light: no engine, Slack or Kubernetes.

The actor is `cli:$USER` unless `--as` names someone (the approvers list uses the same names).
A CLI-written change reaches the incident's Slack message at its next refresh by the bot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.clock import SystemClock
from bot.wiring.database import open_database
from bot.incidents import humans
from bot.incidents.mttr import format_duration
from bot.incidents.reporting import read_incident
from bot.incidents.views import incident_view
from bot.intake.commands import on_day_of, parse_event_id, parse_incident_id, parse_when
from storage.db import session_scope

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from bot.config import Settings
    from bot.cli.terminal import Terminal


def _db(settings: Settings) -> Engine:
    return open_database(settings)


def ack(settings: Settings, term: Terminal, *, ref: str, actor: str) -> int:
    """`gpu-oncall ack INC-N`: exit 0 whether this was the first ack or not (both say who)."""
    number = parse_incident_id(ref)
    with session_scope(_db(settings)) as session:
        done = humans.acknowledge(session, number, actor=actor, at=SystemClock().now())
    if done.stamped:
        term.line(f"{done.ref} acknowledged by {actor}")
    else:
        when = f" at {done.at:%H:%M:%S} UTC" if done.at else ""
        term.line(f"{done.ref} was already acknowledged by {done.by}{when}")
    return 0


def fired(
    settings: Settings, term: Terminal, *, ref: str, when: str, reason: str, actor: str
) -> int:
    """`gpu-oncall fired INC-N <time> [reason]`: date the start of impact; prints the new MTTx."""
    number, moment = parse_incident_id(ref), parse_when(when)
    with session_scope(_db(settings)) as session:
        incident = read_incident(session, number)
        fired_at = on_day_of(moment, incident.detected_at or SystemClock().now())
        humans.correct_fired_at(
            session, number, fired_at=fired_at, actor=actor, at=SystemClock().now(), reason=reason
        )
        figures = incident_view(incident).figures()
    term.line(f"{incident.ref}: fired_at set to {fired_at:%Y-%m-%d %H:%M:%S} UTC by {actor}")
    term.line(
        f"  MTTD {format_duration(figures.mttd)} · MTTA {format_duration(figures.mtta)} · "
        f"MTTM {format_duration(figures.mttm)} · MTTR {format_duration(figures.mttr)}"
    )
    return 0


def note(settings: Settings, term: Terminal, *, ref: str, text: str, pin: bool, actor: str) -> int:
    """`gpu-oncall note INC-N <text> [--pin]`."""
    number = parse_incident_id(ref)
    with session_scope(_db(settings)) as session:
        event = humans.add_note(
            session, number, text=text, actor=actor, at=SystemClock().now(), pinned=pin
        )
    pinned = " (pinned)" if pin else ""
    term.line(f"INC-{number}: note #{event.id} added by {actor}{pinned}")
    return 0


def pin(
    settings: Settings, term: Terminal, *, ref: str, event: str, pinned: bool, actor: str
) -> int:
    """`gpu-oncall pin|unpin INC-N <event>`."""
    number, event_id = parse_incident_id(ref), parse_event_id(event)
    with session_scope(_db(settings)) as session:
        row = humans.set_pinned(
            session, number, event_id=event_id, pinned=pinned, actor=actor, at=SystemClock().now()
        )
        summary = row.summary
    verb = "pinned" if pinned else "unpinned"
    term.line(f"INC-{number}: event #{event_id} {verb} ({summary[:80]})")
    return 0


def resolve(settings: Settings, term: Terminal, *, ref: str, reason: str, actor: str) -> int:
    """`gpu-oncall resolve INC-N --reason TEXT`."""
    number = parse_incident_id(ref)
    with session_scope(_db(settings)) as session:
        now = SystemClock().now()
        incident = humans.resolve(session, number, actor=actor, at=now, reason=reason)
        ref_text = incident.ref
    term.line(f"{ref_text} resolved by {actor}: {reason.strip()}")
    return 0
