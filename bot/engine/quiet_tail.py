"""A run whose verdict found no fault ends in its verdict's node (issue 21).

After a verdict of no fault every remediation step is known to do nothing: the proposal has no
action (the target is healthy), the approval is not needed, the action is skipped, the
verification is skipped. Most triage runs end that way (a storm's members with one incident
each), and each of those steps was still a LangGraph task and super-step of its own (its
scheduling, its chunks, its checkpoint bookkeeping): four to five of a run's seven tasks.

So the node that reaches every verdict of the runbook, when each says no fault, runs the steps
after it in the same node (their own code, in the graph's order, each on the outputs before
it) and the graph ends there (`route`); when a verdict names a fault, nothing changes and the
graph goes on to the proposal. Every step's output, and the timeline, are what the steps as
their own nodes give; the records and the checkpoint of that last node already wait for the
run's finish (bot/engine/idle_steps.py), so what a crash may lose is unchanged.

A runbook gets this only when it cannot make a step act or wait (`plan_quiet_tail`): every
step after the verdicts' node is a proposal, approval, action or verification that depends on
that node, every proposal reads the verdicts (all of them are in the node), and an action has
an approval to wait for. As a second guard, the steps run one at a time and each must have done
nothing (`did_nothing`) before the next runs; otherwise (or if one raises, or would wait) their
outputs are dropped and the graph runs them as nodes, as before, where an error is reported as
it always was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.graph import END
from langgraph.runtime import Runtime

from bot.engine.idle_steps import NO_FAULT, did_nothing
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step, StepKind
from bot.engine.state import Deps, RunState
from bot.engine.steps.gather import NodeFn

REMEDIATION = frozenset({StepKind.PROPOSE, StepKind.APPROVE, StepKind.ACT, StepKind.VERIFY})


@dataclass(frozen=True)
class QuietTail:
    """The steps after the node that reaches every verdict (`node`), for that node to run
    when each verdict says no fault, and the nodes the graph goes to otherwise (`then`)."""

    node: str
    verdicts: tuple[str, ...]
    members: tuple[tuple[Step, NodeFn], ...]
    then: tuple[str, ...]

    def run(
        self, state: RunState, done: Mapping[str, Any], runtime: Runtime[Deps]
    ) -> dict[str, Any]:
        """The tail's outputs after the node's own (`done`), or none: a verdict names a fault,
        or a step did something (which `plan_quiet_tail` rules out)."""
        if any(done.get(v, {}).get("layer") != NO_FAULT for v in self.verdicts):
            return {}
        outputs: dict[str, Any] = {}
        for step, fn in self.members:
            seen: RunState = {**state, "steps": {**state.get("steps", {}), **done, **outputs}}
            try:
                out = fn(seen, runtime).get("steps", {})
            except Exception:  # noqa: BLE001 (its own node runs it again and reports it)
                return {}
            if not all(did_nothing(step.kind, value) for value in out.values()):
                return {}
            outputs.update(out)
        return outputs

    def route(self, state: RunState) -> str | list[str]:
        """Where the graph goes after `node`: its end when the tail ran in it, else on."""
        steps = state.get("steps", {})
        if all(step.id in steps for step, _fn in self.members):
            return END
        return list(self.then)


def plan_quiet_tail(
    loaded: LoadedRunbook, holding: Mapping[str, Sequence[Step]]
) -> tuple[str, list[str]] | None:
    """The node that reaches every verdict and the ids of the steps after it (in the
    runbook's order, which the depths keep), if the runbook's graph lets those run in it:
    `holding` is each node's steps. None when a step could act or wait there."""
    kinds = loaded.kinds
    verdicts = {sid for sid, kind in kinds.items() if kind is StepKind.LOCALIZE}
    owners = [name for name, steps in holding.items() if verdicts & {s.id for s in steps}]
    if not verdicts or len(owners) != 1 or len(holding[owners[0]]) < 2:
        return None  # none, spread over nodes, or a lone verdict's own function
    node = owners[0]
    own = {s.id for s in holding[node]}
    if not verdicts <= own:
        return None
    after = _descendants(loaded, own)
    if not after or any(kinds[sid] not in REMEDIATION for sid in after):
        return None
    if set(kinds) != after | own | _ancestors(loaded, own):
        return None  # a step that runs beside the node, not after it
    has_approval = StepKind.APPROVE in kinds.values()
    if any(kinds[sid] is StepKind.ACT for sid in after) and not has_approval:
        return None  # an action with no approval would run the (empty) plan
    order = [s.id for s in sorted(loaded.runbook.steps, key=lambda s: loaded.depths[s.id])]
    return node, [sid for sid in order if sid in after]


def _descendants(loaded: LoadedRunbook, roots: set[str]) -> set[str]:
    """The steps that wait, directly or not, for one of `roots` (one pass: a runbook's steps
    come after their dependencies, checked at load)."""
    found: set[str] = set()
    for step in loaded.runbook.steps:
        if step.id not in roots and loaded.deps[step.id] & (roots | found):
            found.add(step.id)
    return found


def _ancestors(loaded: LoadedRunbook, roots: set[str]) -> set[str]:
    """The steps one of `roots` waits for, directly or not (one pass, last step first)."""
    found: set[str] = set()
    for step in reversed(loaded.runbook.steps):
        if step.id in roots or step.id in found:
            found.update(loaded.deps[step.id])
    return found - roots
