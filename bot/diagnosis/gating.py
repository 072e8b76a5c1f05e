"""Which proposed actions the verdict does not justify, and why. Pure: no I/O.

Three rules, all about taking hardware out of service on evidence that cannot carry it:
- **A broken detector is not a broken GPU.** When the verdict is `telemetry` (an exporter down,
  a gauge that stopped changing), nothing that takes hardware out of service or resets it is
  proposed: the fix is the detector (restart the exporter, open a ticket).
- **A side finding takes no node out.** A node named only by findings that cannot explain the
  run's symptom (a power cap beside an NCCL hang) gets its own ticket, never a cordon or drain.
- **A cordon needs an outlier.** A node is cordoned (or drained) only when its own reading stands
  out from its peers' (the other nodes the same step read: the job's nodes, the rack). A node
  that reads like its peers points at a shared cause (a rack's power, a driver rollout) that
  taking one node out would not fix. Findings that could not be compared (no peers read, or a
  log line) do not block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.diagnosis.layers import Layer
from bot.diagnosis.localizing import Verdict

#: Actions that take a node out of service and so need an outlier culprit.
NODE_REMOVING = frozenset({"cordon", "drain"})
#: Actions on the hardware itself: never justified by a broken detector alone.
HARDWARE_ACTIONS = NODE_REMOVING | {"taint", "gpu_reset", "reboot"}


@dataclass(frozen=True)
class Withheld:
    """A proposal left out, with the reason shown next to the verdict."""

    action: str
    target: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "target": self.target, "reason": self.reason}


def withhold_reason(verdict: Verdict, *, action: str, target: str) -> str | None:
    """Why `action` on `target` is not justified by `verdict`, or None when it is."""
    if action in HARDWARE_ACTIONS and verdict.layer is Layer.TELEMETRY:
        return (
            "the verdict is a broken detector (telemetry), not broken hardware: "
            "fix the detector before acting on the GPU"
        )
    if action not in NODE_REMOVING:
        return None
    culprit_nodes = {c.node for c in verdict.culprit_details if c.node}
    if target not in culprit_nodes and any(target in f.nodes for f in verdict.side):
        return (
            f"{target} is named only by a side finding, which cannot explain the "
            f"{verdict.symptom or 'symptom'}: its own ticket, not a cordon"
        )
    judged = [
        f.outlier
        for f in verdict.findings
        if f.layer is verdict.layer and target in (f.culprit.node, *f.affected)
    ]
    if judged and all(o is False for o in judged):
        return (
            f"{target} reads like its peers on every signal that named it: "
            "not an outlier, so the cause is likely shared (rack, job, rollout)"
        )
    return None


def gate(
    verdict: Verdict, proposals: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], list[Withheld]]:
    """Split proposals into those the verdict justifies and those withheld (with reasons)."""
    kept: list[Mapping[str, Any]] = []
    withheld: list[Withheld] = []
    for proposal in proposals:
        action, target = str(proposal["action"]), str(proposal["target"])
        reason = withhold_reason(verdict, action=action, target=target)
        if reason is None:
            kept.append(proposal)
        else:
            withheld.append(Withheld(action=action, target=target, reason=reason))
    return kept, withheld
