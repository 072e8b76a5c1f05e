"""What a person decides about an approval and what came of it: the request and the typed
outcomes of the approval use case (bot/engine/approving.py), which the adapters render (Slack:
the live message, or an ephemeral reply; the CLI: text and an exit code)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Literal

from bot.engine.outcomes import RunOutcome
from bot.errors import NotFound, PolicyDenied, RunStateError, UserInputError
from storage.tables import ApprovalRow, RunbookRun

Verdict = Literal["approve", "reject"]
GroupsOf = Callable[[frozenset[str]], Collection[str]]
"""The decider's groups among the approvers given (e.g. Slack user groups)."""


def no_groups(approvers: frozenset[str]) -> Collection[str]:
    return ()


@dataclass(frozen=True)
class Decide:
    """Who decides what, about which approval."""

    ref: str
    """A run id (or a prefix of at least 6 characters) or an incident (INC-7, 7)."""
    decision: str
    actor: str
    reason: str = ""
    only: tuple[str, ...] = ()
    """Approve these actions alone (the others stay pending); `reject --only drain` cancels a
    drain that waits for the next checkpoint."""
    groups: GroupsOf = field(default=no_groups)

    def verdict(self) -> Verdict:
        if self.decision == "approve":
            return "approve"
        if self.decision == "reject":
            return "reject"
        raise UserInputError(f"decision must be approve or reject, not '{self.decision}'")


@dataclass(frozen=True)
class Decided:
    """The decision was recorded (or a waiting drain hurried or cancelled, or a resumption cut
    short taken over) and the run went on to where it stopped."""

    run: RunbookRun
    outcome: RunOutcome
    state: str
    """approved | rejected | expired (given after its expiry: the rejected branch) | drain now |
    drain cancelled | resumed."""
    approval: ApprovalRow | None
    """The approval decided, as read before the decision (None for a drain or a resumption)."""


@dataclass(frozen=True)
class Refused:
    """The approval policy refused the decider; the approval stays pending."""

    run: RunbookRun
    reason: str


@dataclass(frozen=True)
class NotPending:
    """Nothing waits for this decision."""

    subject: str
    """The reference as a person reads it: "run 1a2b3c4d (completed)", "INC-3 (resolved)"."""
    run: RunbookRun | None
    decided: ApprovalRow | None
    """The last decided approval: who decided it and when (None if none was ever asked)."""
    busy: str = ""
    """Which worker is resuming the run right now, when one is."""

    def text(self) -> str:
        if self.busy:
            return self.busy
        told = f"{self.subject} has no pending approval"
        if self.decided is not None:
            who = f" by {self.decided.actor}" if self.decided.actor else ""
            when = self.decided.decided_at
            at = f" at {when:%Y-%m-%d %H:%M:%S} UTC" if when else ""
            told += f": it was already {self.decided.state}{who}{at}"
        return told


@dataclass(frozen=True)
class Unknown:
    """No run or incident by that reference."""

    ref: str


Outcome = Decided | Refused | NotPending | Unknown


def decided_run(outcome: Outcome) -> RunOutcome:
    """The run a decision drove on, or the error an outcome that drove none is as an exception
    (`RunEngine.resume` and the CLI: PolicyDenied exits 2, the others are bad input)."""
    if isinstance(outcome, Decided):
        return outcome.outcome
    if isinstance(outcome, Refused):
        raise PolicyDenied(outcome.reason)
    if isinstance(outcome, NotPending):
        raise RunStateError(outcome.text())
    raise NotFound(f"no incident or run '{outcome.ref}' (see `gpu-oncall incidents`)")


def refusal_note(actor: str, reason: str) -> str:
    """The timeline text of a refused decision."""
    return f"Approval by {actor} refused: {reason}"
