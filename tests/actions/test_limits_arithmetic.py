"""The limit arithmetic (bot/actions/limits.py), on plain node records.

Covers: maxUnhealthy as a share (rounded up) and as a count, counting cordoned, NotReady and
in-flight nodes; a malformed limit setting is refused naming its variable, and the settings'
limits are on by default; a node already out costs nothing more; maxGPUsRemoved per pool; each
pool is counted alone, and "100%" turns a limit off; the topology
domain limit on an NVL72-like domain (`nvidia.com/gpu.clique`, 18 nodes x 4 GPUs) counts GPUs,
not nodes; the order of the checks (pause, protected label, breaker, rate, capacity, cooldown);
tickets and silences are never blocked; the breaker trips only on a new node past its
threshold and, open, blocks removals but not an uncordon; the storm cooldown holds a pool back
after a block even once it is within its limit, and lets go when it has passed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from bot.actions.breaker import safety_limits
from bot.actions.limits import (
    Blocked,
    BlockedBy,
    Breaker,
    Pause,
    SafetyLimits,
    Situation,
    allowed,
    evaluate,
    scopes_of,
)
from bot.config import PolicySettings, SafetySettings, Settings
from integrations.cluster import NodeInfo

NOW = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
POOL = "nvidia.com/gpu.product"
CLIQUE = "nvidia.com/gpu.clique"


def node(
    index: int, *, gpus: int = 8, out: bool = False, ready: bool = True, **labels: str
) -> NodeInfo:
    names = {POOL: "H100"} | {k.replace("__", "/").replace("_", "."): v for k, v in labels.items()}
    return NodeInfo(
        name=f"gpu-node-{index:02d}",
        ready=ready,
        unschedulable=out,
        labels=names,
        gpu_capacity=gpus,
    )


def check(
    nodes: list[NodeInfo],
    target: int,
    *,
    action: str = "cordon",
    limits: SafetyLimits | None = None,
    **situation: object,
) -> Blocked | None:
    seen = Situation(nodes=nodes, **situation)  # type: ignore[arg-type]
    name = f"gpu-node-{target:02d}"
    return evaluate(limits or SafetyLimits(), action=action, target=name, situation=seen, now=NOW)


def test_a_share_rounds_up_and_a_count_is_a_count() -> None:
    assert allowed("25%", 16) == 4
    assert allowed("25%", 3) == 1
    assert allowed("0%", 16) == 0
    assert allowed("100%", 16) == 16
    assert allowed("10%", 16) == 2
    assert allowed("3", 16) == 3
    assert allowed("0", 16) == 0
    assert allowed("120%", 7) == 7  # more than all of them is all of them


def test_max_unhealthy_counts_cordoned_not_ready_and_in_flight_nodes() -> None:
    nodes = [node(0, out=True), node(1, ready=False), *[node(i) for i in range(2, 16)]]
    assert check(nodes, 5, in_flight=frozenset({"gpu-node-02"})) is None  # 3 out, 4th allowed
    blocked = check(nodes, 5, in_flight=frozenset({"gpu-node-02", "gpu-node-03"}))
    assert blocked is not None and blocked.blocked_by is BlockedBy.MAX_UNHEALTHY
    assert blocked.reason == "4 of 16 nodes of pool H100 already out (limit 25% = 4 nodes)"
    assert blocked.numbers["out_nodes"] == [f"gpu-node-0{i}" for i in range(4)]
    assert blocked.storm_scope == f"pool {POOL}=H100"


@pytest.mark.parametrize("bad", ["abc", "-1", "%", "25 %", "1.5"])
@pytest.mark.parametrize(
    ("group", "field"),
    [
        (PolicySettings, "max_unhealthy"),
        (PolicySettings, "max_gpus_removed"),
        (SafetySettings, "domain_max_gpus_removed"),
    ],
)
def test_a_malformed_limit_is_refused_naming_its_setting(
    group: type[PolicySettings | SafetySettings], field: str, bad: str
) -> None:
    with pytest.raises(ValidationError, match=rf"{field}\n  String should match pattern"):
        group(**{field: bad})


def test_the_limits_are_on_by_default() -> None:
    limits = safety_limits(Settings())
    assert (limits.max_unhealthy, limits.max_gpus_removed) == ("25%", "25%")
    assert limits.domain_max_gpus_removed == "50%"
    nodes = [node(i, out=i < 4) for i in range(16)]
    blocked = check(nodes, 9, limits=limits)
    assert blocked is not None and blocked.blocked_by is BlockedBy.MAX_UNHEALTHY


def test_a_node_already_out_costs_nothing_more() -> None:
    nodes = [node(i, out=i < 5) for i in range(16)]  # 5 out: over the limit already
    assert check(nodes, 3, action="drain") is None  # draining a cordoned node removes nothing new
    assert check(nodes, 9) is not None


def test_max_gpus_removed_per_pool_counts_gpus() -> None:
    nodes = [node(i, gpus=8 if i < 2 else 1) for i in range(8)]  # 22 GPUs
    limits = SafetyLimits(max_unhealthy="100%", max_gpus_removed="9")
    one_out = frozenset({"gpu-node-01"})
    blocked = check(nodes, 0, limits=limits, in_flight=one_out)  # 8 + 8 GPUs > 9
    assert blocked is not None and blocked.blocked_by is BlockedBy.MAX_GPUS
    assert blocked.reason == (
        "8 of 22 GPUs of pool H100 already out and gpu-node-00 holds 8 more (limit 9 = 9 GPUs)"
    )
    assert check(nodes, 5, limits=limits, in_flight=one_out) is None  # 8 + 1 GPUs


def test_each_pool_is_counted_alone_and_a_hundred_percent_turns_a_limit_off() -> None:
    h100 = [node(i, out=i == 0) for i in range(4)]
    a100 = [node(i, **{"nvidia.com__gpu.product": "A100"}) for i in range(4, 8)]
    one = SafetyLimits(max_unhealthy="1")
    assert check([*h100, *a100], 4, limits=one) is None  # the H100 node out is not the A100's
    blocked = check([*h100, *a100], 1, limits=one)
    assert blocked is not None and blocked.reason == (
        "1 of 4 nodes of pool H100 already out (limit 1 = 1 nodes)"
    )
    off = SafetyLimits(max_unhealthy="100%", max_gpus_removed="100%")
    almost_all = [node(i, out=i < 3) for i in range(4)]
    assert check(almost_all, 3, limits=off) is None


def test_an_nvlink_domain_limit_counts_gpus_not_nodes() -> None:
    """NVL72-like: 18 nodes x 4 GPUs share one clique; the domain allows 10 GPUs out."""
    clique = {"nvidia.com__gpu.clique": "cluster-a.7"}
    nodes = [node(i, gpus=4, **clique) for i in range(18)]
    nodes += [node(i, gpus=4) for i in range(18, 36)]
    limits = SafetyLimits(domain_labels=(CLIQUE,), domain_max_gpus_removed="10")
    two_out = frozenset({"gpu-node-00", "gpu-node-01"})
    blocked = check(nodes, 2, limits=limits, in_flight=two_out)  # 8 + 4 GPUs > 10
    assert blocked is not None and blocked.blocked_by is BlockedBy.MAX_GPUS
    assert blocked.reason == (
        f"8 of 72 GPUs of {CLIQUE}=cluster-a.7 already out and gpu-node-02 holds 4 more "
        "(limit 10 = 10 GPUs)"
    )
    assert blocked.numbers["scope"] == "domain" and blocked.numbers["unit"] == "GPUs"
    assert blocked.storm_scope == f"domain {CLIQUE}=cluster-a.7"
    assert check(nodes, 20, limits=limits, in_flight=two_out) is None  # outside the clique
    assert scopes_of(limits, nodes[0]) == [f"pool {POOL}=H100", f"domain {CLIQUE}=cluster-a.7"]


def test_checks_come_in_order_and_tickets_are_never_blocked() -> None:
    nodes = [node(0, **{"gpu-oncall.io__protected": "true"}), *[node(i) for i in range(1, 16)]]
    pause = (Pause("firmware rollout", "U0BOB", NOW),)
    first = check(nodes, 0, pauses=pause, actions_last_hour=99)
    assert first is not None and first.blocked_by is BlockedBy.PAUSE
    assert first.reason == (
        "remediation paused by U0BOB at 03:00 UTC: firmware rollout (/gpu resume)"
    )
    second = check(nodes, 0, actions_last_hour=99)
    assert second is not None and second.blocked_by is BlockedBy.PROTECTED
    assert second.reason == "gpu-node-00 is protected (label gpu-oncall.io/protected=true)"
    rate = check(nodes, 3, action="uncordon", actions_last_hour=20)
    assert rate is not None and rate.blocked_by is BlockedBy.RATE
    assert rate.reason == "20 actions in the last hour (limit 20 per hour)"
    for action in ("open_ticket", "silence"):
        assert check(nodes, 0, action=action, pauses=pause) is None


def test_the_breaker_trips_on_a_new_node_past_its_threshold_and_open_blocks_only_removals() -> None:
    nodes = [node(i) for i in range(64)]
    removed = frozenset(f"gpu-node-{i:02d}" for i in range(10))
    limits = SafetyLimits(max_unhealthy="100%", max_gpus_removed="100%")
    tripped = check(nodes, 30, limits=limits, breaker=Breaker(removed=removed))
    assert tripped is not None and tripped.trips_breaker
    assert tripped.reason == (
        "circuit breaker tripped: 10 nodes cordoned or drained in the last 1h (threshold 10)"
    )
    assert check(nodes, 3, action="drain", limits=limits, breaker=Breaker(removed=removed)) is None
    is_open = Breaker(open=True, tripped_at=NOW, trip_detail="10 nodes in 1h", removed=removed)
    blocked = check(nodes, 31, limits=limits, breaker=is_open)
    assert blocked is not None and blocked.blocked_by is BlockedBy.BREAKER
    assert not blocked.trips_breaker
    assert check(nodes, 31, action="uncordon", limits=limits, breaker=is_open) is None


def test_the_storm_cooldown_holds_a_pool_back_until_it_has_passed() -> None:
    nodes = [node(i) for i in range(16)]
    storm = ((f"pool {POOL}=H100", NOW - timedelta(minutes=4)),)
    cooling = check(nodes, 5, storms=storm)
    assert cooling is not None and cooling.blocked_by is BlockedBy.COOLDOWN
    assert "no new removal there until 03:06 UTC (stormCooldownDuration 10m)" in cooling.reason
    late = ((f"pool {POOL}=H100", NOW - timedelta(minutes=11)),)
    assert check(nodes, 5, storms=late) is None
    assert check(nodes, 5, action="uncordon", storms=storm) is None
