"""Stages: a super-step's reads and decisions run as one LangGraph node (issue 21).

LangGraph runs the graph in super-steps; a step runs in the super-step after the last of its
dependencies (its depth in the step graph). Every task of a super-step costs LangGraph its
own scheduling, config, callbacks and checkpoint write, about half a millisecond of the
interpreter each: for ecc-storm's 17 reads and decisions that was ~9 ms of every triage, more
than the reads themselves in-process. So the steps that only read or decide (signal, cluster,
check, localize) and share a depth run as one node, a *stage*, whose output is theirs merged;
a proposal, an approval, an action and a verification stay nodes of their own (they interrupt,
act, or are recorded apart). The schedule is the same: a stage runs in the super-step its
steps ran in, since each of them waited for its dependencies at lower depths.

Inside a stage, reads run concurrently (a real backend answers in parallel), one in the
stage's own thread and the rest on a pool that only runs stage members (a member never waits
on that pool, so stages cannot deadlock it); decisions run in order in the stage's thread.
Telemetry that answers with this process's own CPU (the simulated fleet, `Deps.parallel_reads`
false) gains nothing from threads: its signal steps run one after another in the stage's
thread (each still waits for its read under the step deadline, bot.engine.deadlines), so only
one read's samples are alive at a time (a 4,096-member storm's signal holds 32,768).
A member that raises fails the stage after the others have finished, with the first error in
step order; the stage's outputs are then not checkpointed and a retry runs it whole (reads are
idempotent). Runs checkpointed by the graph of one node per step (before stages) resume on
that graph: `checkpointed_per_step` tells them apart.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step, StepKind
from bot.engine.state import Deps, RunState
from bot.engine.steps.gather import NodeFn

STAGED = frozenset({StepKind.SIGNAL, StepKind.CLUSTER, StepKind.CHECK, StepKind.LOCALIZE})
"""Kinds that run inside a stage: they read or decide, and are recorded as their super-step
ends (bot/engine/running.py)."""
CONCURRENT = frozenset({StepKind.SIGNAL, StepKind.CLUSTER})
"""Kinds whose members of one stage run concurrently (they wait on a backend)."""
MEMBER_THREADS = 32
"""Threads of the pool running stage members: the reads of a few concurrent runs."""

_members = ThreadPoolExecutor(max_workers=MEMBER_THREADS, thread_name_prefix="stage-member")


@dataclass(frozen=True)
class Stage:
    """One node of the compiled graph: its name and the steps it runs (one, unless staged)."""

    name: str
    steps: tuple[Step, ...]


def depths(loaded: LoadedRunbook) -> dict[str, int]:
    """Each step's super-step: 1 for a step with no dependency, else 1 + its deepest one's."""
    depth: dict[str, int] = {}
    for step in loaded.runbook.steps:  # dependencies come first (checked at load)
        depth[step.id] = 1 + max((depth[d] for d in loaded.deps[step.id]), default=0)
    return depth


def plan_stages(loaded: LoadedRunbook) -> list[Stage]:
    """The graph's nodes, by depth then step order: the STAGED steps of each depth as one
    stage (named `stage-<depth>`, which no step id can be; a lone step keeps its own id),
    every other step as a node of its own."""
    depth = depths(loaded)
    staged: dict[int, list[Step]] = {}
    for step in loaded.runbook.steps:
        if step.kind in STAGED:
            staged.setdefault(depth[step.id], []).append(step)
    nodes: list[Stage] = []
    placed: set[int] = set()
    for step in loaded.runbook.steps:
        level = depth[step.id]
        if step.kind not in STAGED:
            nodes.append(Stage(step.id, (step,)))
        elif level not in placed:
            placed.add(level)
            members = tuple(staged[level])
            name = members[0].id if len(members) == 1 else f"stage-{level}"
            nodes.append(Stage(name, members))
    return sorted(nodes, key=lambda stage: depth[stage.steps[0].id])  # dependencies first


DECIDES_SOON = frozenset({StepKind.CHECK, StepKind.LOCALIZE})
"""Kinds of a super-step that ends soon after it starts: checks decide without reading, and a
verdict reads at most once (the detector's liveness, bot/engine/steps/liveness.py: one query,
under the telemetry's own timeout)."""


def followed_by_decisions(loaded: LoadedRunbook, step_ids: Iterable[str]) -> bool:
    """Whether the super-step that ran the deepest of `step_ids` (reads or checks, no verdict,
    proposal or action) is followed by a super-step of checks and verdicts alone: its records
    (and those of the super-steps held before it, the rest of `step_ids`) can wait for that
    one's, in one transaction on the way to the verdict (issue 21), without a person watching
    the timeline seeing them later than that super-step's one read."""
    ids = set(step_ids)
    if not ids:
        return False
    depth = depths(loaded)
    level = max(depth[step_id] for step_id in ids)
    steps = loaded.runbook.steps
    if any(s.kind not in STAGED - {StepKind.LOCALIZE} for s in steps
           if s.id in ids and depth[s.id] == level):  # fmt: skip
        return False
    following = [s.kind for s in steps if depth[s.id] == level + 1]
    return bool(following) and all(kind in DECIDES_SOON for kind in following)


def held_nodes(loaded: LoadedRunbook, *, staged: bool) -> frozenset[str]:
    """The nodes (of the staged graph, or of the one node per step) whose super-step's
    checkpoint may wait for the next one: those whose steps `followed_by_decisions`. A
    super-step is held only when every node it ran is one of these, so its records wait too
    (bot/engine/running.py), and a crash before the next checkpoint runs it again with nothing
    of it on the timeline."""
    nodes = plan_stages(loaded) if staged else per_step(loaded)
    return frozenset(
        node.name for node in nodes if followed_by_decisions(loaded, [s.id for s in node.steps])
    )


def per_step(loaded: LoadedRunbook) -> list[Stage]:
    """One node per step: the graph runs were checkpointed with before stages."""
    return [Stage(step.id, (step,)) for step in loaded.runbook.steps]


def grouped_step_ids(loaded: LoadedRunbook) -> frozenset[str]:
    """The steps that run inside a stage of several: no node of the staged graph bears
    their names."""
    return frozenset(s.id for stage in plan_stages(loaded) if len(stage.steps) > 1
                     for s in stage.steps)  # fmt: skip


def checkpointed_per_step(loaded: LoadedRunbook, versions_seen: Iterable[str]) -> bool:
    """Whether a checkpoint (its `versions_seen` node names) was written by the one node per
    step graph: some node it ran is a step that the staged graph runs inside a stage."""
    grouped = grouped_step_ids(loaded)
    return any(name in grouped for name in versions_seen)


def make_stage_node(members: Sequence[tuple[Step, NodeFn]]) -> NodeFn:
    """A node running `members` (steps of one depth) and returning their outputs merged."""
    if len(members) == 1:
        return members[0][1]
    kinds = [step.kind for step, _fn in members]
    concurrent = [i for i, kind in enumerate(kinds) if kind in CONCURRENT]
    clusters = [i for i, kind in enumerate(kinds) if kind is StepKind.CLUSTER]
    signals = [i for i, kind in enumerate(kinds) if kind is StepKind.SIGNAL]
    in_order = [i for i, kind in enumerate(kinds) if kind not in CONCURRENT]
    fns = [fn for _step, fn in members]

    def stage_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        if runtime.context.parallel_reads:
            pooled, here = concurrent[1:], [*concurrent[:1], *in_order]
        else:  # telemetry answers with this process's CPU: its reads one after another
            pooled, here = clusters, [*signals, *in_order]
        outputs = _run(fns, pooled=pooled, here=here, state=state, runtime=runtime)
        steps: dict[str, Any] = {}
        for i in range(len(fns)):  # step order: the order they are recorded in
            output = outputs[i]
            if isinstance(output, BaseException):
                raise output
            steps.update(output.get("steps", {}))
        return {"steps": steps}

    return stage_node


def _run(
    fns: Sequence[NodeFn],
    *,
    pooled: Sequence[int],
    here: Sequence[int],
    state: RunState,
    runtime: Runtime[Deps],
) -> dict[int, Mapping[str, Any] | BaseException]:
    """Each member's output or error by index: those `pooled` on the pool, meanwhile those
    `here` one after another in this thread."""
    futures: dict[int, Future[Mapping[str, Any] | BaseException]] = {
        i: _members.submit(contextvars.copy_context().run, _called, fns[i], state, runtime)
        for i in pooled
    }
    outputs = {i: _called(fns[i], state, runtime) for i in here}
    outputs.update((i, future.result()) for i, future in futures.items())
    return outputs


def _called(
    fn: NodeFn, state: RunState, runtime: Runtime[Deps]
) -> Mapping[str, Any] | BaseException:
    try:
        return fn(state, runtime)
    except Exception as exc:  # noqa: BLE001 (the stage raises it once the others are done)
        return exc
