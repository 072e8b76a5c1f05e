"""Fused stages (bot/engine/stages.py): a stage whose records wait for the next super-step's
runs with it as one node, reads then checks then the verdict.

Covers: on generated step graphs, each step is in one node, a fused node's levels are whole
consecutive depths of reads and decisions, each level but the last one's records waited for the
next, and no node starts later than on the staged graph (no read waits for anything it did not
wait for); the shipped runbooks fuse their gathers, checks and verdict; a level sees the
outputs of the levels before it, and a level's failure carries those outputs, which the failed
run's timeline shows; a run that waited for its approval on the staged graph (before fusion)
resumes on it and runs its verification, and a checkpoint that ran no node yet goes on the
fused one. (A check that fails after the reads: test_stages, through the fused stage.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine.test_stages import (
    member,
    runtime,
    saved_checkpoint,
    step_graphs,
    super_steps,
    versions_seen,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver

from bot.config import Settings
from bot.engine import compiling, stages
from bot.engine.inputs import resolve_inputs
from bot.engine.schema import StepKind
from bot.engine.stages import (
    STAGED,
    Shape,
    checkpoint_names,
    checkpoint_shape,
    followed_by_decisions,
    make_stage_node,
    plan_nodes,
    steps_done_before,
)
from bot.wiring.runtime import Runtime, open_runtime
from tests.engine.runbook_helpers import NODE, open_incident


@settings(max_examples=400, deadline=None)
@given(step_graphs())
def test_fused_nodes_are_whole_depths_and_start_no_later(loaded: Any) -> None:
    nodes = plan_nodes(loaded, Shape.FUSED)
    ids = [step.id for node in nodes for step in node.steps]
    assert sorted(ids) == sorted(s.id for s in loaded.runbook.steps)  # each step, once
    depth = loaded.depths
    staged, fused = super_steps(loaded, Shape.STAGED), super_steps(loaded, Shape.FUSED)
    staged_node = {s.id: n.name for n in plan_nodes(loaded, Shape.STAGED) for s in n.steps}
    for node in nodes:
        first = node.levels[0][0]
        assert fused[node.name] <= staged[staged_node[first.id]]  # no node starts later
        if len(node.levels) == 1:
            continue
        levels = [depth[level[0].id] for level in node.levels]
        assert levels == list(range(levels[0], levels[0] + len(levels)))
        assert node.name == f"stage-{levels[0]}-{levels[-1]}"
        for level, steps in zip(levels, node.levels, strict=True):
            assert all(depth[s.id] == level and s.kind in STAGED for s in steps)
        for steps in node.levels[1:]:  # the levels after the first: a whole depth each
            whole = {s.id for s in loaded.runbook.steps if depth[s.id] == depth[steps[0].id]}
            assert {s.id for s in steps} == whole
            assert all(s.kind in stages.DECIDES_SOON for s in steps)
        for steps in node.levels[:-1]:  # each level's records waited for the next one's
            assert followed_by_decisions(loaded, [s.id for s in steps])
        # its first level waits for its own dependencies' nodes alone: nothing the later
        # levels need holds its reads back
        node_of = {s.id: n.name for n in nodes for s in n.steps}
        own = {s.id for s in node.steps}
        waits = {node_of[d] for s in node.levels[0] for d in loaded.deps[s.id] if d not in own}
        assert fused[node.name] == 1 + max((fused[n] for n in waits), default=0)


def test_the_shipped_runbooks_fuse_their_gathers_checks_and_verdict(rt: Runtime) -> None:
    for name in rt.catalog.names():
        loaded = rt.catalog.get(name)
        fused = [node for node in plan_nodes(loaded, Shape.FUSED) if len(node.levels) > 1]
        assert len(fused) == 1, name
        kinds = [{s.kind for s in level} for level in fused[0].levels]
        assert kinds[-1] == {StepKind.LOCALIZE}, name  # ... through the verdict
        assert StepKind.CHECK in kinds[-2], name
    ecc = {node.name: node for node in plan_nodes(rt.catalog.get("ecc-storm"), Shape.FUSED)}
    assert [len(level) for level in ecc["stage-1-3"].levels] == [9, 7, 1]
    assert [s.id for s in ecc["stage-1-3"].levels[2]] == ["where"]
    mfu = [node.name for node in plan_nodes(rt.catalog.get("mfu-regression"), Shape.FUSED)]
    assert mfu[:2] == ["stage-1", "stage-2-4"]  # the first reads are followed by reads: apart


def test_a_level_reads_the_outputs_of_the_levels_before_it() -> None:
    def read(_state: Any, _runtime: Any) -> dict[str, Any]:
        return {"steps": {"a": {"max": 3.0}}}

    def check(state: Any, _runtime: Any) -> dict[str, Any]:
        return {"steps": {"b": {"passed": state["steps"]["a"]["max"] > 1.0}}}

    def verdict(state: Any, _runtime: Any) -> dict[str, Any]:
        return {"steps": {"c": {"from": sorted(state["steps"])}}}

    node = make_stage_node("stage-1-3", [
        [member(StepKind.SIGNAL, "a", read)],
        [member(StepKind.CHECK, "b", check)],
        [member(StepKind.LOCALIZE, "c", verdict)],
    ])  # fmt: skip
    out = node({"steps": {"earlier": {}}}, runtime())["steps"]
    assert list(out) == ["a", "b", "c"]
    assert out["b"] == {"passed": True}
    assert out["c"] == {"from": ["a", "b", "earlier"]}


@given(st.integers(min_value=0, max_value=2))
def test_a_levels_failure_carries_the_outputs_of_the_levels_that_ran(failing: int) -> None:
    def ok(step_id: str) -> Any:
        return lambda _state, _runtime: {"steps": {step_id: {"ran": True}}}

    def broken(_state: Any, _runtime: Any) -> dict[str, Any]:
        raise RuntimeError("broke")

    names = ["a", "b", "c"]
    kinds = [StepKind.SIGNAL, StepKind.CHECK, StepKind.LOCALIZE]
    node = make_stage_node("stage-1-3", [
        [member(kind, step_id, broken if i == failing else ok(step_id))]
        for i, (kind, step_id) in enumerate(zip(kinds, names, strict=True))
    ])  # fmt: skip
    with pytest.raises(RuntimeError, match="broke") as caught:
        node({}, runtime())
    assert dict(steps_done_before(caught.value)) == {n: {"ran": True} for n in names[:failing]}


def test_a_run_waiting_on_the_staged_graph_resumes_on_it_and_verifies(
    settings: Settings, scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with monkeypatch.context() as before_fusion:
        before_fusion.setattr(stages, "fuse", lambda _loaded, nodes: list(nodes))
        with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
            loaded = rt.catalog.get("ecc-storm")
            waiting = rt.engine.start(
                loaded,
                inputs={"node": NODE},
                incident_id=open_incident(rt, loaded),
                requester="alertmanager",
            )
    assert waiting.status == "awaiting_approval"
    with open_runtime(settings, scenario_path=scenario) as rt:  # the upgraded process
        loaded = rt.catalog.get("ecc-storm")
        assert {"stage-1", "stage-2", "where"} <= set(versions_seen(rt, waiting.run_id))
        assert checkpoint_shape(loaded, saved_checkpoint(rt, waiting.run_id)) is Shape.STAGED
        # `confirm` waits for `dbe` and `execute`: on the fused graph `dbe` is in stage-1-3,
        # a node this run never ran, so only the graph it began on reaches the verification
        done = rt.engine.resume(waiting.run_id, decision="approve", actor="cli:alice")
        assert done.status == "completed"
        assert done.steps["confirm"]["status"] in {"passed", "failed"}


def ran(*names: str) -> dict[str, Any]:
    return {"versions_seen": dict.fromkeys(["__input__", "__start__", *names], {})}


def test_a_checkpoint_goes_on_the_newest_graph_that_has_every_node_it_knows(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    assert checkpoint_shape(loaded, ran()) is Shape.FUSED  # it ran no node yet
    assert checkpoint_shape(loaded, ran("stage-1-3", "fix")) is Shape.FUSED
    assert checkpoint_shape(loaded, ran("stage-1", "where")) is Shape.STAGED
    assert checkpoint_shape(loaded, ran("dbe", "storm")) is Shape.PER_STEP


def test_a_run_waiting_for_a_node_only_its_graph_has_goes_on_that_graph(rt: Runtime) -> None:
    """mfu-regression's first reads are a node of both the staged and the fused graph (reads
    follow them, so they are not fused), but a staged run stopped after them waits for
    `stage-2`, which only the staged graph has: its edge channels say so."""
    loaded = rt.catalog.get("mfu-regression")
    assert "stage-1" in {node.name for node in plan_nodes(loaded, Shape.FUSED)}
    staged = compiling.build_graph(loaded, Shape.STAGED).compile(
        checkpointer=InMemorySaver(), interrupt_after=["stage-1"]
    )
    config = {"configurable": {"thread_id": "mfu-1"}}
    state = {"run_id": "mfu-1", "runbook": loaded.name, "incident": "INC-1", "target": "",
             "inputs": resolve_inputs(loaded, {"job": "llm-pretrain"}), "steps": {}}  # fmt: skip
    staged.invoke(state, config, context=rt.deps)
    saved = staged.checkpointer.get_tuple(config)  # type: ignore[union-attr]
    assert saved is not None and "stage-1" in saved.checkpoint["versions_seen"]
    assert "stage-2" in checkpoint_names(saved.checkpoint)
    assert checkpoint_shape(loaded, saved.checkpoint) is Shape.STAGED
    assert checkpoint_shape(loaded, ran("stage-1")) is Shape.FUSED  # the nodes it ran alone
