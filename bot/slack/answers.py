"""Block Kit answers to `/gpu` commands: incident lists, one incident, MTTR, runbooks, help and
dry-run previews. Pure, like `blocks.py`, whose limits (`fit`) every answer goes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.incidents.mttr import DEFINITIONS, TimestampOrderError, format_duration
from bot.incidents.views import EventView, IncidentView
from bot.slack import messages
from bot.slack.kit import Block, Line, context, divider, escape, fit, render_line, section
from bot.slack.messages import mention
from bot.slack.page_link import PageLink

MAX_LISTED = 20
MAX_EVENTS = 15


@dataclass(frozen=True)
class RunbookRow:
    name: str
    title: str
    alerts: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    storms: tuple[str, ...] = ()


def help_blocks(usage: Sequence[tuple[str, str]], verbs: Mapping[str, str]) -> list[Block]:
    """`/gpu help`: the grammar, plus the verbs runbooks add (verb -> runbook)."""
    lines = [messages.HELP_TITLE, *(f"`/gpu {cmd}`  {text}" for cmd, text in usage)]
    lines += [f"`/gpu {verb} <target> [key=value ...]`  runs `{rb}`" for verb, rb in verbs.items()]
    return fit([section("\n".join(lines)), context([messages.HELP_FOOTER])], pointer="")


def incidents_blocks(views: Sequence[IncidentView], *, include_resolved: bool) -> list[Block]:
    """`/gpu incidents`: newest first, one line each."""
    if not views:
        text = messages.NO_INCIDENTS_AT_ALL if include_resolved else messages.NO_INCIDENTS
        return [section(text)]
    lines = [f"*{'All' if include_resolved else 'Open'} incidents* ({len(views)})"]
    for v in views[:MAX_LISTED]:
        layer = f" · `{v.layer}`" if v.layer else ""
        lines.append(
            f"`{v.ref}` *{v.state}* · {v.severity} · {v.runbook} · `{v.target}`{layer} · "
            f"{escape(v.title)}"
        )
    blocks = [section("\n".join(lines))]
    if len(views) > MAX_LISTED:
        blocks.append(context([f"{len(views) - MAX_LISTED} more not shown"]))
    return fit(blocks, pointer="`/gpu incident <id>` for one")


def incident_blocks(
    view: IncidentView, events: Sequence[EventView], link: PageLink | None = None
) -> list[Block]:
    """`/gpu incident INC-7`: state, verdict, figures, the latest timeline events and a fresh
    page link (`link`: signed now, so it replaces one that expired in the triage message)."""
    culprits = ", ".join(view.culprits) or "none"
    layer = f"`{view.layer}` ({view.confidence or 0:.0%})" if view.layer else "not yet diagnosed"
    ack = f" · acknowledged by {mention(view.acknowledged_by)}" if view.acknowledged_by else ""
    head = (
        f"*{view.ref}* {escape(view.title)}\n*{view.state}* · {view.severity} · runbook "
        f"`{view.runbook}` · target `{view.target}`{ack}\n*Layer:* {layer} · *Culprits:* {culprits}"
    )
    blocks = [section(head), section(_figures(view))]
    shown = list(events)[-MAX_EVENTS:]
    lines = [f"`{e.at:%H:%M:%S}` {mention(e.actor)} {escape(e.summary)}" for e in shown]
    if len(events) > len(shown):
        lines.insert(0, f"… {len(events) - len(shown)} earlier events")
    blocks += [divider(), section("*Timeline*\n" + "\n".join(lines))]
    pointer = messages.FULL_REPORT.format(ref=view.ref)
    if link is not None and link.url:
        page = messages.incident_page_link(view.ref, link.url, link.auth, link.until)
        pointer = f"{page} · `/gpu postmortem {view.ref}`"
    return fit([*blocks, context([pointer])], pointer=pointer)


def _figures(view: IncidentView) -> str:
    try:
        figures = view.figures()
    except TimestampOrderError as exc:
        return f"*Figures unavailable:* {escape(str(exc))}"
    parts = [
        f"{d.label} {format_duration(getattr(figures, d.name))}"
        for d in DEFINITIONS
        if getattr(figures, d.name) is not None
    ]
    return "*Figures:* " + (" · ".join(parts) or "none yet")


def runbooks_blocks(rows: Sequence[RunbookRow]) -> list[Block]:
    """`/gpu runbooks`: name, title and what triggers each."""
    if not rows:
        return [section(messages.NO_RUNBOOKS)]
    lines = ["*Runbooks*"]
    for row in rows:
        alerts = ", ".join(row.alerts) or "-"
        verbs = ", ".join(f"`/gpu {v}`" for v in row.verbs) or f"`/gpu run {row.name}`"
        storms = f" · storms of: {', '.join(row.storms)}" if row.storms else ""
        lines.append(f"`{row.name}` {escape(row.title)} · alerts: {alerts} · {verbs}{storms}")
    return fit([section("\n".join(lines))], pointer="`gpu-oncall runbooks list`")


def preview_blocks(ref: str, lines: Sequence[Line]) -> list[Block]:
    """The dry-run reply in a triage thread: what each proposed action would do now."""
    text = messages.dry_run_title(ref) + "\n" + "\n".join(render_line(line) for line in lines)
    return fit([section(text)], pointer=messages.FULL_REPORT.format(ref=ref))
