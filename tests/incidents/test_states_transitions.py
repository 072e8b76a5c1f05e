"""Incident state machine.

Covers: forward moves are allowed, including skips (a healthy diagnosis goes triaging ->
resolved); backward moves are refused except falling back to triaging; anything may be
resolved; resolved only reopens into triaging; staying put is not a transition; errors name
the incident, both states and the allowed targets; unknown state names list the valid ones.
"""

from __future__ import annotations

import pytest

from bot.errors import UserInputError
from bot.incidents.states import (
    IncidentState,
    InvalidTransitionError,
    allowed_targets,
    check_transition,
    is_allowed,
)

S = IncidentState


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (S.OPEN, S.TRIAGING),
        (S.TRIAGING, S.AWAITING_APPROVAL),
        (S.AWAITING_APPROVAL, S.MITIGATING),
        (S.MITIGATING, S.MONITORING),
        (S.MONITORING, S.RESOLVED),
        (S.TRIAGING, S.RESOLVED),  # healthy diagnosis
        (S.TRIAGING, S.MITIGATING),  # auto-approved action
        (S.MITIGATING, S.AWAITING_APPROVAL),  # some actions approved (--only), the rest waits
        (S.OPEN, S.RESOLVED),  # alert resolved before triage
        (S.AWAITING_APPROVAL, S.TRIAGING),  # approval rejected or expired
        (S.MONITORING, S.TRIAGING),  # verification failed
        (S.RESOLVED, S.TRIAGING),  # reopen
    ],
)
def test_allowed_moves(src: IncidentState, dst: IncidentState) -> None:
    assert check_transition(src, dst) == (src, dst)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (S.MONITORING, S.MITIGATING),
        (S.MONITORING, S.AWAITING_APPROVAL),
        (S.TRIAGING, S.OPEN),
        (S.RESOLVED, S.OPEN),
        (S.RESOLVED, S.MONITORING),
        (S.TRIAGING, S.TRIAGING),
    ],
)
def test_refused_moves(src: IncidentState, dst: IncidentState) -> None:
    assert not is_allowed(src, dst)
    with pytest.raises(InvalidTransitionError):
        check_transition(src, dst)


def test_every_state_can_be_resolved() -> None:
    assert all(is_allowed(s, S.RESOLVED) for s in S if s is not S.RESOLVED)


def test_resolved_only_reopens_into_triaging() -> None:
    assert allowed_targets(S.RESOLVED) == {S.TRIAGING}


def test_the_error_names_the_incident_the_states_and_the_allowed_targets() -> None:
    with pytest.raises(InvalidTransitionError) as info:
        check_transition("resolved", "monitoring", ref="INC-7")
    assert str(info.value) == (
        "cannot move INC-7 from resolved to monitoring (from resolved: triaging)"
    )
    assert isinstance(info.value, UserInputError)


def test_staying_put_says_the_incident_is_already_there() -> None:
    with pytest.raises(InvalidTransitionError, match="INC-7 is already triaging"):
        check_transition("triaging", "triaging", ref="INC-7")


def test_an_unknown_state_lists_the_valid_ones() -> None:
    with pytest.raises(UserInputError, match="states: open, triaging, awaiting_approval"):
        check_transition("open", "fixed")
