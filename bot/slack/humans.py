"""`/gpu fired`, `/gpu note`, `/gpu pin`/`unpin`, `/gpu resolve` and `/gpu mttr` in Slack: a
person puts something on an incident's record, or reads the figures. Presentation only: the
writes are `bot.incidents.humans` (shared with the CLI), the table `bot.incidents.mttr_groups`.

Answers are ephemeral to the person; a change to the record also re-renders the incident's
live messages, so everyone in the channel sees the new state, note or MTTx.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.incidents import humans, writing
from bot.incidents.mttr import format_duration
from bot.incidents.mttr_groups import Group, formulas, render_table
from bot.incidents.reporting import read_incident, read_mttr_groups
from bot.incidents.views import incident_view
from bot.intake import commands as grammar
from bot.slack import messages
from bot.slack.deps import Reply, SlackDeps
from bot.slack.kit import Block, context, fit, section
from storage.db import session_scope

Refresh = Callable[[int], None]


def record(
    command: grammar.FiredAt | grammar.Note | grammar.Pin | grammar.Resolve,
    *,
    deps: SlackDeps,
    user: str,
    reply: Reply,
    refresh: Refresh,
) -> None:
    """Carry out one human verb for `user`, answer them, and refresh the incident's messages."""
    now = deps.clock.now()
    number = command.incident_id
    with session_scope(deps.db) as session:
        match command:
            case grammar.FiredAt(when=when, reason=reason):
                incident = read_incident(session, number)
                fired_at = grammar.on_day_of(when, incident.detected_at or now)
                humans.correct_fired_at(
                    session, number, fired_at=fired_at, actor=user, at=now, reason=reason
                )
                shown = incident_view(incident).figures()
                text = (
                    f"{incident.ref}: impact began {fired_at:%Y-%m-%d %H:%M:%S} UTC (set by you). "
                    f"MTTD {format_duration(shown.mttd)} · MTTA {format_duration(shown.mtta)} · "
                    f"MTTR {format_duration(shown.mttr)}"
                )
            case grammar.Note(text=note):
                event = humans.add_note(session, number, text=note, actor=user, at=now)
                text = f"INC-{number}: note #{event.id} added to the timeline"
            case grammar.Pin(event_id=event_id, pinned=pinned):
                humans.set_pinned(
                    session, number, event_id=event_id, pinned=pinned, actor=user, at=now
                )
                verb = "pinned into" if pinned else "taken out of"
                text = f"INC-{number}: event #{event_id} {verb} the postmortem story"
            case grammar.Resolve(reason=reason):
                incident = humans.resolve(session, number, actor=user, at=now, reason=reason)
                text = f"{incident.ref} resolved by {messages.mention(user)}: {reason}"
    reply(text=text, response_type="ephemeral")
    refresh(number)


def postmortem_text(
    command: grammar.ActionItem | grammar.Section, *, deps: SlackDeps, user: str, reply: Reply
) -> None:
    """`/gpu action` and `/gpu section`: what a person adds to the postmortem, stored as the
    CLI's `gpu-oncall action` / `section` store it (bot/incidents/writing.py)."""
    now = deps.clock.now()
    with session_scope(deps.db) as session:
        incident = read_incident(session, command.incident_id)
        match command:
            case grammar.ActionItem(owner=owner, text=item, due=due):
                writing.add_action_item(
                    session, incident, owner=owner, text=item, due=due, actor=user, at=now
                )
                text = messages.action_item_added(incident.ref, owner, due)
            case grammar.Section(section=name, text=prose):
                writing.write_section(
                    session, incident, section=name, text=prose, actor=user, at=now
                )
                text = messages.section_written(incident.ref, name)
    reply(text=text, response_type="ephemeral")


def mttr(command: grammar.Mttr, *, deps: SlackDeps, reply: Reply) -> None:
    """`/gpu mttr [window] [by runbook|layer|week]`: p50/p90 per group and GPU-hours."""
    until = deps.clock.now()
    with session_scope(deps.db) as session:
        groups = read_mttr_groups(session, since=until - command.window, until=until, by=command.by)
    blocks = mttr_blocks(command.label, groups, by=command.by)
    reply(text=f"MTTR {command.label}", blocks=blocks, response_type="ephemeral")


def mttr_blocks(label: str, groups: list[Group], *, by: str) -> list[Block]:
    """The table in a code block, titled with the window and count, formulas underneath."""
    total = sum(g.incidents for g in groups if g.key != "all")
    if total == 0:
        return [section(messages.mttr_empty(label))]
    table = "```\n" + "\n".join(render_table(groups, by=by)) + "\n```"
    notes = [
        "p50 / p90 (nearest rank) · " + " · ".join(formulas()),
        "GPU-hours = node GPUs out of service × time + job GPUs idle × incident duration "
        "(`gpu-oncall incident INC-N` shows each incident's numbers)",
    ]
    blocks = [section(messages.mttr_title(label, total)), section(table), context(notes)]
    return fit(blocks, pointer="`gpu-oncall mttr --json` for every figure")
