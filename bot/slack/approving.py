"""Approval buttons: Approve, Reject and each action's own Approve resume the interrupted run
through `RunEngine.resume`, exactly as `gpu-oncall approve [--only ACTION]` does (one decision
path: the engine reads the approval once and checks the policy against the approved actions'
risks); Dry run previews the actions and changes nothing.

Policy is the engine's (approvers, two-person rule, expiry, blast radius); this module only
resolves the clicker's user groups first. A refusal is recorded on the timeline and re-raised,
so the person who clicked gets the reason as an ephemeral reply. A second click finds the
approval decided (the database decides, once) and is told who decided it and when.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.actions.policy import approvers_of
from bot.engine import deferred
from bot.engine.schema import StepKind
from bot.errors import NotFound, PolicyDenied, RunStateError, UserInputError
from bot.incidents import lifecycle
from bot.incidents.timeline import BOT, EventKind
from bot.slack import messages
from bot.slack.answers import preview_blocks
from bot.slack.deps import Reply, SlackDeps
from bot.slack.previewing import preview
from bot.slack.triaging import LiveTriage, TriageMessages
from storage import approvals as approval_store
from storage import runs as run_store
from storage.db import session_scope
from storage.tables import ApprovalRow, RunbookRun

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
    """Handles the three buttons of a triage message."""

    def __init__(self, deps: SlackDeps, messages: TriageMessages) -> None:
        self.deps, self.messages = deps, messages

    def decide(
        self, *, decision: str, value: ButtonValue, user: str, channel: str, ts: str, reply: Reply
    ) -> None:
        """Approve or reject; the run continues to its end on the run pool's thread."""
        rt = self.deps.rt
        run, _approval = self._pending(value.run)
        live = self.messages.adopt(
            incident_id=run.incident_id, channel=channel, ts=ts, run_id=run.id
        )
        groups: frozenset[str] = frozenset()
        if decision == "approve":
            approvers = approvers_of(rt.engine.policy_for(run.runbook), run.runbook)
            groups = self.deps.groups.groups_of(user, among=approvers)
        try:
            outcome = rt.engine.resume(
                run.id,
                decision=decision,
                actor=user,
                reason=REJECT_REASON if decision == "reject" else "",
                groups=groups,
                on_step=live.on_step,
                only=[value.only] if value.only and decision == "approve" else (),
            )
        except PolicyDenied as exc:
            self._note(run, user, messages.approval_refused_note(user, exc.reason))
            raise
        except RunStateError as exc:
            _run, decided = self._approval(run.id)
            raise RunStateError(_already(decided)) from exc
        live.finish(outcome, decided=True)
        self._tell_if_expired(run, live, reply)

    def dry_run(self, *, value: ButtonValue, user: str, channel: str, ts: str) -> None:
        """Reply in the thread with what each proposed action would do now."""
        run, approval = self._approval(value.run)
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
        self._note(run, user, messages.dry_run_note(user, summary))

    # -- reads and notes -----------------------------------------------------------------------
    def _approval(self, run_id: str) -> tuple[RunbookRun, ApprovalRow]:
        rt = self.deps.rt
        with session_scope(rt.db) as session:
            run = run_store.get_run(session, run_id)
            if run is None:
                raise NotFound(messages.unknown_run(run_id))
            pending = approval_store.pending_approval_for(session, run_id=run_id)
            if pending is not None:  # also the rest of a partial approval (`--only`)
                return run, pending
            loaded = rt.catalog.get(run.runbook)
            for step in loaded.runbook.steps:
                if step.kind is StepKind.APPROVE:
                    row = approval_store.get_approval_for_step(
                        session, run_id=run_id, step_id=step.id
                    )
                    if row is not None:
                        return run, row
        raise RunStateError(messages.no_approval(run_id))

    def _pending(self, run_id: str) -> tuple[RunbookRun, ApprovalRow]:
        """The run and its approval, still to decide; or already approved with a drain that
        waits for the next checkpoint (the drain-now and cancel buttons decide that)."""
        run, approval = self._approval(run_id)
        if approval.state != approval_store.PENDING and not self._drain_waits(run_id):
            raise RunStateError(_already(approval))
        return run, approval

    def _drain_waits(self, run_id: str) -> bool:
        with session_scope(self.deps.rt.db) as session:
            return deferred.waiting_plan(session, run_id) is not None

    def _tell_if_expired(self, run: RunbookRun, live: LiveTriage, reply: Reply) -> None:
        _run, approval = self._approval(run.id)
        if approval.state != "expired":
            return
        inputs = " ".join(f"{k}={v}" for k, v in run.inputs.items() if k != "requester")
        text = messages.expired(
            ref=f"INC-{run.incident_id}",
            expires_at=approval.expires_at,
            retry=f"/gpu run {run.runbook} {inputs}".strip(),
        )
        reply(text=text, response_type="ephemeral", replace_original=False)

    def _note(self, run: RunbookRun, user: str, text: str) -> None:
        rt = self.deps.rt
        with session_scope(rt.db) as session:
            lifecycle.record(
                session,
                incident_id=run.incident_id,
                kind=EventKind.NOTE,
                at=rt.clock.now(),
                actor=user or BOT,
                summary=text,
                run_id=run.id,
            )


def _already(approval: ApprovalRow) -> str:
    return messages.already_decided(
        state=approval.state, actor=approval.actor, at=approval.decided_at
    )
