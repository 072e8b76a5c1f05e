"""Bolt listeners for `/gpu` and the approval buttons: acknowledge first, then hand off.

Bolt acknowledges on its request thread as soon as `ack()` is called and runs the rest of the
listener on its executor; runs and resumes then go to the run pool, so no request waits for a
runbook. Payloads are validated with pydantic at this edge; only routing keys are logged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from slack_bolt import Ack, App, BoltContext, Respond

from bot.errors import UserInputError
from bot.slack import messages
from bot.slack.approving import Approvals, ButtonValue, parse_button_value
from bot.slack.blocks import ACTION_IDS
from bot.slack.deps import SlackDeps
from bot.slack.failures import guarded, report_failure, trusted_reply
from bot.slack.replying import Replies
from storage.incidents import parse_incident_ref

logger = logging.getLogger(__name__)


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class CommandBody(_Edge):
    user_id: str
    channel_id: str
    text: str = ""


class _Id(_Edge):
    id: str


class _Container(_Edge):
    channel_id: str
    message_ts: str


class _Action(_Edge):
    action_id: str
    value: str = ""


class ActionBody(_Edge):
    user: _Id
    container: _Container
    actions: list[_Action]


class Click(BaseModel):
    """One click on a triage message's button: who, where, and which run."""

    model_config = ConfigDict(frozen=True)

    user: str
    channel: str
    ts: str
    value: ButtonValue


def parse_click(body: dict[str, Any]) -> Click:
    try:
        action = ActionBody.model_validate(body)
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"])
        raise UserInputError(messages.unexpected_payload("action", where)) from exc
    return Click(
        user=action.user.id,
        channel=action.container.channel_id,
        ts=action.container.message_ts,
        value=parse_button_value(action.actions[0].value if action.actions else ""),
    )


@contextmanager
def reported(respond: Respond | None, context: BoltContext, deps: SlackDeps) -> Iterator[None]:
    """Report what a listener raises after `ack()` here, never to bolt: its thread runner,
    seeing a listener fail after the ack, rewrites the response it is about to return from
    another thread, and the request can come back as a 404 "unhandled request"."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001  (boundary: the same report as bolt's @app.error)
        reply = trusted_reply(respond, context)
        incident_id: Any = context.get("incident_id")
        report_failure(exc, reply=reply, deps=deps, incident_id=incident_id)


def register(app: App, *, deps: SlackDeps, replies: Replies, approvals: Approvals) -> None:
    """Attach the listeners to `app`."""

    @app.command("/gpu")
    def gpu_command(ack: Ack, body: dict[str, Any], respond: Respond, context: BoltContext) -> None:
        ack()
        with reported(respond, context, deps):
            try:
                command = CommandBody.model_validate(body)
            except ValidationError as exc:
                raise UserInputError(messages.unexpected_payload("command")) from exc
            logger.info("/gpu from %s in %s", command.user_id, command.channel_id)
            replies.handle(
                command.text, user=command.user_id, channel=command.channel_id, reply=respond
            )

    def decide(decision: str) -> Callable[[Ack, dict[str, Any], Respond, BoltContext], None]:
        def on_click(
            ack: Ack, body: dict[str, Any], respond: Respond, context: BoltContext
        ) -> None:
            ack()
            with reported(respond, context, deps):
                click = parse_click(body)
                incident_id = parse_incident_ref(click.value.incident)
                context["incident_id"] = incident_id
                logger.info("%s on %s by %s", decision, click.value.incident, click.user)

                def job() -> None:
                    approvals.decide(
                        decision=decision,
                        value=click.value,
                        user=click.user,
                        channel=click.channel,
                        ts=click.ts,
                        reply=respond,
                    )

                deps.runs.submit(guarded(job, reply=respond, deps=deps, incident_id=incident_id))

        return on_click

    app.action(ACTION_IDS["approve"])(decide("approve"))
    app.action(re.compile(f"^{ACTION_IDS['approve_only']}:"))(decide("approve"))
    app.action(ACTION_IDS["reject"])(decide("reject"))
    app.action(ACTION_IDS["drain_now"])(decide("approve"))  # a drain waiting for its checkpoint
    app.action(ACTION_IDS["drain_cancel"])(decide("reject"))

    @app.action(ACTION_IDS["dry_run"])
    def dry_run(ack: Ack, body: dict[str, Any], respond: Respond, context: BoltContext) -> None:
        ack()
        with reported(respond, context, deps):
            click = parse_click(body)
            context["incident_id"] = parse_incident_ref(click.value.incident)
            approvals.dry_run(
                value=click.value, user=click.user, channel=click.channel, ts=click.ts
            )
