"""Stages (bot/engine/stages.py): a super-step's reads and decisions run as one LangGraph node.

Covers: the plan keeps LangGraph's schedule (every step runs in the super-step of its depth,
generated step graphs and every shipped runbook); each step is in one node; only reads and
decisions are grouped; a stage's outputs come back in step order, its reads run concurrently,
and a member's error fails the stage once the others have finished; a run that waited for its
approval on the graph of one node per step (before stages) resumes on that graph and runs its
verification, while a new run goes on the staged one. A super-step's records wait for the
next one's only when that one is checks and verdicts alone (never a plain read, a proposal or
a person), on generated step graphs and the shipped runbooks, with earlier held super-steps
pending too; when those checks fail, the reads are on the timeline all the same.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import Settings
from bot.engine import compiling, stages
from bot.engine.loading import LoadedRunbook
from bot.engine.reads_ahead import ReadsAhead
from bot.engine.schema import StepKind
from bot.engine.stages import (
    Shape,
    checkpoint_shape,
    followed_by_decisions,
    make_stage_node,
    plan_nodes,
    plan_stages,
)
from bot.wiring.runtime import Runtime, open_runtime
from tests.engine.runbook_helpers import (
    NODE,
    ecc_runbook,
    incident_record,
    load,
    open_incident,
    start,
)

KINDS = list(StepKind)


@st.composite
def step_graphs(draw: st.DrawFn) -> Any:
    """A runbook's steps (id, kind) in dependency order and each one's dependencies."""
    count = draw(st.integers(min_value=1, max_value=14))
    steps: list[SimpleNamespace] = []
    deps: dict[str, frozenset[str]] = {}
    for index in range(count):
        step_id = f"s{index}"
        kind = draw(st.sampled_from(KINDS))
        earlier = [s.id for s in steps]
        chosen = draw(st.lists(st.sampled_from(earlier), unique=True)) if earlier else []
        steps.append(SimpleNamespace(id=step_id, kind=kind))
        deps[step_id] = frozenset(chosen)
    runbook: Any = SimpleNamespace(steps=steps)  # what planning reads of a Runbook
    return LoadedRunbook(runbook=runbook, file="generated", deps=deps)


def super_steps(loaded: Any, shape: Shape = Shape.STAGED) -> dict[str, int]:
    """The super-step each node runs in on the compiled graph (a node waits for all of its
    dependencies' nodes), by node name."""
    nodes = plan_nodes(loaded, shape)
    node_of = {step.id: stage.name for stage in nodes for step in stage.steps}
    ran: dict[str, int] = {}
    for stage in nodes:  # in step order: a node's dependencies come first
        before = {node_of[d] for s in stage.steps for d in loaded.deps[s.id]} - {stage.name}
        ran[stage.name] = 1 + max((ran[n] for n in before), default=0)
    return ran


@settings(max_examples=300, deadline=None)
@given(step_graphs())
def test_every_step_runs_in_the_super_step_of_its_depth(loaded: Any) -> None:
    nodes = plan_stages(loaded)
    ids = [step.id for stage in nodes for step in stage.steps]
    assert sorted(ids) == sorted(s.id for s in loaded.runbook.steps)  # each step, once
    depth, ran = loaded.depths, super_steps(loaded)
    for stage in nodes:
        assert {depth[s.id] for s in stage.steps} == {ran[stage.name]}
        if len(stage.steps) > 1:
            assert all(s.kind in stages.STAGED for s in stage.steps)
            assert stage.name == f"stage-{ran[stage.name]}"
        else:
            assert stage.name == stage.steps[0].id


def test_the_shipped_runbooks_run_their_reads_and_decisions_as_stages(rt: Runtime) -> None:
    for name in rt.catalog.names():
        loaded = rt.catalog.get(name)
        nodes = plan_stages(loaded)
        assert len(nodes) < len(loaded.runbook.steps), name
        depth, ran = loaded.depths, super_steps(loaded)
        assert all(ran[stage.name] == depth[stage.steps[0].id] for stage in nodes), name
    ecc = {
        stage.name: [s.id for s in stage.steps]
        for stage in plan_stages(rt.catalog.get("ecc-storm"))
    }
    assert ecc["stage-1"] == ["dbe", "sbe", "remap_failure", "remap_pending", "remapped", "xid",
                              "kernel", "node_state", "dcgm_up"]  # fmt: skip
    assert "where" in ecc and "fix" in ecc and "approval" in ecc


@settings(max_examples=300, deadline=None)
@given(step_graphs())
def test_records_wait_only_for_a_super_step_of_checks_and_verdicts(loaded: Any) -> None:
    depth = loaded.depths
    at: dict[int, list[Any]] = {}
    for step in loaded.runbook.steps:
        at.setdefault(depth[step.id], []).append(step)
    reads_or_checks = {StepKind.SIGNAL, StepKind.CLUSTER, StepKind.CHECK}
    for level, steps in at.items():
        waits = followed_by_decisions(loaded, [s.id for s in steps])
        following = at.get(level + 1, [])
        expected = (
            all(s.kind in reads_or_checks for s in steps)
            and bool(following)
            and all(s.kind in (StepKind.CHECK, StepKind.LOCALIZE) for s in following)
        )
        assert waits == expected, (level, [s.kind for s in steps], [s.kind for s in following])
        # with the super-steps before it (held, so pending too): the deepest one decides
        earlier = [s.id for lower in range(1, level) for s in at.get(lower, [])]
        assert followed_by_decisions(loaded, earlier + [s.id for s in steps]) == expected
    assert not followed_by_decisions(loaded, [])


def test_the_ecc_storm_reads_and_checks_are_recorded_with_its_verdict(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    by_depth: dict[int, list[str]] = {}
    for step_id, level in loaded.depths.items():
        by_depth.setdefault(level, []).append(step_id)
    assert followed_by_decisions(loaded, by_depth[1])  # the gathers: checks alone follow
    assert followed_by_decisions(loaded, by_depth[2])  # the checks: the verdict alone follows
    assert followed_by_decisions(loaded, by_depth[1] + by_depth[2])  # both held, then
    assert not followed_by_decisions(loaded, by_depth[1] + by_depth[2] + by_depth[3])  # recorded


def test_reads_waiting_for_checks_that_fail_are_on_the_timeline(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_check(step: Any, _loaded: Any) -> Any:
        def node(state: Any, runtime: Any) -> dict[str, Any]:  # LangGraph reads these names
            raise RuntimeError(f"check {step.id} broke")

        return node

    monkeypatch.setitem(compiling._FACTORIES, StepKind.CHECK, broken_check)
    loaded = load(rt, ecc_runbook("broken-check", policy={}), file="tests/broken-check.yaml")
    incident_id = open_incident(rt, loaded)
    with pytest.raises(RuntimeError, match="check storm broke"):
        start(rt, loaded, incident_id=incident_id)
    _incident, events = incident_record(rt, incident_id)
    kinds = {e.step_id: e.kind for e in events if e.step_id}
    assert kinds["dbe"] == "step_completed"  # the read, recorded although its check failed
    assert "storm" not in kinds


def member(kind: StepKind, step_id: str, fn: Any) -> tuple[Any, Any]:
    return SimpleNamespace(id=step_id, kind=kind), fn


def runtime(*, parallel_reads: bool = True, ahead: ReadsAhead | None = None) -> Any:
    context = SimpleNamespace(parallel_reads=parallel_reads, reads_ahead=ahead or ReadsAhead())
    return SimpleNamespace(context=context)


def test_a_stage_returns_its_outputs_in_step_order_with_its_reads_concurrent() -> None:
    both_started = threading.Barrier(2, timeout=10)  # deadlocks unless the reads overlap

    def read(step_id: str) -> Any:
        def fn(_state: Any, _runtime: Any) -> dict[str, Any]:
            both_started.wait()
            return {"steps": {step_id: {"kind": "signal"}}}

        return fn

    def decide(step_id: str) -> Any:
        return lambda _state, _runtime: {"steps": {step_id: {"kind": "check"}}}

    node = make_stage_node("stage-1", [[
        member(StepKind.SIGNAL, "a", read("a")),
        member(StepKind.CHECK, "b", decide("b")),
        member(StepKind.CLUSTER, "c", read("c")),
    ]])  # fmt: skip
    assert list(node({}, runtime())["steps"]) == ["a", "b", "c"]


def test_reads_of_in_process_telemetry_take_turns_in_the_stage_thread_beside_cluster_reads() -> (
    None
):
    stage_thread = threading.get_ident()
    cluster_started = threading.Event()
    reading: list[str] = []  # signal reads under way
    seen: list[tuple[str, int, int]] = []  # (step, thread, reads under way)
    lock = threading.Lock()

    def signal(step_id: str) -> Any:
        def fn(_state: Any, _runtime: Any) -> dict[str, Any]:
            with lock:
                reading.append(step_id)
                seen.append((step_id, threading.get_ident(), len(reading)))
            assert cluster_started.wait(timeout=10)  # the cluster read runs meanwhile
            with lock:
                reading.remove(step_id)
            return {"steps": {step_id: {"kind": "signal"}}}

        return fn

    def cluster(_state: Any, _runtime: Any) -> dict[str, Any]:
        cluster_started.set()
        return {"steps": {"c": {"kind": "cluster"}}}

    node = make_stage_node("stage-1", [[
        member(StepKind.SIGNAL, "a", signal("a")),
        member(StepKind.CLUSTER, "c", cluster),
        member(StepKind.SIGNAL, "b", signal("b")),
    ]])  # fmt: skip
    assert list(node({}, runtime(parallel_reads=False))["steps"]) == ["a", "c", "b"]
    assert seen == [("a", stage_thread, 1), ("b", stage_thread, 1)]


def test_a_run_on_the_simulated_fleet_reads_its_signals_one_at_a_time(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wiring says the simulated fleet answers with this process's CPU, and a whole run's
    signal reads then never overlap (each still waited on under its step's deadline)."""
    assert rt.deps.parallel_reads is False
    telemetry, lock = rt.deps.telemetry, threading.Lock()
    under_way: list[str] = []
    most: list[int] = []
    read = telemetry.read

    def counted(query: Any) -> Any:
        with lock:
            under_way.append(query.signal)
            most.append(len(under_way))
        try:
            return read(query)
        finally:
            with lock:
                under_way.remove(query.signal)

    monkeypatch.setattr(telemetry, "read", counted)
    loaded = rt.catalog.get("ecc-storm")
    start(rt, loaded, incident_id=open_incident(rt, loaded))
    signals = [s for s in loaded.runbook.steps if s.signal]
    assert len(most) >= len(signals) > 1 and max(most) == 1


def test_a_members_error_fails_the_stage_after_the_others_finished() -> None:
    finished: list[str] = []

    def fails(_state: Any, _runtime: Any) -> dict[str, Any]:
        raise ValueError("the first member's error")

    def later(step_id: str) -> Any:
        def fn(_state: Any, _runtime: Any) -> dict[str, Any]:
            finished.append(step_id)
            if step_id == "c":
                raise KeyError("a later member's error")
            return {"steps": {step_id: {}}}

        return fn

    node = make_stage_node("stage-1", [[
        member(StepKind.SIGNAL, "a", fails),
        member(StepKind.SIGNAL, "b", later("b")),
        member(StepKind.CHECK, "c", later("c")),
    ]])  # fmt: skip
    with pytest.raises(ValueError, match="the first member's error"):
        node({}, runtime())
    assert sorted(finished) == ["b", "c"]


def saved_checkpoint(rt: Runtime, run_id: str) -> dict[str, Any]:
    saved = rt.engine.checkpointer.get_tuple({"configurable": {"thread_id": run_id}})
    assert saved is not None
    return dict(saved.checkpoint)


def versions_seen(rt: Runtime, run_id: str) -> dict[str, Any]:
    return dict(saved_checkpoint(rt, run_id)["versions_seen"])


def test_a_run_waiting_on_the_per_step_graph_resumes_on_it_and_verifies(
    settings: Settings, scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with monkeypatch.context() as before_stages:
        before_stages.setattr(stages, "STAGED", frozenset())  # every step a node of its own
        with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
            waiting = rt.engine.start(
                rt.catalog.get("ecc-storm"),
                inputs={"node": NODE},
                incident_id=open_incident(rt, rt.catalog.get("ecc-storm")),
                requester="alertmanager",
            )
    assert waiting.status == "awaiting_approval"
    with open_runtime(settings, scenario_path=scenario) as rt:  # the upgraded process
        loaded: LoadedRunbook = rt.catalog.get("ecc-storm")
        assert checkpoint_shape(loaded, saved_checkpoint(rt, waiting.run_id)) is Shape.PER_STEP
        # `confirm` waits for `dbe` and `execute`: on the staged graph `dbe` is in stage-1,
        # a node this run never ran, so only the graph it began on can reach the verification
        done = rt.engine.resume(waiting.run_id, decision="approve", actor="cli:alice")
        assert done.status == "completed"
        assert done.steps["confirm"]["kind"] == "verify"
        assert done.steps["confirm"]["status"] in {"passed", "failed"}
        fresh = start(rt, loaded, requester="cli:alice")
        saved = saved_checkpoint(rt, fresh.run_id)
        assert "stage-1-3" in saved["versions_seen"]
        assert checkpoint_shape(loaded, saved) is Shape.FUSED
