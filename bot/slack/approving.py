"""Approval buttons: Approve, Reject, each action's own Approve and the drain plan's Drain now
and Cancel are a thin adapter over the approval use case (bot/engine/approving.py), exactly as
`gpu-oncall approve|reject [--only ACTION]` is: one read of the approval, one resolution of the
policy (approvers, two-person rule, expiry), one conditional decision. Dry run previews the
actions and changes nothing.

This module only turns a click into a `Decide` (the clicker's user groups are looked up among
the approvers the use case resolved) and renders the outcome: the live message is updated as
the run goes on and when it stops; a refusal (on the timeline already) or a click on an
approval someone already decided comes back to the person who clicked as an ephemeral reply
(bot/slack/failures.py), an approval given after its expiry as an ephemeral "expired".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.engine.approving import Approving
from bot.engine.decisions import Decide, Decided, NotPending, Outcome, Refused
from bot.errors import NotFound, PolicyDenied, RunStateError, UserInputError
from bot.slack import messages
from bot.slack.answers import preview_blocks
from bot.slack.deps import Reply, SlackDeps
from bot.slack.previewing import preview
from bot.slack.triaging import LiveTriage, TriageMessages
from storage.incidents import parse_incident_ref
from storage.tables import ApprovalRow

REJECT_REASON = "rejected in Slack"


class ButtonValue(BaseModel):
    """The value of an approval button (JSON written by `blocks._buttons`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str
    incident: str
    only: str | None = None
    """A per-action button: approve this action alone (as `gpu-oncall approve --only`)."""


def parse_button_value(value: str) -> ButtonValue:
    try:
        return ButtonValue.model_validate_json(value)
    except ValidationError as exc:
        raise UserInputError(messages.FOREIGN_BUTTON) from exc


class Approvals:
    """Handles the buttons of a triage message."""

    def __init__(self, deps: SlackDeps, messages: TriageMessages) -> None:
        self.deps, self.messages = deps, messages
        self.deciding = Approving.of(deps.rt.engine)

    def decide(
        self, *, decision: str, value: ButtonValue, user: str, channel: str, ts: str, reply: Reply
    ) -> None:
        """Approve or reject; the run continues to its end on the run pool's thread."""
        incident_id = parse_incident_ref(value.incident)
        if incident_id is None:
            raise UserInputError(messages.FOREIGN_BUTTON)
        live = _Live(self.messages, incident_id=incident_id, channel=channel, ts=ts, run=value.run)
        request = Decide(
            ref=value.run,
            decision=decision,
            actor=user,
            reason=REJECT_REASON if decision == "reject" else "",
            only=(value.only,) if value.only and decision == "approve" else (),
            groups=lambda approvers: self.deps.groups.groups_of(user, among=approvers),
        )
        self._render(self.deciding.decide(request, on_step=live.on_step), live, reply)

    def dry_run(self, *, value: ButtonValue, user: str, channel: str, ts: str) -> None:
        """Reply in the thread with what each proposed action would do now."""
        shown = self.deciding.shown(value.run)
        if shown is None:
            raise RunStateError(messages.no_approval(value.run))
        if not isinstance(shown, tuple):
            raise NotFound(messages.unknown_run(value.run))
        run, approval = shown
        proposals: list[Mapping[str, Any]] = list(approval.payload.get("proposals", []))
        lines = [preview(self.deps.rt.deps.cluster, p) for p in proposals]
        live = self.messages.adopt(
            incident_id=run.incident_id, channel=channel, ts=ts, run_id=run.id
        )
        ref = f"INC-{run.incident_id}"
        self.messages.reply(
            live, text=messages.dry_run_title(ref), blocks=preview_blocks(ref, lines)
        )
        summary = "; ".join(line.text for line in lines)
        self.deciding.note(run, user, messages.dry_run_note(user, summary))

    def _render(self, outcome: Outcome, live: _Live, reply: Reply) -> None:
        """The live message for a decision; an ephemeral reply for the rest."""
        if isinstance(outcome, Decided):
            live.adopted().finish(outcome.outcome, decided=True)
            if outcome.state == "expired" and outcome.approval is not None:
                reply(
                    text=_expired(outcome, outcome.approval),
                    response_type="ephemeral",
                    replace_original=False,
                )
            return
        if isinstance(outcome, Refused):
            live.adopted()
            raise PolicyDenied(outcome.reason)
        if isinstance(outcome, NotPending):
            if outcome.decided is not None:
                raise RunStateError(_already(outcome.decided))
            raise RunStateError(outcome.busy or messages.no_approval(live.run))
        raise NotFound(messages.unknown_run(outcome.ref))


class _Live:
    """The clicked message, made the run's live message when the decision goes through (as the
    run's first step is told, or when it stops) or is refused; left alone otherwise."""

    def __init__(
        self, messages: TriageMessages, *, incident_id: int, channel: str, ts: str, run: str
    ) -> None:
        self.messages, self.incident_id, self.channel, self.ts = messages, incident_id, channel, ts
        self.run = run
        self._live: LiveTriage | None = None

    def adopted(self) -> LiveTriage:
        if self._live is None:
            self._live = self.messages.adopt(
                incident_id=self.incident_id, channel=self.channel, ts=self.ts, run_id=self.run
            )
        return self._live

    def on_step(self, step_id: str, output: Mapping[str, Any]) -> None:
        self.adopted().on_step(step_id, output)


def _expired(outcome: Decided, approval: ApprovalRow) -> str:
    run = outcome.run
    inputs = " ".join(f"{k}={v}" for k, v in run.inputs.items() if k != "requester")
    return messages.expired(
        ref=f"INC-{run.incident_id}",
        expires_at=approval.expires_at,
        retry=f"/gpu run {run.runbook} {inputs}".strip(),
    )


def _already(approval: ApprovalRow) -> str:
    return messages.already_decided(
        state=approval.state, actor=approval.actor, at=approval.decided_at
    )
