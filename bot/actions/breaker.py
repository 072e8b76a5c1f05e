"""The switches people hold over the bot's actions: the circuit breaker (status, reset) and
pause requests (pause, resume). Shared by Slack (`bot/slack/safety.py`) and the CLI
(`bot/cli/safety.py`); writes through `storage/safety.py` inside the caller's session.

Anyone who can reach the bot may pause it (an emergency stop must not wait for an approver);
only an approver may resume it or reset the breaker, since both let actions run again. A pause
and a resume are noted, with who and why, on the timeline of every open incident.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlmodel import Session

from bot.actions.limits import REMOVES_CAPACITY, SafetyLimits, describe_breaker
from bot.actions.limits import Breaker as BreakerView
from bot.errors import PolicyDenied
from bot.incidents.timeline import EventKind
from storage import incidents as incident_store
from storage import safety as store
from storage.tables import Incident, PauseRequest

if TYPE_CHECKING:
    from bot.config import Settings

CLOSED_STATES = ("resolved", "failed")


def safety_limits(settings: Settings) -> SafetyLimits:
    """The limits every action passes right before it runs (docs/safety.md)."""
    p, s = settings.policy, settings.safety
    return SafetyLimits(
        max_unhealthy=p.max_unhealthy,
        max_gpus_removed=p.max_gpus_removed,
        pool_label=p.pool_label,
        domain_labels=tuple(s.domain_labels),
        domain_max_gpus_removed=s.domain_max_gpus_removed,
        max_actions_per_hour=s.max_actions_per_hour,
        storm_cooldown=timedelta(minutes=s.storm_cooldown_minutes),
        breaker_threshold=s.breaker_threshold,
        breaker_window=timedelta(minutes=s.breaker_window_minutes),
        protected_label=settings.kubernetes.protected_label,
    )


@dataclass(frozen=True)
class SafetyStatus:
    """The breaker and the pauses, as `breaker status` shows them."""

    breaker: BreakerView
    reset_at: datetime | None
    reset_by: str | None
    pauses: tuple[PauseRequest, ...]

    def lines(self, limits: SafetyLimits) -> list[str]:
        """What a person reads: the breaker's state and why, then each pause in force."""
        lines = [describe_breaker(limits, self.breaker)]
        if self.breaker.open and self.breaker.trip_detail:
            lines.append(f"  tripped: {self.breaker.trip_detail}")
        if self.breaker.removed:
            removed = ", ".join(sorted(self.breaker.removed))
            lines.append(f"  nodes removed in the window: {removed}")
        if self.reset_at is not None:
            lines.append(f"  last reset by {self.reset_by} at {self.reset_at:%Y-%m-%d %H:%M} UTC")
        for pause in self.pauses:
            lines.append(
                f"paused by {pause.requested_by} at {pause.requested_at:%Y-%m-%d %H:%M} UTC: "
                f"{pause.reason}"
            )
        if not self.pauses:
            lines.append("not paused")
        return lines


def read_status(session: Session, limits: SafetyLimits, *, at: datetime) -> SafetyStatus:
    row = store.read_breaker(session)
    since = at - limits.breaker_window
    if row.reset_at is not None and row.reset_at > since:
        since = row.reset_at
    removed = store.removed_targets_since(
        session, since=since, actions=sorted(REMOVES_CAPACITY), exclude_key=""
    )
    view = BreakerView(
        row.state == "open", row.tripped_at, row.trip_detail or "", frozenset(removed)
    )
    return SafetyStatus(view, row.reset_at, row.reset_by, tuple(store.active_pauses(session)))


def check_approver(
    approvers: Collection[str], *, actor: str, groups: Collection[str] = (), what: str
) -> None:
    """Raise PolicyDenied unless `actor` (or one of their `groups`) is an approver; an empty
    list lets anyone, as for approvals (`policy.approvers`)."""
    if approvers and actor not in approvers and not set(approvers) & set(groups):
        raise PolicyDenied(
            f"{actor} is not an approver, and only approvers may {what} "
            f"(approvers: {', '.join(sorted(approvers))})"
        )


def reset(
    session: Session,
    limits: SafetyLimits,
    *,
    approvers: Collection[str],
    actor: str,
    reason: str,
    at: datetime,
    groups: Collection[str] = (),
) -> SafetyStatus:
    """Close the breaker (an approver only); removals before now stop counting towards it."""
    check_approver(approvers, actor=actor, groups=groups, what="reset the circuit breaker")
    store.reset_breaker(session, at=at, actor=actor, reason=reason)
    return read_status(session, limits, at=at)


def pause(session: Session, *, reason: str, actor: str, at: datetime) -> list[str]:
    """Record a pause request; returns the open incidents whose timelines now say so."""
    row = store.add_pause(session, reason=reason, actor=actor, at=at)
    summary = (
        f"Remediation paused by {actor}: {reason} (no action that changes the cluster runs "
        "until /gpu resume)"
    )
    return _note_open(session, summary, actor=actor, at=at, payload={"pause_id": row.id})


def resume(
    session: Session,
    *,
    approvers: Collection[str],
    actor: str,
    at: datetime,
    groups: Collection[str] = (),
) -> tuple[list[PauseRequest], list[str]]:
    """End every pause in force (an approver only); returns them and the incidents noted."""
    check_approver(approvers, actor=actor, groups=groups, what="resume the bot's actions")
    ended = store.end_pauses(session, actor=actor, at=at)
    if not ended:
        return [], []
    reasons = "; ".join(p.reason for p in ended)
    summary = f"Remediation resumed by {actor} (paused for: {reasons})"
    payload = {"pause_ids": [p.id for p in ended]}
    return ended, _note_open(session, summary, actor=actor, at=at, payload=payload)


def _note_open(
    session: Session, summary: str, *, actor: str, at: datetime, payload: Mapping[str, object]
) -> list[str]:
    incidents = [
        i
        for i in incident_store.list_incidents(session, open_only=True, limit=10_000)
        if i.state not in CLOSED_STATES and i.id is not None
    ]
    for incident in incidents:
        assert incident.id is not None
        incident_store.append_event(
            session,
            incident_id=incident.id,
            at=at,
            kind=EventKind.NOTE,
            actor=actor,
            summary=summary,
            payload={"safety": True, **payload},
            pinned=True,
        )
    return [i.ref for i in _sorted(incidents)]


def _sorted(incidents: Sequence[Incident]) -> list[Incident]:
    return sorted(incidents, key=lambda i: i.id or 0)
