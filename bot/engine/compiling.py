"""Compile a loaded runbook into a LangGraph StateGraph: one node per stage (the reads and
decisions of one super-step, or a fused stage's several, bot/engine/stages.py) or per step of
any other kind, edges from the data dependencies found at load time. Steps with no dependency
between them run concurrently (a stage's reads on its pool; LangGraph runs parallel nodes on
its thread pool); a node with several dependencies waits for all of them (a join edge).
"""

from __future__ import annotations

from collections.abc import Callable

from langgraph.graph import END, START, StateGraph

from bot.engine.loading import LoadedRunbook
from bot.engine.quiet_tail import QuietTail, plan_quiet_tail
from bot.engine.schema import Step, StepKind
from bot.engine.stages import Shape, Stage, StageNode, make_stage_node, plan_nodes
from bot.engine.state import Deps, RunState
from bot.engine.steps.check import make_check_node
from bot.engine.steps.gather import NodeFn, make_cluster_node, make_signal_node
from bot.engine.steps.localize import make_localize_node
from bot.engine.steps.remediate import (
    make_act_node,
    make_approve_node,
    make_propose_node,
    make_verify_node,
)

_FACTORIES: dict[StepKind, Callable[[Step, LoadedRunbook], NodeFn]] = {
    StepKind.SIGNAL: make_signal_node,
    StepKind.CLUSTER: make_cluster_node,
    StepKind.CHECK: make_check_node,
    StepKind.LOCALIZE: make_localize_node,
    StepKind.PROPOSE: make_propose_node,
    StepKind.APPROVE: make_approve_node,
    StepKind.ACT: make_act_node,
    StepKind.VERIFY: make_verify_node,
}


def build_graph(
    loaded: LoadedRunbook, shape: Shape = Shape.FUSED, *, openers: list[StageNode] | None = None
) -> StateGraph[RunState, Deps, RunState, RunState]:
    """The runbook's StateGraph (not yet compiled with a checkpointer) of `shape`
    (bot/engine/stages.py): one node per fused stage, per stage, or per step, the graphs runs
    were checkpointed with before fused stages and before stages. `openers` is given the stage
    nodes that depend on nothing (their reads may start ahead, bot/engine/reads_ahead.py)."""
    graph: StateGraph[RunState, Deps, RunState, RunState] = StateGraph(
        RunState, context_schema=Deps
    )
    nodes = plan_nodes(loaded, shape)
    node_of = {step.id: stage.name for stage in nodes for step in stage.steps}
    fns = {step.id: _FACTORIES[step.kind](step, loaded) for step in loaded.runbook.steps}
    tail = _quiet_tail(loaded, nodes, node_of, fns)
    has_dependents: set[str] = set()
    for stage in nodes:
        levels = [[(step, fns[step.id]) for step in level] for level in stage.levels]
        fn = make_stage_node(stage.name, levels, tail if tail and tail.node == stage.name else None)
        graph.add_node(stage.name, fn)  # type: ignore[call-overload]
        deps = sorted(_leads_from(loaded, stage, node_of))
        has_dependents.update(deps)
        if isinstance(fn, StageNode) and not deps and openers is not None:
            openers.append(fn)
        if not deps:
            graph.add_edge(START, stage.name)
        elif len(deps) == 1 and tail is not None and deps[0] == tail.node:
            pass  # the tail's node routes to it (below)
        elif len(deps) == 1:
            graph.add_edge(deps[0], stage.name)
        else:
            graph.add_edge(deps, stage.name)
    if tail is not None:
        graph.add_conditional_edges(tail.node, tail.route, [*tail.then, END])
    for stage in nodes:
        if stage.name not in has_dependents:
            graph.add_edge(stage.name, END)
    return graph


def _quiet_tail(
    loaded: LoadedRunbook, nodes: list[Stage], node_of: dict[str, str], fns: dict[str, NodeFn]
) -> QuietTail | None:
    """The steps the node reaching every verdict runs when they found no fault, if the
    runbook allows (bot/engine/quiet_tail.py), with the nodes that node leads to otherwise."""
    planned = plan_quiet_tail(loaded, {stage.name: stage.steps for stage in nodes})
    if planned is None:
        return None
    node, after = planned
    steps = {step.id: step for step in loaded.runbook.steps}
    then = [stage.name for stage in nodes if _leads_from(loaded, stage, node_of) == {node}]
    return QuietTail(
        node=node,
        verdicts=tuple(s.id for s in loaded.runbook.steps if s.kind is StepKind.LOCALIZE),
        members=tuple((steps[sid], fns[sid]) for sid in after),
        then=tuple(then),
    )


def _leads_from(loaded: LoadedRunbook, stage: Stage, node_of: dict[str, str]) -> set[str]:
    """The nodes `stage` waits for: those of its steps' dependencies outside itself."""
    return {node_of[d] for s in stage.steps for d in loaded.deps[s.id]} - {stage.name}


def render_mermaid(loaded: LoadedRunbook) -> str:
    """The runbook's step graph as a Mermaid flowchart (for `gpu-oncall runbooks graph`)."""
    lines = ["flowchart TD", "  start([start])"]
    for step in loaded.runbook.steps:
        label = f"{step.id}<br/>{step.kind.value}"
        detail = step.signal or step.cluster or step.layer or ""
        if detail:
            label += f": {detail}"
        shape = ("{{", "}}") if step.kind is StepKind.APPROVE else ("[", "]")
        lines.append(f'  {step.id}{shape[0]}"{label}"{shape[1]}')
    ends = set(s.id for s in loaded.runbook.steps) - {d for v in loaded.deps.values() for d in v}
    for step in loaded.runbook.steps:
        for dep in sorted(loaded.deps[step.id]) or ["start"]:
            lines.append(f"  {dep} --> {step.id}")
    lines.append("  finish([end])")
    lines.extend(f"  {sid} --> finish" for sid in sorted(ends))
    return "\n".join(lines) + "\n"
