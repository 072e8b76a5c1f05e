"""Approval policy (bot.actions.policy), pure: approvers by user or group, per-runbook
approvers, and the two-person rule.

Covers: group membership (resolved by the caller) admits an approver; a runbook's own approvers
replace the global list; the requester cannot approve high risk but may approve medium. (The
safety limits are checked when an action runs: tests/actions/test_limits_arithmetic.py.)
"""

from __future__ import annotations

import pytest

from bot.actions.policy import Policy, Risk, check_approver
from bot.errors import PolicyDenied


def test_group_member_may_approve() -> None:
    policy = Policy(approvers=frozenset({"S0ONCALL"}))
    check_approver(policy, actor="U1", requester="bot", risks=[Risk.HIGH], groups={"S0ONCALL"})
    with pytest.raises(PolicyDenied, match=r"U2 is not an approver \(approvers: S0ONCALL\)"):
        check_approver(policy, actor="U2", requester="bot", risks=[Risk.HIGH], groups=())


def test_runbook_approvers_replace_the_global_list() -> None:
    policy = Policy(approvers=frozenset({"U1"}), runbook_approvers={"ecc-storm": frozenset({"U9"})})
    check_approver(policy, actor="U9", requester="bot", risks=[Risk.LOW], runbook="ecc-storm")
    with pytest.raises(PolicyDenied, match="not an approver of runbook ecc-storm"):
        check_approver(policy, actor="U1", requester="bot", risks=[Risk.LOW], runbook="ecc-storm")
    check_approver(policy, actor="U1", requester="bot", risks=[Risk.LOW], runbook="nccl-hang")


def test_requester_cannot_approve_high_risk_but_may_approve_medium() -> None:
    policy = Policy()
    check_approver(policy, actor="U1", requester="U1", risks=[Risk.MEDIUM, Risk.LOW])
    with pytest.raises(PolicyDenied, match="two-person rule: U1 requested this high-risk"):
        check_approver(policy, actor="U1", requester="U1", risks=[Risk.MEDIUM, Risk.HIGH])
