"""The capacity limits over counts decide exactly as over the member list (bot/actions/limits.py).

Covers: for arbitrary pools and topology domains (cordoned, NotReady and in-flight mixes, in-
flight names the cluster no longer has, unlabelled nodes, GPUs from 0 to 8) and limits given as
counts or percentages, `evaluate` over a `Situation` holding each scope's `NodeCount` (built by
`count_of` over the label selection, as an adapter builds it) with only the target and the
nodes in flight returns the same result, reason and numbers as over every member; and a count
that disagrees with the member list is what is read (the counts are not ignored).
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.actions.limits import SafetyLimits, Situation, evaluate, scope_selectors, scopes_of
from integrations.cluster import NodeCount, NodeInfo, count_of, select_by_labels

NOW = datetime(2026, 11, 27, 0, 30, tzinfo=UTC)
POOL = "nvidia.com/gpu.product"
RACK = "gpu-oncall.io/rack"
CLIQUE = "nvidia.com/gpu.clique"


@st.composite
def fleets(draw: st.DrawFn) -> list[NodeInfo]:
    size = draw(st.integers(min_value=1, max_value=24))
    fleet = []
    for index in range(size):
        labels = {}
        for key, values in ((POOL, ["H100", "A100"]), (RACK, ["r1", "r2"]), (CLIQUE, ["c1"])):
            value = draw(st.sampled_from([None, *values]))
            if value is not None:
                labels[key] = value
        fleet.append(
            NodeInfo(
                name=f"gpu-node-{index:02d}",
                ready=draw(st.booleans()),
                unschedulable=draw(st.booleans()),
                labels=labels,
                gpu_capacity=draw(st.integers(min_value=0, max_value=8)),
            )
        )
    return fleet


LIMIT = st.one_of(
    st.integers(min_value=0, max_value=12).map(str),
    st.integers(min_value=0, max_value=120).map(lambda share: f"{share}%"),
)


def counted(limits: SafetyLimits, fleet: list[NodeInfo], target: NodeInfo) -> dict[str, NodeCount]:
    """Each scope of the target counted over its label selection, as `count_nodes` answers."""
    pairs = zip(scopes_of(limits, target), scope_selectors(limits, target), strict=True)
    return {scope: count_of(select_by_labels(fleet, selector)) for scope, selector in pairs}


@settings(max_examples=300, deadline=None)
@given(
    fleet=fleets(),
    data=st.data(),
    max_unhealthy=LIMIT,
    max_gpus=LIMIT,
    domain_gpus=LIMIT,
    action=st.sampled_from(["cordon", "drain", "reboot", "uncordon"]),
)
def test_counts_decide_exactly_as_the_member_list(
    fleet: list[NodeInfo],
    data: st.DataObject,
    max_unhealthy: str,
    max_gpus: str,
    domain_gpus: str,
    action: str,
) -> None:
    limits = SafetyLimits(
        max_unhealthy=max_unhealthy,
        max_gpus_removed=max_gpus,
        domain_max_gpus_removed=domain_gpus,
        max_actions_per_hour=1000,
    )
    target = data.draw(st.sampled_from(fleet))
    names = [n.name for n in fleet] + ["gpu-node-gone"]
    in_flight = frozenset(data.draw(st.lists(st.sampled_from(names), max_size=6)))
    whole = Situation(nodes=fleet, in_flight=in_flight)
    seen = [target, *(n for n in fleet if n.name in in_flight and n.name != target.name)]
    counts = counted(limits, fleet, target)
    bounded = Situation(nodes=seen, counts=counts, in_flight=in_flight)

    def decide(situation: Situation) -> object:
        return evaluate(limits, action=action, target=target.name, situation=situation, now=NOW)

    assert decide(bounded) == decide(whole)


def test_the_count_is_what_is_read_not_the_member_list() -> None:
    target = NodeInfo("gpu-node-00", True, False, labels={POOL: "H100"}, gpu_capacity=8)
    limits = SafetyLimits(max_unhealthy="1", max_gpus_removed="100%")
    down = NodeInfo("gpu-node-07", False, True, labels={POOL: "H100"}, gpu_capacity=8)
    counts = {f"pool {POOL}=H100": NodeCount(nodes=40, gpus=320, down=(down,))}
    situation = Situation(nodes=[target], counts=counts)
    blocked = evaluate(limits, action="cordon", target=target.name, situation=situation, now=NOW)
    assert blocked is not None
    assert blocked.reason == "1 of 40 nodes of pool H100 already out (limit 1 = 1 nodes)"
    assert blocked.numbers["out_nodes"] == ["gpu-node-07"]
