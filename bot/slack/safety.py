"""`/gpu pause <reason>`, `/gpu resume` and `/gpu breaker status|reset [reason]` in Slack.

Presentation over `bot.actions.breaker` (the same switches as the CLI's). A pause and a resume
are answered in the channel, so everyone there sees who stopped or restarted the bot and why;
the breaker's status is ephemeral. Approver checks resolve the person's user groups first, as
approvals do; a refusal is a PolicyDenied the Slack error handler turns into an ephemeral reply.
"""

from __future__ import annotations

from bot.actions import breaker
from bot.intake import commands as grammar
from bot.slack import messages
from bot.slack.deps import Reply, SlackDeps
from storage.db import session_scope

SafetyCommand = grammar.Breaker | grammar.PauseActions | grammar.ResumeActions


def handle(command: SafetyCommand, *, deps: SlackDeps, user: str, reply: Reply) -> None:
    """Carry out one safety command for `user` and answer."""
    approvers = deps.config.policy.approvers
    groups = deps.groups.groups_of(user, among=approvers)
    limits = breaker.safety_limits(deps.config)
    now = deps.clock.now()
    with session_scope(deps.db) as session:
        match command:
            case grammar.PauseActions(reason=reason):
                noted = breaker.pause(session, reason=reason, actor=user, at=now)
                text, where = messages.paused(user, reason, noted), "in_channel"
            case grammar.ResumeActions():
                ended, noted = breaker.resume(
                    session, approvers=approvers, actor=user, at=now, groups=groups
                )
                text, where = messages.resumed(user, [p.reason for p in ended], noted), "in_channel"
            case grammar.Breaker(action="reset", reason=reason):
                status = breaker.reset(
                    session,
                    limits,
                    approvers=approvers,
                    actor=user,
                    reason=reason,
                    at=now,
                    groups=groups,
                )
                text = messages.breaker_reset(user, reason, status.lines(limits))
                where = "in_channel"
            case _:
                status = breaker.read_status(session, limits, at=now)
                text, where = messages.breaker_status(status.lines(limits)), "ephemeral"
    reply(text=text, response_type=where)
