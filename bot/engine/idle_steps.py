"""Remediation steps that did nothing: a proposal of no action, an approval not needed, an act
skipped, a verification skipped.

After a verdict of "no fault" (most of a storm's members when each opens its own incident),
every remediation step of the run is one of these: it read nothing, changed nothing and asked no
one. Their super-steps' records wait for the run's end and are written in one transaction with
its finish (bot/engine/running.py), and their checkpoints wait in the saver for the run's last
one (`quiet_task`, storage/checkpointer_savers.py): one commit of each instead of one per
super-step (issue 21). A crash in between loses nothing that cannot be done again: the run goes
on from the verdict's checkpoint, and these steps decide the same again.

Only an output that says so counts: a proposal with actions, an approval asked of a person or
decided, an act that ran anything, or a verification that read telemetry is recorded and
checkpointed when its super-step ends, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bot.engine.loading import LoadedRunbook
from bot.engine.schema import StepKind
from storage.checkpointer_savers import QuietTask

STEPS_CHANNEL = "steps"
"""The state key every step writes its output under (bot/engine/steps/common.output)."""
_EDGES = ("branch:", "join:")
"""LangGraph's channels for the graph's edges: a node writes them to start the next ones."""


def did_nothing(kind: StepKind | None, output: Mapping[str, Any]) -> bool:
    """Whether a step of `kind` with `output` read, changed and asked nothing."""
    if kind is StepKind.PROPOSE:
        return not output.get("proposals")
    if kind is StepKind.APPROVE:
        return output.get("decision") == "not_needed"
    if kind is StepKind.ACT:
        return bool(output.get("skipped")) and not output.get("results")
    if kind is StepKind.VERIFY:
        return output.get("status") == "skipped"
    return False


def all_did_nothing(loaded: LoadedRunbook, done: Iterable[tuple[str, Mapping[str, Any]]]) -> bool:
    """Whether every (step id, output) of `done` did nothing, and there is one."""
    kinds = _kinds(loaded)
    found = False
    for step_id, output in done:
        if not did_nothing(kinds.get(step_id), output):
            return False
        found = True
    return found


def quiet_task(loaded: LoadedRunbook) -> QuietTask:
    """The saver's rule for `loaded`'s runs: a task is quiet when it wrote step outputs that all
    did nothing, and nothing else but the edges to the next nodes (never an interrupt, an error
    or a task that ran no node of the graph)."""
    kinds = _kinds(loaded)

    def quiet(node: str | None, writes: Sequence[tuple[str, Any]]) -> bool:
        if node is None:
            return False
        outputs = []
        for channel, value in writes:
            if channel == STEPS_CHANNEL and isinstance(value, Mapping) and value:
                outputs.append(value)
            elif not channel.startswith(_EDGES):
                return False
        return bool(outputs) and all(
            isinstance(output, Mapping) and did_nothing(kinds.get(step_id), output)
            for value in outputs
            for step_id, output in value.items()
        )

    return quiet


def _kinds(loaded: LoadedRunbook) -> dict[str, StepKind]:
    return {step.id: step.kind for step in loaded.runbook.steps}
