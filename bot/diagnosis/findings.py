"""Findings: what a check concluded, with its evidence and its culprit.

Plain frozen dataclasses with lossless `to_dict`/`from_dict`, because findings travel through the
checkpointed graph state (JSON only) and into the timeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from bot.diagnosis.layers import Layer, Severity


class CheckStatus(StrEnum):
    FIRED = "fired"  # the condition held: a finding
    PASSED = "passed"  # the condition was evaluated on data and did not hold: ruled out
    UNKNOWN = "unknown"  # the data needed was missing: neither fired nor ruled out


@dataclass(frozen=True)
class Culprit:
    """Where the fault is: node, and when known the GPU index, HCA port, pod or workload; or a
    shared domain (a rack, a leaf switch, a driver version) when many nodes fail together."""

    node: str | None = None
    gpu: str | None = None
    hca: str | None = None
    pod: str | None = None
    workload: str | None = None
    uuid: str | None = None
    domain: str | None = None
    """The shared cause's value, e.g. `rack-03`; `domain_label` names what it is."""
    domain_label: str | None = None

    @property
    def name(self) -> str:
        """The culprit as reported in a verdict: the node, else the workload, else the domain."""
        return self.node or self.workload or self.pod or self.domain or ""

    def describe(self) -> str:
        if self.domain and not self.node:
            return f"{self.domain} ({self.domain_label})" if self.domain_label else self.domain
        parts = [self.node or self.workload or self.pod or "?"]
        if self.gpu not in (None, ""):
            parts.append(f"GPU {self.gpu}")
        if self.uuid:
            parts.append(self.uuid)
        if self.hca:
            parts.append(f"HCA {self.hca}")
        if self.pod and self.pod != parts[0]:
            parts.append(f"pod {self.pod}")
        return " / ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Culprit:
        return cls(**{k: (None if v is None else str(v)) for k, v in data.items()})


@dataclass(frozen=True)
class Evidence:
    """One observed value (or log line) that supports a finding: the culprit's own sample, and
    when the signal was read on peers too, their median next to it."""

    source: str  # step id
    what: str  # signal name or log signature
    value: float | str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    unit: str = ""
    """The signal's unit (runbooks/signals.yaml), for formatting (bot.diagnosis.units)."""
    peer_median: float | None = None
    """The median of the same signal over the other samples read (None: no peers read)."""
    peers: int = 0
    """How many other samples `peer_median` is taken over."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "what": self.what, "value": self.value}
        data["labels"] = dict(self.labels)
        if self.unit:
            data["unit"] = self.unit
        if self.peer_median is not None:
            data |= {"peer_median": self.peer_median, "peers": self.peers}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evidence:
        return cls(
            source=data["source"],
            what=data["what"],
            value=data.get("value"),
            labels=dict(data.get("labels", {})),
            unit=str(data.get("unit", "")),
            peer_median=data.get("peer_median"),
            peers=int(data.get("peers", 0)),
        )


@dataclass(frozen=True)
class Finding:
    check_id: str
    layer: Layer
    severity: Severity
    summary: str
    culprit: Culprit
    evidence: tuple[Evidence, ...] = ()
    affected: tuple[str, ...] = ()
    """Every node showing the symptom when the check looked across many (the culprit is the
    first); cross-node correlation reads it to find a shared rack, switch or driver."""
    outlier: bool | None = None
    """Whether the culprit's own reading stands out from its peers' (other nodes read by the
    same step: the job's nodes, the rack); None when no peer was read. A cordon needs True or
    None: a node that reads like its peers is not the one to take out (bot.diagnosis.gating).
    For a finding with `members`, True when any member stands out."""
    members: tuple[Culprit, ...] = ()
    """Each node's own device when the check names devices on many nodes at once (a storm's
    DBE on GPU 4 of eight nodes: eight culprits `node / GPU 4`); `culprit` is one of them.
    Empty when the finding names one culprit, or nodes only (`affected`)."""
    mechanism: str | None = None
    """How the fault produces symptoms (bot.diagnosis.mechanisms), from the check's
    `mechanism:`; decides whether the finding can explain the run's symptom."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "check_id": self.check_id,
            "layer": self.layer.value,
            "severity": self.severity.value,
            "summary": self.summary,
            "culprit": self.culprit.to_dict(),
            "evidence": [e.to_dict() for e in self.evidence],
        }
        data |= {"outlier": self.outlier} if self.outlier is not None else {}
        data |= {"members": [m.to_dict() for m in self.members]} if self.members else {}
        data |= {"mechanism": self.mechanism} if self.mechanism else {}
        return data | ({"affected": list(self.affected)} if self.affected else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            check_id=data["check_id"],
            layer=Layer(data["layer"]),
            severity=Severity(data["severity"]),
            summary=data["summary"],
            culprit=Culprit.from_dict(data.get("culprit", {})),
            evidence=tuple(Evidence.from_dict(e) for e in data.get("evidence", [])),
            affected=tuple(data.get("affected", [])),
            outlier=data.get("outlier"),
            members=tuple(Culprit.from_dict(m) for m in data.get("members", [])),
            mechanism=data.get("mechanism"),
        )


@dataclass(frozen=True)
class CheckOutcome:
    """The result of one check step, as localization sees it."""

    check_id: str
    layer: Layer
    status: CheckStatus
    finding: Finding | None = None
    missing_signals: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "layer": self.layer.value,
            "status": self.status.value,
            "finding": self.finding.to_dict() if self.finding else None,
            "missing_signals": list(self.missing_signals),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckOutcome:
        finding = data.get("finding")
        return cls(
            check_id=data["check_id"],
            layer=Layer(data["layer"]),
            status=CheckStatus(data["status"]),
            finding=Finding.from_dict(finding) if finding else None,
            missing_signals=tuple(data.get("missing_signals", [])),
        )
