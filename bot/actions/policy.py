"""Approval policy: who may approve, the two-person rule, expiry and global dry-run. Pure.
The safety limits (blast radius, rate, breaker, pauses) are checked when an action runs, not
here: bot/actions/limits.py.

Settings give the defaults; a runbook may have its own approvers. A refusal raises PolicyDenied
with a reason fit to show the person who clicked or typed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from bot.errors import PolicyDenied


class Risk(StrEnum):
    """How much an action can hurt: drives approval and the two-person rule."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True)
class Policy:
    approvers: frozenset[str] = frozenset()
    """Who may approve (user ids, group ids, `cli:<user>`); empty: anyone who can reach the bot."""
    two_person_risks: frozenset[Risk] = field(default_factory=lambda: frozenset({Risk.HIGH}))
    """Risk levels where the requester may not approve their own request."""
    approval_ttl: timedelta = timedelta(minutes=30)
    auto_approve_risks: frozenset[Risk] = frozenset()
    """Risk levels that run without asking (none by default)."""
    dry_run: bool = False
    """Global dry-run: actions say what they would do and change nothing."""
    runbook_approvers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Runbook name -> who may approve its actions, instead of `approvers`."""
    approval_risks: frozenset[Risk] | None = None
    """Risk levels that need approval (a runbook's `policy.approval_risks`); None: every risk
    not in `auto_approve_risks`."""
    auto_approve_actions: Mapping[str, int] = field(default_factory=dict)
    """Action -> most targets it may be auto-approved for in one run (a runbook's
    `policy.auto_approve`). Auto-approved actions still pass the safety limits when they run."""
    overrides: tuple[str, ...] = ()
    """What the runbook's own policy changed, in words, for the approval message."""


def needs_approval(policy: Policy, risks: Iterable[Risk]) -> bool:
    return any(_risk_needs_approval(policy, risk) for risk in risks)


def _risk_needs_approval(policy: Policy, risk: Risk) -> bool:
    if policy.approval_risks is not None:
        return risk in policy.approval_risks
    return risk not in policy.auto_approve_risks


def proposals_need_approval(policy: Policy, proposals: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a person must approve `proposals` (dicts with `action` and `risk`): yes unless
    each is auto-approved by its risk level or by an auto-approve rule for its action, and a
    rule covers the action only up to its number of targets."""
    counts: dict[str, int] = {}
    for p in proposals:
        counts[str(p["action"])] = counts.get(str(p["action"]), 0) + 1
    for p in proposals:
        action = str(p["action"])
        if counts[action] <= policy.auto_approve_actions.get(action, 0):
            continue
        if _risk_needs_approval(policy, Risk(p["risk"])):
            return True
    return False


# -- runbook policy -------------------------------------------------------------------------------

ADMIN_MARK = " (admin)"
"""Ends the actor of a decision an admin made for someone else: `cli:alice as cli:bob (admin)`."""


def cli_actor_name(user: str) -> str:
    """`cli:<user>` (unchanged when it already is)."""
    return user if user.startswith("cli:") else f"cli:{user}"


def acting_identities(actor: str) -> tuple[str, str]:
    """(whose decision it is, who made it): equal, except for an admin acting as someone
    else (`cli:alice as cli:bob (admin)` -> `cli:bob`, `cli:alice`)."""
    if actor.endswith(ADMIN_MARK) and " as " in actor:
        operator, principal = actor.removesuffix(ADMIN_MARK).split(" as ", 1)
        return principal, operator
    return actor, actor


@dataclass(frozen=True)
class RunbookPolicy:
    """A runbook's own policy (its YAML `policy:` block); None fields inherit the settings."""

    runbook: str
    approvers: frozenset[str] | None = None
    groups: frozenset[str] | None = None
    approval_risks: frozenset[Risk] | None = None
    two_person_risks: frozenset[Risk] | None = None
    auto_approve: Mapping[str, int] | None = None
    approval_ttl: timedelta | None = None


def effective_policy(policy: Policy, own: RunbookPolicy | None) -> Policy:
    """The settings' policy with a runbook's overrides applied, each named in `overrides`."""
    if own is None:
        return policy
    changes: dict[str, Any] = {}
    named: list[str] = []
    who = None if own.approvers is None and own.groups is None else (
        (own.approvers or frozenset()) | (own.groups or frozenset())
    )
    if who is not None:
        changes["runbook_approvers"] = {**policy.runbook_approvers, own.runbook: who}
        named.append(f"approvers: {', '.join(sorted(who)) or 'anyone'}")
    if own.approval_risks is not None:
        changes["approval_risks"] = own.approval_risks
        named.append(f"approval needed for risk: {_risks(own.approval_risks)}")
    if own.two_person_risks is not None:
        changes["two_person_risks"] = own.two_person_risks
        named.append(f"two-person rule for risk: {_risks(own.two_person_risks)}")
    if own.auto_approve is not None:
        changes["auto_approve_actions"] = dict(own.auto_approve)
        rules = ", ".join(f"{a} (up to {n} target(s))" for a, n in sorted(own.auto_approve.items()))
        named.append(f"auto-approve: {rules or 'nothing'}; the safety limits still apply")
    if own.approval_ttl is not None:
        changes["approval_ttl"] = own.approval_ttl
        named.append(f"approval expires after {_minutes(own.approval_ttl)}")
    overrides = tuple(f"runbook {own.runbook} policy: {text}" for text in named)
    return replace(policy, **changes, overrides=overrides)


def approvers_of(policy: Policy, runbook: str | None) -> frozenset[str]:
    """Who may approve the runbook's actions (empty: anyone who can reach the bot)."""
    return policy.runbook_approvers.get(runbook or "", policy.approvers)


def _risks(risks: Collection[Risk]) -> str:
    order = list(Risk)
    return ", ".join(r.value for r in sorted(risks, key=order.index)) or "none"


def _minutes(ttl: timedelta) -> str:
    minutes = ttl.total_seconds() / 60
    return f"{minutes:g} min"


def check_approver(
    policy: Policy,
    *,
    actor: str,
    requester: str,
    risks: Iterable[Risk],
    groups: Collection[str] = (),
    runbook: str | None = None,
) -> None:
    """Raise PolicyDenied if `actor` may not approve a request made by `requester`.

    `approvers` may name people and groups (e.g. Slack user groups); `groups` are the groups the
    actor belongs to, resolved by the caller. A runbook with its own approvers uses those.
    """
    principal, operator = acting_identities(actor)
    approvers = approvers_of(policy, runbook)
    if approvers and principal not in approvers and not approvers.intersection(groups):
        scope = f" of runbook {runbook}" if runbook in policy.runbook_approvers else ""
        raise PolicyDenied(
            f"{principal} is not an approver{scope} (approvers: {', '.join(sorted(approvers))}); "
            f"ask one of them to approve (the list is {_approvers_setting(policy, runbook)})"
        )
    high = two_person_risks_of(policy, risks)
    if high and requester in (principal, operator):
        refusal = two_person_refusal(policy, requester=requester, risks=high, runbook=runbook)
        raise PolicyDenied(refusal)


def _approvers_setting(policy: Policy, runbook: str | None) -> str:
    """Where the approver list a refusal quotes is set: the runbook's YAML, the per-runbook
    setting, or the settings' list."""
    if any(o.startswith(f"runbook {runbook} policy: approvers") for o in policy.overrides):
        return f"runbook {runbook}'s `policy.approvers`"
    if runbook in policy.runbook_approvers:
        return f"GPU_ONCALL_POLICY__RUNBOOK_APPROVERS[{runbook}]"
    return "GPU_ONCALL_POLICY__APPROVERS"


TWO_PERSON_SETTING = "GPU_ONCALL_POLICY__TWO_PERSON_RISKS"
"""The setting that decides which risks fall under the two-person rule."""


def two_person_risks_of(policy: Policy, risks: Iterable[Risk]) -> list[str]:
    """The risks among `risks` under the two-person rule (names, lowest first)."""
    order = list(Risk)
    return [r.value for r in sorted(set(risks) & policy.two_person_risks, key=order.index)]


def two_person_refusal(
    policy: Policy, *, requester: str, risks: Sequence[str], runbook: str | None
) -> str:
    """Why `requester` may not approve their own request, who else may, and what changes the
    rule: the runbook's `policy.two_person_risks` when it sets one, else the setting."""
    approvers = sorted(approvers_of(policy, runbook) - {requester})
    others = ", ".join(approvers) if approvers else f"anyone but {requester}"
    own = any(o.startswith(f"runbook {runbook} policy: two-person") for o in policy.overrides)
    rule = (
        f"runbook {runbook}'s `policy.two_person_risks`"
        if own
        else f"{TWO_PERSON_SETTING} (now {_json_risks(policy.two_person_risks)}; [] turns it off)"
    )
    how = (
        " (on the CLI another user runs `gpu-oncall approve`, or set "
        "GPU_ONCALL_IDENTITY__CLI_USER; `--as` needs the admin role)"
        if requester.startswith("cli:")
        else ""
    )
    return (
        f"two-person rule: {requester} requested this {'/'.join(risks)}-risk action and cannot "
        f"also approve it; who else may approve: {others}{how}; the rule is set by {rule}"
    )


def _json_risks(risks: Collection[Risk]) -> str:
    order = list(Risk)
    return "[" + ", ".join(f'"{r.value}"' for r in sorted(risks, key=order.index)) + "]"


def is_expired(expires_at: datetime, now: datetime) -> bool:
    return now >= expires_at
