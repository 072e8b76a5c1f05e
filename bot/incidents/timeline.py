"""Timeline vocabulary: the kinds of event an incident records, who may act, what is pinned.

Every transition, check, finding, approval (with who) and action is a timeline event with a
timestamp and an actor. Pinned events make the curated postmortem story; the full timeline is
always kept. Pure: no storage access here.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    ALERT_FIRED = "alert_fired"
    ALERT_RESOLVED = "alert_resolved"
    INCIDENT_OPENED = "incident_opened"
    INCIDENT_ACKNOWLEDGED = "incident_acknowledged"
    STATE_CHANGED = "state_changed"
    RUN_STARTED = "run_started"
    STEP_COMPLETED = "step_completed"
    STEP_FAILED = "step_failed"
    FINDING = "finding"
    VERDICT = "verdict"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_GRANTED = "approval_granted"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_EXPIRED = "approval_expired"
    ACTION_STARTED = "action_started"
    ACTION_SUCCEEDED = "action_succeeded"
    ACTION_FAILED = "action_failed"
    ACTION_SKIPPED = "action_skipped"
    ACTION_BLOCKED = "action_blocked"
    """A safety limit stopped the action right before it ran (bot/actions/limits.py)."""
    VERIFICATION_PASSED = "verification_passed"
    VERIFICATION_FAILED = "verification_failed"
    NOTE = "note"
    FIRED_AT_CORRECTED = "fired_at_corrected"
    INCIDENT_RESOLVED = "incident_resolved"


PINNED_BY_DEFAULT: frozenset[EventKind] = frozenset(
    {
        EventKind.ALERT_FIRED,
        EventKind.INCIDENT_OPENED,
        EventKind.INCIDENT_ACKNOWLEDGED,
        EventKind.VERDICT,
        EventKind.APPROVAL_GRANTED,
        EventKind.APPROVAL_REJECTED,
        EventKind.APPROVAL_EXPIRED,
        EventKind.ACTION_SUCCEEDED,
        EventKind.ACTION_FAILED,
        EventKind.ACTION_BLOCKED,
        EventKind.VERIFICATION_PASSED,
        EventKind.VERIFICATION_FAILED,
        EventKind.FIRED_AT_CORRECTED,
        EventKind.INCIDENT_RESOLVED,
    }
)
"""The curated story: what a postmortem reader needs when showing pinned events only."""

BOT = "bot"
ALERTMANAGER = "alertmanager"
MACHINE_ACTORS: frozenset[str] = frozenset({BOT, ALERTMANAGER, "scheduler", "system"})


def is_human_actor(actor: str) -> bool:
    """True for a Slack user id or `cli:<user>`; False for the bot and other machines."""
    return bool(actor) and actor not in MACHINE_ACTORS
