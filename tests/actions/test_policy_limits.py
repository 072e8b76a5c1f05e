"""Approval policy (bot.actions.policy), pure: approvers by user or group, per-runbook
approvers, the two-person rule, and the blast-radius limits.

Covers: group membership (resolved by the caller) admits an approver; a runbook's own approvers
replace the global list; the requester cannot approve high risk but may approve medium; limits
are counts or shares rounded up; a cordon that would take a pool past `max_unhealthy` or
`max_gpus_removed` is refused with what would have happened and what is already out; nodes
already out count; other pools are unaffected; "100%" turns a limit off; actions that leave
capacity alone are never limited; the defaults are on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bot.actions.policy import (
    Limits,
    Policy,
    Risk,
    check_approver,
    check_blast_radius,
    limit_of,
)
from bot.errors import PolicyDenied

H100, A100 = "NVIDIA-H100", "NVIDIA-A100"


@dataclass(frozen=True)
class Node:
    name: str
    pool: str = H100
    ready: bool = True
    unschedulable: bool = False
    gpu_capacity: int = 8
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels.setdefault("nvidia.com/gpu.product", self.pool)


def fleet(n: int = 16, *, out: tuple[str, ...] = (), pool: str = H100) -> list[Node]:
    return [Node(f"n{i:02d}", pool, unschedulable=f"n{i:02d}" in out) for i in range(n)]


def cordon(*names: str) -> list[dict[str, str]]:
    return [{"action": "cordon", "target": name} for name in names]


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


@pytest.mark.parametrize(
    ("limit", "total", "allowed"),
    [("4", 16, 4), ("25%", 16, 4), ("25%", 2, 1), ("10%", 16, 2), ("0", 16, 0), ("100%", 7, 7)],
)
def test_limits_are_counts_or_shares_rounded_up(limit: str, total: int, allowed: int) -> None:
    assert limit_of(limit, total) == allowed


@pytest.mark.parametrize("bad", ["x", "-1", "120%", "%"])
def test_malformed_limits_are_refused(bad: str) -> None:
    with pytest.raises(PolicyDenied, match=f"limit '{bad}'"):
        limit_of(bad, 16)


def test_cordon_within_the_limit_passes() -> None:
    nodes = fleet(out=("n01", "n02", "n03"))
    check_blast_radius(Limits(), proposals=cordon("n04"), nodes=nodes)  # 4 of 16 = 25%


def test_cordon_past_max_unhealthy_says_what_and_why_not() -> None:
    nodes = fleet(out=("n01", "n02", "n03", "n04"))
    proposals = [*cordon("n05"), {"action": "drain", "target": "n05"}]
    with pytest.raises(PolicyDenied) as exc:
        check_blast_radius(Limits(), proposals=proposals, nodes=nodes)
    message = str(exc.value)
    assert "would cordon n05, drain n05" in message
    assert "5 of 16 nodes in pool 'NVIDIA-H100'" in message
    assert "max_unhealthy 25% = 4 nodes" in message
    assert "already out: n01, n02, n03, n04" in message
    assert "GPU_ONCALL_POLICY__MAX_UNHEALTHY" in message


def test_not_ready_nodes_count_as_out() -> None:
    nodes = [*fleet(4)[:3], Node("n03", ready=False)]
    with pytest.raises(PolicyDenied, match="2 of 4 nodes"):
        check_blast_radius(Limits(max_unhealthy="1"), proposals=cordon("n00"), nodes=nodes)


def test_gpu_limit_counts_gpus_not_nodes() -> None:
    nodes = [Node("big", gpu_capacity=8), *[Node(f"s{i}", gpu_capacity=1) for i in range(8)]]
    limits = Limits(max_unhealthy="100%", max_gpus_removed="50%")  # 8 of 16 GPUs
    check_blast_radius(limits, proposals=cordon("big"), nodes=nodes)
    with pytest.raises(PolicyDenied, match=r"9 of 16 GPUs .*\(max_gpus_removed 50% = 8 GPUs"):
        check_blast_radius(limits, proposals=cordon("big", "s0"), nodes=nodes)


def test_other_pools_are_counted_separately() -> None:
    nodes = [*fleet(4, out=("n00",)), *[Node(f"a{i}", A100) for i in range(4)]]
    check_blast_radius(Limits(max_unhealthy="1"), proposals=cordon("a0"), nodes=nodes)


def test_hundred_percent_turns_the_limit_off_and_tickets_are_never_limited() -> None:
    nodes = fleet(4, out=("n00", "n01", "n02"))
    off = Limits(max_unhealthy="100%", max_gpus_removed="100%")
    check_blast_radius(off, proposals=cordon("n03"), nodes=nodes)
    tickets = [{"action": "open_ticket", "target": "n03"}]
    check_blast_radius(Limits(max_unhealthy="0"), proposals=tickets, nodes=nodes)


def test_limits_are_on_by_default() -> None:
    assert Policy().limits == Limits(max_unhealthy="25%", max_gpus_removed="25%")
