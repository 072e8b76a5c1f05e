"""Steps whose records and checkpoint may wait for the run's end: remediation steps that did
nothing (a proposal of no action, an approval not needed, an act skipped, a verification
skipped), and a verdict of no fault with the reads and checks of its super-step.

After a verdict of "no fault" (most of a storm's members when each opens its own incident) the
run has nothing left to do: every remediation step after it reads, changes and asks nothing.
Their super-steps' records, and the verdict's, are written in one transaction with the run's
finish (bot/engine/running.py), and their checkpoints wait in the saver for the run's last one
(`quiet_task`, storage/checkpointer_savers.py): one commit of each instead of one per
super-step (issue 21). A crash in between loses nothing that cannot be done again: the run goes
on from the checkpoint before them, reading and deciding the same again.

Only an output that says so counts: a verdict that names a fault, a proposal with actions, an
approval asked of a person or decided, an act that ran anything, or a verification that read
telemetry is recorded and checkpointed when its super-step ends, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bot.diagnosis.layers import Layer
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import StepKind
from storage.checkpointer_savers import QuietTask

STEPS_CHANNEL = "steps"
"""The state key every step writes its output under (bot/engine/steps/common.output)."""
NO_FAULT = Layer.NONE.value
"""A verdict's layer when it found no fault (bot/diagnosis/localizing.py)."""
_EDGES = ("branch:", "join:")
"""LangGraph's channels for the graph's edges: a node writes them to start the next ones."""
_BESIDE_A_VERDICT = frozenset(
    {StepKind.SIGNAL, StepKind.CLUSTER, StepKind.CHECK, StepKind.LOCALIZE}
)
"""What a verdict of no fault's super-step may hold besides steps that did nothing."""


def did_nothing(kind: StepKind | None, output: Mapping[str, Any]) -> bool:
    """Whether a remediation step of `kind` with `output` read, changed and asked nothing."""
    if kind is StepKind.PROPOSE:
        return not output.get("proposals")
    if kind is StepKind.APPROVE:
        return output.get("decision") == "not_needed"
    if kind is StepKind.ACT:
        return bool(output.get("skipped")) and not output.get("results")
    if kind is StepKind.VERIFY:
        return output.get("status") == "skipped"
    return False


def may_wait(loaded: LoadedRunbook, done: Iterable[tuple[str, Mapping[str, Any]]]) -> bool:
    """Whether the records of `done` (step id, output: one or more super-steps' steps) may wait
    for the run's end: there is a step, and each did nothing, or a verdict of no fault is among
    them and the others only read, checked or did nothing."""
    return _may_wait(loaded.kinds, list(done))


def quiet_task(loaded: LoadedRunbook) -> QuietTask:
    """The saver's rule for `loaded`'s runs: a task's checkpoint may wait when its step outputs
    `may_wait` and it wrote nothing else but the edges to the next nodes (never an interrupt,
    an error or a task that ran no node of the graph)."""
    kinds = loaded.kinds

    def quiet(node: str | None, writes: Sequence[tuple[str, Any]]) -> bool:
        if node is None:
            return False
        outputs: list[tuple[str, Mapping[str, Any]]] = []
        for channel, value in writes:
            if channel == STEPS_CHANNEL and isinstance(value, Mapping):
                outputs += [(k, v) for k, v in value.items() if isinstance(v, Mapping)]
            elif not channel.startswith(_EDGES):
                return False
        return _may_wait(kinds, outputs)

    return quiet


def _may_wait(kinds: Mapping[str, StepKind], done: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
    if not done:
        return False
    verdicts = [o for step_id, o in done if kinds.get(step_id) is StepKind.LOCALIZE]
    if verdicts:
        if any(v.get("layer") != NO_FAULT for v in verdicts):
            return False
        return all(
            kinds.get(step_id) in _BESIDE_A_VERDICT
            or did_nothing(kinds.get(step_id), output)
            for step_id, output in done
        )
    return all(did_nothing(kinds.get(step_id), output) for step_id, output in done)
