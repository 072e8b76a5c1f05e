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
that graph (`checkpoint_shape`, below).

Fused stages: a stage whose records would wait anyway for the next super-step's
(`followed_by_decisions`: the next one is checks and verdicts alone, which end soon after they
start) runs with that super-step as one node, `stage-<first>-<last>` by depth: the reads, then
the checks, then the verdict, each level in order (issue 21). Nothing a person sees changes
(those records were already written together, with the verdict), nor what a crash loses (the
held super-steps' checkpoints were never on disk before the verdict's), but LangGraph's
super-step machinery (apply the writes, stream the chunks, plan the next tasks) runs once
instead of three times on every triage's critical path. A stage fuses only when that does not
make its reads wait for any node they did not wait for. A level that raises fails the node;
the outputs of the levels before it ride on the error (`steps_done_before`) and the failed
run's timeline shows them, as it showed a held super-step's. The graph a run goes on is one of
three shapes (`Shape`): new runs go on the fused one; a run checkpointed by another goes on as
it began (`checkpoint_shape`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from langgraph.runtime import Runtime

from bot.engine.loading import LoadedRunbook
from bot.engine.quiet_tail import QuietTail
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


class Shape(StrEnum):
    """The graph a run goes on: which steps share a LangGraph node."""

    FUSED = "fused"
    """Stages, and a stage whose records wait for the next super-step's fused with it."""
    STAGED = "staged"
    """One node per depth's reads and decisions (runs begun before fused stages)."""
    PER_STEP = "per_step"
    """One node per step (runs begun before stages)."""


@dataclass(frozen=True)
class Stage:
    """One node of the compiled graph: its name and the steps it runs (one, unless staged), by
    level: a fused stage's levels run one after another, each on the outputs of those before."""

    name: str
    levels: tuple[tuple[Step, ...], ...]

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(step for level in self.levels for step in level)


def plan_stages(loaded: LoadedRunbook) -> list[Stage]:
    """The graph's nodes, by depth then step order: the STAGED steps of each depth as one
    stage (named `stage-<depth>`, which no step id can be; a lone step keeps its own id),
    every other step as a node of its own."""
    depth = loaded.depths
    staged: dict[int, list[Step]] = {}
    for step in loaded.runbook.steps:
        if step.kind in STAGED:
            staged.setdefault(depth[step.id], []).append(step)
    nodes: list[Stage] = []
    placed: set[int] = set()
    for step in loaded.runbook.steps:
        level = depth[step.id]
        if step.kind not in STAGED:
            nodes.append(Stage(step.id, ((step,),)))
        elif level not in placed:
            placed.add(level)
            members = tuple(staged[level])
            name = members[0].id if len(members) == 1 else f"stage-{level}"
            nodes.append(Stage(name, (members,)))
    return sorted(nodes, key=lambda stage: depth[stage.steps[0].id])  # dependencies first


def plan_nodes(loaded: LoadedRunbook, shape: Shape) -> list[Stage]:
    """The graph's nodes for `shape`, dependencies first."""
    if shape is Shape.PER_STEP:
        return per_step(loaded)
    nodes = plan_stages(loaded)
    return nodes if shape is Shape.STAGED else fuse(loaded, nodes)


def fuse(loaded: LoadedRunbook, nodes: Sequence[Stage]) -> list[Stage]:
    """`nodes` (the staged plan) with each stage whose records wait for the next super-step's
    (`followed_by_decisions`) fused with the stage of that super-step, in a chain: reads, then
    checks, then the verdict. A fusion is made only if the fused node runs in the super-step
    the first stage ran in (its other dependencies are done by then), so no read starts later."""
    depth = loaded.depths
    fused: list[Stage] = []
    super_step: dict[str, int] = {}  # node name -> the super-step it runs in
    for node in nodes:
        previous = fused[-1] if fused else None
        if (
            previous is not None
            and _fusable(loaded, previous, node, depth)
            and _runs_in(loaded, [previous, node], fused[:-1], super_step)
            == super_step[previous.name]
        ):
            first, last = depth[previous.steps[0].id], depth[node.steps[0].id]
            merged = Stage(f"stage-{first}-{last}", previous.levels + node.levels)
            super_step[merged.name] = super_step.pop(previous.name)  # as just checked
            fused[-1] = merged
            continue
        super_step[node.name] = _runs_in(loaded, [node], fused, super_step)
        fused.append(node)
    return fused


def _fusable(loaded: LoadedRunbook, previous: Stage, node: Stage, depth: Mapping[str, int]) -> bool:
    """Whether `node` is the super-step after `previous`'s, and `previous`'s records wait for
    it: `previous` is reads or checks (`followed_by_decisions`) and `node` holds every step
    of the next depth (checks and verdicts alone)."""
    if not all(step.kind in STAGED for step in node.steps):
        return False
    if not followed_by_decisions(loaded, [s.id for s in previous.levels[-1]]):
        return False
    level = depth[previous.levels[-1][0].id] + 1
    following = {s.id for s in loaded.runbook.steps if depth[s.id] == level}
    return {s.id for s in node.steps} == following


def _runs_in(
    loaded: LoadedRunbook,
    members: Sequence[Stage],
    before: Sequence[Stage],
    super_step: Mapping[str, int],
) -> int:
    """The super-step a node of `members`' steps runs in, after `before`'s nodes: one after
    the last of its dependencies outside itself (a node waits for all of them)."""
    node_of = {step.id: node.name for node in before for step in node.steps}
    own = {step.id for node in members for step in node.steps}
    deps = {node_of[d] for node in members for s in node.steps for d in loaded.deps[s.id]
            if d not in own}  # fmt: skip
    return 1 + max((super_step[name] for name in deps), default=0)


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
    depth = loaded.depths
    level = max(depth[step_id] for step_id in ids)
    steps = loaded.runbook.steps
    if any(s.kind not in STAGED - {StepKind.LOCALIZE} for s in steps
           if s.id in ids and depth[s.id] == level):  # fmt: skip
        return False
    following = [s.kind for s in steps if depth[s.id] == level + 1]
    return bool(following) and all(kind in DECIDES_SOON for kind in following)


def held_nodes(loaded: LoadedRunbook, shape: Shape) -> frozenset[str]:
    """The nodes (of the graph of `shape`) whose super-step's checkpoint may wait for the next
    one: those whose steps `followed_by_decisions`, and those that only propose (the approval
    that follows is recorded with them). A super-step is held only when every node it ran is
    one of these, so its records wait too (bot/engine/running.py), and a crash before the next
    checkpoint runs it again with nothing of it on the timeline."""
    return frozenset(
        node.name
        for node in plan_nodes(loaded, shape)
        if followed_by_decisions(loaded, [s.id for s in node.steps])
        or all(s.kind is StepKind.PROPOSE for s in node.steps)
    )


def per_step(loaded: LoadedRunbook) -> list[Stage]:
    """One node per step: the graph runs were checkpointed with before stages."""
    return [Stage(step.id, ((step,),)) for step in loaded.runbook.steps]


def checkpoint_shape(loaded: LoadedRunbook, checkpoint: Mapping[str, Any]) -> Shape:
    """The graph that wrote a LangGraph `checkpoint`: the first shape, newest first, that has
    a node of every name the checkpoint knows (`checkpoint_names`). A checkpoint that knows no
    node yet goes on the fused graph."""
    known = checkpoint_names(checkpoint)
    for shape in Shape:
        if known <= {node.name for node in plan_nodes(loaded, shape)}:
            return shape
    return Shape.PER_STEP  # a step id of the runbook's other version: as before stages


def checkpoint_names(checkpoint: Mapping[str, Any]) -> set[str]:
    """The node names a checkpoint knows: the nodes it ran (`versions_seen`) and those its
    edge channels lead from and to (`branch:to:<node>`, `join:<node>+<node>:<node>`), so a
    run waiting for a node of its own graph is never resumed on a graph without it (node
    names hold neither ':' nor '+'). LangGraph's own names (`__start__`, ...) are left out."""
    names = {name for name in checkpoint.get("versions_seen", {}) if not name.startswith("__")}
    for channel in checkpoint.get("channel_versions", {}):
        if channel.startswith("branch:to:"):
            names.add(channel.removeprefix("branch:to:"))
        elif channel.startswith("join:"):
            sources, _, target = channel.removeprefix("join:").rpartition(":")
            names.update([*sources.split("+"), target])
    return {name for name in names if not name.startswith("__")}


_DONE = "gpu_oncall_steps_done"


def steps_done_before(exc: BaseException) -> Mapping[str, Any]:
    """The outputs of the levels a fused stage finished before `exc` failed it: those steps
    ran, and the failed run's timeline shows them (as it shows a held super-step's)."""
    done: Mapping[str, Any] = getattr(exc, "__dict__", {}).get(_DONE, {})
    return done


def make_stage_node(
    name: str, levels: Sequence[Sequence[tuple[Step, NodeFn]]], tail: QuietTail | None = None
) -> NodeFn:
    """The graph's node `name`, running `levels` of members one after another (each the steps
    of one depth, on the state with the outputs of the levels before) and returning their
    outputs merged: a `StageNode`, or a lone step's own function. `tail`: the steps it runs
    after its verdicts when they found no fault (bot/engine/quiet_tail.py)."""
    if len(levels) == 1 and len(levels[0]) == 1 and tail is None:
        return levels[0][0][1]
    return StageNode(name, [_Level(members) for members in levels], tail)


class StageNode:
    """A stage's node: its levels in order. The first level's reads may have been started
    before the graph ran (`start_reads`, bot/engine/reads_ahead.py); the node then waits for
    those instead of reading again."""

    def __init__(self, name: str, levels: Sequence[_Level], tail: QuietTail | None = None) -> None:
        self.name = name  # the graph's name for it: where its reads ahead are kept
        self.levels = list(levels)
        self.tail = tail

    def __call__(self, state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        ahead = runtime.context.reads_ahead.take(state.get("run_id", ""), self.name, state)
        steps: dict[str, Any] = {}
        for index, level in enumerate(self.levels):
            seen = state if not steps else {**state, "steps": {**state.get("steps", {}), **steps}}
            try:
                steps.update(level(seen, runtime, ahead if index == 0 else None))
            except Exception as exc:
                if steps:  # the levels before ran: the run's failure records them
                    with contextlib.suppress(AttributeError):  # an exception without a dict
                        exc.__dict__[_DONE] = dict(steps)
                raise
        if self.tail is not None:
            steps.update(self.tail.run(state, steps, runtime))
        return {"steps": steps}

    def start_reads(self, state: RunState, runtime: Runtime[Deps]) -> dict[int, Future[Any]]:
        """Start the first level's reads on the pool, for `__call__` to wait for."""
        return self.levels[0].start_reads(state, runtime)


class _Level:
    """The steps of one depth: their outputs merged, in step order."""

    def __init__(self, members: Sequence[tuple[Step, NodeFn]]) -> None:
        kinds = [step.kind for step, _fn in members]
        self.concurrent = [i for i, kind in enumerate(kinds) if kind in CONCURRENT]
        self.clusters = [i for i, kind in enumerate(kinds) if kind is StepKind.CLUSTER]
        self.signals = [i for i, kind in enumerate(kinds) if kind is StepKind.SIGNAL]
        self.in_order = [i for i, kind in enumerate(kinds) if kind not in CONCURRENT]
        self.fns = [fn for _step, fn in members]

    def start_reads(self, state: RunState, runtime: Runtime[Deps]) -> dict[int, Future[Any]]:
        return _submit(self.fns, self.concurrent, state, runtime)

    def __call__(
        self,
        state: RunState,
        runtime: Runtime[Deps],
        started: Mapping[int, Future[Any]] | None = None,
    ) -> dict[str, Any]:
        if started is not None:  # the reads run already: the decisions here, meanwhile
            pooled, here = [], self.in_order
        elif runtime.context.parallel_reads:
            pooled, here = self.concurrent[1:], [*self.concurrent[:1], *self.in_order]
        else:  # telemetry answers with this process's CPU: its reads one after another
            pooled, here = self.clusters, [*self.signals, *self.in_order]
        futures = {**(started or {}), **_submit(self.fns, pooled, state, runtime)}
        outputs = {i: _called(self.fns[i], state, runtime) for i in here}
        outputs.update((i, future.result()) for i, future in futures.items())
        steps: dict[str, Any] = {}
        for i in range(len(self.fns)):  # step order: the order they are recorded in
            output = outputs[i]
            if isinstance(output, BaseException):
                raise output
            steps.update(output.get("steps", {}))
        return steps


def _submit(
    fns: Sequence[NodeFn], pooled: Sequence[int], state: RunState, runtime: Runtime[Deps]
) -> dict[int, Future[Mapping[str, Any] | BaseException]]:
    """Members `pooled` started on the pool: each one's future output or error, by index."""
    return {
        i: _members.submit(contextvars.copy_context().run, _called, fns[i], state, runtime)
        for i in pooled
    }


def _called(
    fn: NodeFn, state: RunState, runtime: Runtime[Deps]
) -> Mapping[str, Any] | BaseException:
    try:
        return fn(state, runtime)
    except Exception as exc:  # noqa: BLE001 (the stage raises it once the others are done)
        return exc
