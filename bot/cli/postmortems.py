"""`gpu-oncall postmortem INC-N [--format md|json|html] [--pinned] [-o PATH]`: export one
incident's postmortem, with its evidence, actions and (HTML) both charts.

Presentation for the CLI: reads through `bot.incidents.reporting`, writes stdout or a file.
Imported lazily by `bot.cli.main` (only this command pays for jinja2 and the database).
"""

from __future__ import annotations

from pathlib import Path

from bot.cli.terminal import Terminal
from bot.clock import SystemClock
from bot.config import Settings
from bot.errors import UserInputError
from bot.incidents.reporting import read_incident, read_postmortem
from bot.wiring.runtime import open_database
from storage.db import session_scope


def postmortem(
    settings: Settings,
    term: Terminal,
    *,
    ref: str,
    fmt: str,
    pinned: bool,
    output: Path | None = None,
) -> int:
    """Print the postmortem, or write it to `output` and print the path (and the page's URL
    when `pages.base_url` is set)."""
    db = open_database(settings)
    try:
        with session_scope(db) as session:
            incident = read_incident(session, ref)
            document = read_postmortem(
                session,
                incident.id or 0,
                fmt=fmt,
                pinned_only=pinned,
                page_url=settings.pages.incident_url(incident.ref),
                now=SystemClock().now(),
            )
    finally:
        db.dispose()
    if output is None:
        term.line(document.rstrip("\n"))
        return 0
    write_document(output, document)
    term.line(f"{incident.ref} postmortem ({fmt}) written to {output}")
    url = settings.pages.incident_url(incident.ref)
    if url:
        term.line(f"live page: {url}")
    return 0


def write_document(path: Path, document: str) -> None:
    """Write `document` to `path`; a path that cannot be written is bad input (exit 2)."""
    try:
        path.write_text(document, encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"cannot write the postmortem to {path}: {exc.strerror}") from exc


def add_action_item(
    settings: Settings,
    term: Terminal,
    *,
    ref: str,
    owner: str,
    text: str,
    due: str | None,
    actor: str,
) -> int:
    """`gpu-oncall action INC-N @owner TEXT... [--due YYYY-MM-DD]`."""
    from bot.incidents import writing

    when = writing.parse_due(due)
    db = open_database(settings)
    try:
        with session_scope(db) as session:
            incident = read_incident(session, ref)
            writing.add_action_item(
                session,
                incident,
                owner=owner,
                text=text,
                due=when,
                actor=actor,
                at=SystemClock().now(),
            )
    finally:
        db.dispose()
    term.line(f"{incident.ref}: action item for {owner} recorded (it is in the postmortem)")
    return 0


def write_section(
    settings: Settings, term: Terminal, *, ref: str, section: str, text: str, actor: str
) -> int:
    """`gpu-oncall section INC-N SECTION TEXT...`: a prose section in the person's words."""
    from bot.incidents import writing

    db = open_database(settings)
    try:
        with session_scope(db) as session:
            incident = read_incident(session, ref)
            writing.write_section(
                session, incident, section=section, text=text, actor=actor, at=SystemClock().now()
            )
    finally:
        db.dispose()
    term.line(f"{incident.ref}: postmortem section {section} written; drafts no longer replace it")
    return 0
