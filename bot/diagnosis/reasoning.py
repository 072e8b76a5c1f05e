"""Which findings may be the verdict for a symptom, and which are side findings. Pure: no I/O.

An expert on call first asks "what could have done *this*?": an NCCL hang needs something that
stops a rank or its traffic; a power cap on another node only slows one (DOMAIN §6), and a
silent dcgm-exporter hides facts without causing any (§8 telemetry). So:

1. Findings whose mechanism can produce the symptom (bot.diagnosis.mechanisms) compete for the
   verdict, ranked bottom-up as before (bot.diagnosis.localizing).
2. When none does, a silent or frozen detector becomes the verdict: the cause may sit behind
   it, and nothing seen explains the symptom ("cannot see" beats a wrong culprit).
3. When neither, every finding competes again (nothing found explains the symptom; the
   verdict says so and its confidence is halved).

Everything not in the verdict's pool is a *side finding*, shown as "also seen: power cap on
gpu-node-09 (slows its rank, cannot stop collectives)" with its own, separate proposals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.diagnosis.findings import Finding
from bot.diagnosis.layers import Layer
from bot.diagnosis.mechanisms import Role, Symptom, explains, is_detector, mechanism, why_not

#: Confidence kept when no finding can explain the symptom (rule 3).
UNEXPLAINED_FACTOR = 0.5


@dataclass(frozen=True)
class SideFinding:
    """A finding reported beside the verdict: it cannot explain the run's symptom."""

    check_id: str
    layer: str
    mechanism: str | None
    summary: str
    nodes: tuple[str, ...]
    why: str

    def describe(self) -> str:
        where = ", ".join(self.nodes[:3]) + (" ..." if len(self.nodes) > 3 else "")
        name = (self.mechanism or self.check_id).replace("_", " ")
        return f"{name} on {where or 'the target'} ({self.why})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "layer": self.layer,
            "mechanism": self.mechanism,
            "summary": self.summary,
            "nodes": list(self.nodes),
            "why": self.why,
            "text": self.describe(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SideFinding:
        return cls(
            check_id=str(data["check_id"]),
            layer=str(data["layer"]),
            mechanism=data.get("mechanism"),
            summary=str(data.get("summary", "")),
            nodes=tuple(data.get("nodes", [])),
            why=str(data.get("why", "")),
        )


@dataclass(frozen=True)
class Sorted:
    """The findings that compete for the verdict, the side findings, and whether any
    competing finding actually explains the symptom."""

    pool: tuple[Finding, ...]
    side: tuple[SideFinding, ...]
    explained: bool


def sort_out(findings: Sequence[Finding], symptom: Symptom | None) -> Sorted:
    """Split fired findings into the verdict's pool and side findings (module docstring)."""
    if symptom is None:
        return Sorted(pool=tuple(findings), side=(), explained=True)
    causes = [f for f in findings if _causes(f, symptom)]
    restated = [f for f in findings if _restates(f, symptom)]
    detectors = [f for f in findings if _watches(f)]
    if causes:
        pool, explained = [*causes, *restated], True
    elif detectors:
        pool, explained = [*detectors, *restated], True
    else:
        explained = all(_restates(f, symptom) for f in findings)
        return Sorted(pool=tuple(findings), side=(), explained=explained)
    chosen = {id(f) for f in pool}
    side = tuple(_side(f, symptom) for f in findings if id(f) not in chosen)
    return Sorted(pool=tuple(pool), side=side, explained=explained)


def _watches(finding: Finding) -> bool:
    """A finding about a detector: its mechanism says so, or, with none named, its layer is
    telemetry (the engine's own probes: a backend down, an exporter whose values froze)."""
    if finding.mechanism is None:
        return finding.layer is Layer.TELEMETRY
    return is_detector(finding.mechanism)


def _causes(finding: Finding, symptom: Symptom) -> bool:
    found = mechanism(finding.mechanism)
    if found is None:
        return not _watches(finding)  # no mechanism named: the plain ranking decides
    return found.role is Role.CAUSE and explains(finding.mechanism, symptom)


def _restates(finding: Finding, symptom: Symptom) -> bool:
    found = mechanism(finding.mechanism)
    return found is not None and found.role is Role.SYMPTOM


def _side(finding: Finding, symptom: Symptom) -> SideFinding:
    nodes = finding.affected or ((finding.culprit.node,) if finding.culprit.node else ())
    return SideFinding(
        check_id=finding.check_id,
        layer=finding.layer.value,
        mechanism=finding.mechanism,
        summary=finding.summary,
        nodes=tuple(nodes),
        why=why_not(finding.mechanism, symptom),
    )
