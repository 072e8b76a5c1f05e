"""Incident states and the transitions allowed between them (pure).

    open -> triaging -> awaiting_approval -> mitigating -> monitoring -> resolved

- Forward moves may skip states: a healthy diagnosis goes triaging -> resolved, an auto-approved
  action goes triaging -> mitigating.
- Any unresolved state may fall back to `triaging`: an approval was rejected or expired, an
  action failed, or verification failed, and people take over the investigation.
- Any state may move to `resolved`; `resolved -> triaging` reopens the incident.
- `mitigating -> awaiting_approval`: an approver approved some of the actions (`--only`), they
  ran, and the rest waits for its own approval.
- Staying in the same state is not a transition (`lifecycle.transition` treats it as a no-op).
- Any unresolved state may move to `failed`: its run could not start (an unknown node, invalid
  inputs) or ended without a result (it crashed, or was taken over too often). The reason is on
  the timeline. A failed incident frees its (runbook, target) group key, so the next alert
  opens a fresh incident; from `failed` it may be resolved or taken back into `triaging`.
"""

from __future__ import annotations

from enum import StrEnum

from bot.errors import UserInputError


class IncidentState(StrEnum):
    OPEN = "open"
    TRIAGING = "triaging"
    AWAITING_APPROVAL = "awaiting_approval"
    MITIGATING = "mitigating"
    MONITORING = "monitoring"
    RESOLVED = "resolved"
    FAILED = "failed"

    @property
    def is_open(self) -> bool:
        """True until the incident is resolved."""
        return self is not IncidentState.RESOLVED


_ORDER: tuple[IncidentState, ...] = tuple(IncidentState)


class InvalidTransitionError(UserInputError):
    """A requested state change is not allowed; the message lists the allowed targets."""

    def __init__(self, src: IncidentState, dst: IncidentState, *, ref: str = "") -> None:
        allowed = ", ".join(sorted(allowed_targets(src))) or "none"
        subject = f"{ref} " if ref else "an incident "
        if src is dst:
            message = f"{subject}is already {src.value}"
        else:
            message = f"cannot move {subject}from {src.value} to {dst.value}"
        super().__init__(f"{message} (from {src.value}: {allowed})")
        self.src, self.dst = src, dst


def is_allowed(src: IncidentState, dst: IncidentState) -> bool:
    """Whether an incident may move from `src` to `dst` (see the module docstring)."""
    if src is dst:
        return False
    if dst is IncidentState.FAILED:
        return src is not IncidentState.RESOLVED
    if src is IncidentState.FAILED:
        return dst in (IncidentState.RESOLVED, IncidentState.TRIAGING)
    if dst is IncidentState.RESOLVED or dst is IncidentState.TRIAGING:
        return True  # resolve from anywhere; fall back to (or reopen into) triaging
    if src is IncidentState.RESOLVED:
        return False
    if src is IncidentState.MITIGATING and dst is IncidentState.AWAITING_APPROVAL:
        return True  # part of the actions ran; the rest waits for its own approval
    return _ORDER.index(dst) > _ORDER.index(src)


def allowed_targets(src: IncidentState) -> frozenset[IncidentState]:
    """Every state `src` may move to."""
    return frozenset(dst for dst in IncidentState if is_allowed(src, dst))


def check_transition(src: str, dst: str, *, ref: str = "") -> tuple[IncidentState, IncidentState]:
    """Parse both states and raise InvalidTransitionError unless `src -> dst` is allowed."""
    source, target = parse_state(src), parse_state(dst)
    if not is_allowed(source, target):
        raise InvalidTransitionError(source, target, ref=ref)
    return source, target


def parse_state(value: str) -> IncidentState:
    """An IncidentState from its name; UserInputError listing the valid names otherwise."""
    try:
        return IncidentState(value)
    except ValueError as exc:
        valid = ", ".join(s.value for s in IncidentState)
        raise UserInputError(f"unknown incident state '{value}' (states: {valid})") from exc
