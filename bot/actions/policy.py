"""Approval policy: who may approve, the two-person rule, expiry, global dry-run. Pure.

Settings give the defaults; a runbook may tighten them. A refusal raises PolicyDenied with a
reason fit to show the person who clicked or typed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from bot.errors import PolicyDenied


class Risk(StrEnum):
    """How much an action can hurt: drives approval and the two-person rule."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True)
class Policy:
    approvers: frozenset[str] = frozenset()
    """Who may approve (user ids, `cli:<user>`); empty means anyone who can reach the bot."""
    two_person_risks: frozenset[Risk] = field(default_factory=lambda: frozenset({Risk.HIGH}))
    """Risk levels where the requester may not approve their own request."""
    approval_ttl: timedelta = timedelta(minutes=30)
    auto_approve_risks: frozenset[Risk] = frozenset()
    """Risk levels that run without asking (none by default)."""
    dry_run: bool = False
    """Global dry-run: actions say what they would do and change nothing."""


def needs_approval(policy: Policy, risks: Iterable[Risk]) -> bool:
    return any(risk not in policy.auto_approve_risks for risk in risks)


def check_approver(policy: Policy, *, actor: str, requester: str, risks: Iterable[Risk]) -> None:
    """Raise PolicyDenied if `actor` may not approve a request made by `requester`."""
    if policy.approvers and actor not in policy.approvers:
        raise PolicyDenied(
            f"{actor} is not an approver (approvers: {', '.join(sorted(policy.approvers))})"
        )
    high = sorted({r.value for r in risks if r in policy.two_person_risks})
    if high and actor == requester:
        raise PolicyDenied(
            f"two-person rule: {actor} requested this {'/'.join(high)}-risk action and cannot "
            "also approve it; ask another approver"
        )


def is_expired(expires_at: datetime, now: datetime) -> bool:
    return now >= expires_at
