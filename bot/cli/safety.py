"""The CLI's safety switches, the same as Slack's: `gpu-oncall pause REASON`, `resume`,
`breaker status|reset`. Presentation over `bot.actions.breaker`; light: no engine, Slack or
Kubernetes. The actor is the CLI identity (`cli:$USER`); only approvers may resume or reset
(a refusal exits 2, as every PolicyDenied does in `cli.main`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from bot.actions import breaker
from bot.clock import SystemClock
from bot.wiring.database import open_database
from bot.errors import UserInputError
from storage.db import session_scope

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.cli.terminal import Terminal


def pause(settings: Settings, term: Terminal, *, reason: str, actor: str) -> int:
    """`gpu-oncall pause REASON`: no action that changes the cluster runs until `resume`."""
    if not reason.strip():
        raise UserInputError("pause needs a reason: gpu-oncall pause firmware rollout on rack-07")
    db = open_database(settings)
    try:
        with session_scope(db) as session:
            noted = breaker.pause(session, reason=reason, actor=actor, at=SystemClock().now())
    finally:
        db.dispose()
    term.line(f"Paused by {actor}: {reason}")
    term.line("No action that changes the cluster runs until an approver runs `gpu-oncall resume`.")
    if noted:
        term.line(f"Noted on the timeline of {', '.join(noted)}")
    return 0


def resume(settings: Settings, term: Terminal, *, actor: str) -> int:
    """`gpu-oncall resume`: end every pause in force (approvers only)."""
    db = open_database(settings)
    try:
        with session_scope(db) as session:
            ended, noted = breaker.resume(
                session, approvers=settings.policy.approvers, actor=actor, at=SystemClock().now()
            )
    finally:
        db.dispose()
    if not ended:
        term.line("Not paused: nothing to resume.")
        return 0
    term.line(f"Resumed by {actor}; ended: " + "; ".join(p.reason for p in ended))
    if noted:
        term.line(f"Noted on the timeline of {', '.join(noted)}")
    return 0


def breaker_command(
    settings: Settings, term: Terminal, *, action: str, reason: str, actor: str, as_json: bool
) -> int:
    """`gpu-oncall breaker status|reset [--reason TEXT]`."""
    limits = breaker.safety_limits(settings)
    now = SystemClock().now()
    db = open_database(settings)
    try:
        with session_scope(db) as session:
            if action == "reset":
                status = breaker.reset(
                    session,
                    limits,
                    approvers=settings.policy.approvers,
                    actor=actor,
                    reason=reason,
                    at=now,
                )
            else:
                status = breaker.read_status(session, limits, at=now)
    finally:
        db.dispose()
    if as_json:
        term.line(json.dumps(_as_json(status), sort_keys=True))
        return 0
    if action == "reset":
        term.line(f"Circuit breaker reset by {actor}" + (f": {reason}" if reason else ""))
    for line in status.lines(limits):
        term.line(line)
    return 0


def _as_json(status: breaker.SafetyStatus) -> dict[str, object]:
    view = status.breaker
    return {
        "state": "open" if view.open else "closed",
        "tripped_at": view.tripped_at.isoformat() if view.tripped_at else None,
        "trip_detail": view.trip_detail or None,
        "removed": sorted(view.removed),
        "reset_at": status.reset_at.isoformat() if status.reset_at else None,
        "reset_by": status.reset_by,
        "pauses": [
            {"actor": p.requested_by, "reason": p.reason, "at": p.requested_at.isoformat()}
            for p in status.pauses
        ],
    }
