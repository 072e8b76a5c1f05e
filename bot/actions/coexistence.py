"""Coexistence with people and other remediators: what the node actions write and respect.

Pure: reads a `NodeInfo` and decides; the actions in `registry.py` do the I/O. The bot records
ownership when it cordons or taints (annotations naming the bot, the incident and the reason,
in the spirit of draino's `cordon-by`/`cordon-reason`), refuses to touch a node another party
holds (someone else's cordon, a medik8s remediation or maintenance in progress, the medik8s
opt-out label, our own protected-node label, a paused NodeHealthCheck selecting it), cancels
a queued action for a node a human uncordoned after the bot cordoned it, and uncordons only
nodes it cordoned itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from integrations.cluster import NodeInfo, RemediationPause

BOT = "gpu-oncall"

#: Taint keys other remediators put on a node while they work on it (kept in docs/operations.md):
#: medik8s Node Maintenance Operator (`medik8s.io/drain`), Self Node Remediation
#: (`medik8s.io/remediation`, `remediation.medik8s.io/self-node-remediation`), Fence Agents
#: Remediation (`remediation.medik8s.io/fence-agents-remediation`) and the out-of-service taint
#: a fencing remediator or an operator sets for non-graceful node shutdown.
FOREIGN_TAINTS = (
    "medik8s.io/drain",
    "medik8s.io/remediation",
    "remediation.medik8s.io/self-node-remediation",
    "remediation.medik8s.io/fence-agents-remediation",
    "node.kubernetes.io/out-of-service",
)

#: Node labels that switch remediation off, with the value that does it: medik8s's opt-out
#: (set by the Node Maintenance Operator during maintenance; NHC and SNR skip the node).
PAUSE_LABELS = {"remediation.medik8s.io/exclude-from-remediation": "true"}

#: Annotations other tools leave on nodes they cordoned (draino-style `cordon-by`), shown in
#: a refusal so the operator knows whom to ask.
FOREIGN_OWNER_SUFFIXES = ("/cordon-by", "/cordoned-by", "/drain-completed")


@dataclass(frozen=True)
class Markers:
    """The annotation keys the bot writes (under `prefix`) and the protected-node label."""

    prefix: str = "gpu-oncall.io"
    protected_label: str = "gpu-oncall.io/protected"

    @property
    def cordoned_by(self) -> str:
        return f"{self.prefix}/cordoned-by"

    @property
    def cordon_reason(self) -> str:
        return f"{self.prefix}/cordon-reason"

    @property
    def incident(self) -> str:
        return f"{self.prefix}/incident"

    @property
    def cordoned_at(self) -> str:
        """Written after the cordon succeeded: the proof the bot's cordon took effect."""
        return f"{self.prefix}/cordoned-at"

    @property
    def tainted_by(self) -> str:
        return f"{self.prefix}/tainted-by"

    def cordon_claim(self, *, incident: str, reason: str) -> dict[str, str | None]:
        """Written before cordoning (a crash after it leaves a claim, not a foreign cordon)."""
        return {self.cordoned_by: BOT, self.incident: incident, self.cordon_reason: reason}

    @property
    def taint_reason(self) -> str:
        return f"{self.prefix}/taint-reason"

    def taint_claim(self, *, incident: str, reason: str) -> dict[str, str | None]:
        return {self.tainted_by: BOT, self.incident: incident, self.taint_reason: reason}

    def cordon_done(self, *, at: datetime) -> dict[str, str | None]:
        return {self.cordoned_at: at.isoformat()}

    def released(self) -> dict[str, str | None]:
        """Removes the bot's cordon markers (after the bot uncordons)."""
        keys = (self.cordoned_by, self.cordon_reason, self.incident, self.cordoned_at)
        return dict.fromkeys(keys)

    def owns_cordon(self, node: NodeInfo) -> bool:
        return node.annotations.get(self.cordoned_by) == BOT


def refusal(node: NodeInfo, markers: Markers) -> str | None:
    """Why the bot must not cordon, drain or taint this node, or None. First match wins:
    the protected label, a remediation pause label, another remediator's taint, then a cordon
    that is not the bot's."""
    if node.labels.get(markers.protected_label, "").lower() == "true":
        return f"{node.name} is protected (label {markers.protected_label}=true)"
    for label, value in PAUSE_LABELS.items():
        if node.labels.get(label, "").lower() == value:
            return f"{node.name} is excluded from remediation (label {label}={value})"
    for taint in node.taints:
        key = taint.split(":", 1)[0].split("=", 1)[0]
        if key in FOREIGN_TAINTS:
            return f"{node.name} is being remediated by another controller (taint {taint})"
    if node.unschedulable and not markers.owns_cordon(node):
        return f"{node.name} was cordoned by someone else{_foreign_owner(node, markers)}"
    return None


def pause_refusal(node: NodeInfo, pauses: Sequence[RemediationPause]) -> str | None:
    """Why the bot must not cordon, drain or taint a node that a paused remediator selects
    (a medik8s NodeHealthCheck with `spec.pauseRequests`: whoever paused it wants the nodes
    left alone), naming each one and its pause requests; None when nothing is paused."""
    if not pauses:
        return None
    return f"{node.name} is under a paused remediator: " + "; ".join(p.describe() for p in pauses)


def human_override(node: NodeInfo, markers: Markers, *, incident: str) -> str | None:
    """Why a pending action for this incident is cancelled, or None: the bot cordoned the node
    for this incident (its `cordoned-at` marker), and the node is schedulable again, so a human
    uncordoned it. The bot never re-applies what a person undid."""
    ours = markers.owns_cordon(node) and node.annotations.get(markers.incident) == incident
    if ours and markers.cordoned_at in node.annotations and not node.unschedulable:
        return (
            f"{node.name} was uncordoned by someone else after {incident} cordoned it; "
            "the bot will not act on it again for this incident"
        )
    return None


def uncordon_refusal(node: NodeInfo, markers: Markers) -> str | None:
    """The bot uncordons only nodes it cordoned itself."""
    if node.unschedulable and not markers.owns_cordon(node):
        return f"{node.name} was not cordoned by gpu-oncall{_foreign_owner(node, markers)}"
    return None


def _foreign_owner(node: NodeInfo, markers: Markers) -> str:
    for key, value in sorted(node.annotations.items()):
        if key.startswith(markers.prefix + "/"):
            continue
        if key.endswith(FOREIGN_OWNER_SUFFIXES):
            return f" ({key}={value})"
    return ""
