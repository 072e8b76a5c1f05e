"""A run whose verdict found no fault ends in its verdict's node (bot/engine/quiet_tail.py).

Covers: which node of each shipped runbook runs the steps after its verdicts, and in which
order; the runbooks that get no quiet tail (a lone verdict, verdicts in two nodes, a step that
runs beside the verdicts' node, an action with no approval to wait for); a run on a healthy
node is one LangGraph node whose remediation outputs are those of the graph of one node per
step, and its one checkpoint knows no other node; a run on the faulty node goes on to its
proposal and waits for the approval as before; and the guard: a tail step that did something,
raised or would wait drops the tail's outputs, and the steps after it do not run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt
from langgraph.graph import END
from langgraph.runtime import Runtime as GraphRuntime

from bot.engine.compiling import build_graph
from bot.engine.loading import LoadedRunbook
from bot.engine.quiet_tail import QuietTail, plan_quiet_tail
from bot.engine.schema import StepKind
from bot.engine.stages import Shape, checkpoint_shape, plan_nodes
from bot.wiring.runtime import Runtime
from tests.engine.conftest import ON_BOTH
from tests.engine.test_idle_steps import HEALTHY, REMEDIATION

FAULTY = "gpu-node-03"
WHEN = ("requested_at", "expires_at", "at")  # the clock's readings, not what a step decided


def holding(loaded: LoadedRunbook, shape: Shape = Shape.FUSED) -> dict[str, Any]:
    return {node.name: node.steps for node in plan_nodes(loaded, shape)}


def without(loaded: LoadedRunbook, step_id: str) -> LoadedRunbook:
    """`loaded` with step `step_id` taken out (and out of every step's dependencies)."""
    steps = [s for s in loaded.runbook.steps if s.id != step_id]
    deps = {k: v - {step_id} for k, v in loaded.deps.items() if k != step_id}
    runbook = loaded.runbook.model_copy(update={"steps": steps})
    return dataclasses.replace(loaded, runbook=runbook, deps=deps)


def test_each_shipped_runbook_ends_quietly_in_the_node_of_its_verdicts(rt: Runtime) -> None:
    assert plan_quiet_tail(rt.catalog.get("ecc-storm"), holding(rt.catalog.get("ecc-storm"))) == (
        "stage-1-3",
        list(REMEDIATION),
    )
    for name in rt.catalog.names():
        loaded = rt.catalog.get(name)
        planned = plan_quiet_tail(loaded, holding(loaded))
        assert planned is not None, name
        node, after = planned
        verdicts = {s.id for s in loaded.runbook.steps if s.kind is StepKind.LOCALIZE}
        assert verdicts <= {s.id for s in holding(loaded)[node]}
        kinds = [loaded.kinds[sid] for sid in after]
        assert kinds[:3] == [StepKind.PROPOSE, StepKind.APPROVE, StepKind.ACT], name
        assert set(kinds[3:]) <= {StepKind.VERIFY}
        depths = [loaded.depths[sid] for sid in after]
        assert depths == sorted(depths)  # each after what it reads


def test_runbooks_that_get_no_quiet_tail(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    # one node per step: the verdict is a lone step's own function, not a stage
    assert plan_quiet_tail(loaded, holding(loaded, Shape.PER_STEP)) is None
    # verdicts in two nodes
    split = dict(holding(loaded))
    stage = split.pop("stage-1-3")
    where = [s for s in stage if s.kind is StepKind.LOCALIZE]
    split |= {"stage-1-3": [s for s in stage if s not in where], "where": where}
    assert plan_quiet_tail(loaded, split) is None
    # a verification that does not wait for the verdict's node runs beside it
    beside = dataclasses.replace(loaded, deps={**loaded.deps, "confirm": frozenset()})
    assert plan_quiet_tail(beside, holding(loaded)) is None
    # an action with no approval would run its (empty) plan
    unapproved = without(loaded, "approval")
    assert plan_quiet_tail(unapproved, holding(unapproved)) is None
    # no verdict at all
    assert plan_quiet_tail(without(loaded, "where"), {"stage-1-3": stage[:2]}) is None


def stream(rt: Runtime, loaded: LoadedRunbook, shape: Shape, node: str) -> tuple[list[str], Any]:
    """The nodes a fresh run on `node` ran (in order) on the graph of `shape`, and its state."""
    app = build_graph(loaded, shape).compile(checkpointer=InMemorySaver())
    state = {
        "run_id": f"r-{shape}",
        "runbook": loaded.name,
        "incident": "INC-1",
        "inputs": {"node": node, "requester": "test"},
        "target": node,
        "steps": {},
    }
    config: Any = {"configurable": {"thread_id": f"r-{shape}"}}
    ran = [
        name
        for chunk in app.stream(state, config, context=rt.engine.deps, stream_mode="updates")
        for name in chunk
    ]
    return ran, app.get_state(config)


def decided(outputs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in outputs.items() if k not in WHEN}


def test_a_healthy_node_runs_one_node_with_the_outputs_of_one_node_per_step(
    rt: Runtime,
) -> None:
    loaded = rt.catalog.get("ecc-storm")
    fused, fused_state = stream(rt, loaded, Shape.FUSED, HEALTHY)
    per_step, per_step_state = stream(rt, loaded, Shape.PER_STEP, HEALTHY)
    assert fused == ["stage-1-3"] and not fused_state.next
    assert set(REMEDIATION) <= set(per_step) and not per_step_state.next
    steps, expected = fused_state.values["steps"], per_step_state.values["steps"]
    assert steps["where"]["layer"] == expected["where"]["layer"] == "none"
    assert list(steps)[-len(REMEDIATION) :] == list(REMEDIATION)  # after the verdict, in order
    for step_id in REMEDIATION:
        assert decided(steps[step_id]) == decided(expected[step_id]), step_id
    assert steps["fix"]["note"] == "target is healthy: nothing to do"


def test_a_faulty_node_goes_on_to_its_proposal_and_waits_for_the_approval(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    ran, state = stream(rt, loaded, Shape.FUSED, FAULTY)
    assert ran[:2] == ["stage-1-3", "fix"] and "__interrupt__" in ran
    assert state.next == ("approval",)
    assert state.values["steps"]["fix"]["proposals"]
    assert "approval" not in state.values["steps"]


@ON_BOTH
def test_a_healthy_run_on_disk_knows_only_the_node_of_its_verdict(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    incident_id, _ = rt.engine.open_incident(loaded, {"node": HEALTHY}, actor="alertmanager")
    outcome = rt.engine.start(
        loaded, inputs={"node": HEALTHY}, incident_id=incident_id, requester="alertmanager"
    )
    assert outcome.status == "completed"
    config: Any = {"configurable": {"thread_id": outcome.run_id}}
    saved = rt.engine.checkpointer.get_tuple(config)
    assert saved is not None
    assert set(saved.checkpoint["versions_seen"]) - {"__input__", "__start__"} == {"stage-1-3"}
    assert "branch:to:fix" not in saved.checkpoint["channel_versions"]  # routed to the end
    assert checkpoint_shape(loaded, saved.checkpoint) is Shape.FUSED


def tail_of(loaded: LoadedRunbook, *fns: Any) -> QuietTail:
    steps = {s.id: s for s in loaded.runbook.steps}
    members = tuple((steps[sid], fn) for sid, fn in zip(REMEDIATION, fns, strict=False))
    return QuietTail(node="stage-1-3", verdicts=("where",), members=members, then=("fix",))


def out(step_id: str, kind: str, **value: Any) -> Any:
    return lambda _state, _runtime: {"steps": {step_id: {"kind": kind, **value}}}


def test_the_tail_is_dropped_when_a_step_did_something_raised_or_would_wait(
    rt: Runtime,
) -> None:
    loaded = rt.catalog.get("ecc-storm")
    runtime = GraphRuntime(context=rt.engine.deps)
    no_fault = {"where": {"kind": "localize", "layer": "none"}}
    called: list[str] = []

    def approve(_state: Any, _runtime: Any) -> dict[str, Any]:
        called.append("approval")
        return {"steps": {"approval": {"kind": "approve", "decision": "not_needed"}}}

    idle = out("fix", "propose", proposals=[])
    quiet = tail_of(loaded, idle, approve)
    assert set(quiet.run({"steps": {}}, no_fault, runtime)) == {"fix", "approval"}
    assert quiet.route({"steps": {**no_fault, "fix": {}, "approval": {}}}) == END
    assert quiet.route({"steps": no_fault}) == ["fix"]
    fault = {"where": {"kind": "localize", "layer": "gpu_hardware"}}
    assert quiet.run({"steps": {}}, fault, runtime) == {}  # a fault: the graph goes on

    called.clear()
    busy = tail_of(loaded, out("fix", "propose", proposals=[{"action": "cordon"}]), approve)
    assert busy.run({"steps": {}}, no_fault, runtime) == {}
    assert called == []  # nothing after a step that did something

    def raises(_state: Any, _runtime: Any) -> dict[str, Any]:
        raise ValueError("broken template")

    def waits(_state: Any, _runtime: Any) -> dict[str, Any]:
        raise GraphInterrupt(())

    assert tail_of(loaded, raises, approve).run({"steps": {}}, no_fault, runtime) == {}
    assert tail_of(loaded, idle, waits).run({"steps": {}}, no_fault, runtime) == {}
    assert called == []


def test_node_diagnose_on_a_healthy_node_ends_in_its_verdict_node(rt: Runtime) -> None:
    loaded = rt.catalog.get("node-diagnose")
    planned = plan_quiet_tail(loaded, holding(loaded))
    assert planned is not None
    ran, state = stream(rt, loaded, Shape.FUSED, HEALTHY)
    assert ran == [planned[0]] and not state.next
    assert state.values["steps"]["where"]["layer"] == "none"
    assert state.values["steps"]["execute"]["skipped"] is True
