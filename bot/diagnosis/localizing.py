"""Localization: check outcomes -> a verdict (layer, confidence, culprits, ruled out, missing).

Layers are scored by the severity of their findings. The verdict is the *lowest* layer with
strong evidence (a critical finding, or warnings adding up), because a failure is cheapest to
localize where it originates and symptoms propagate upward (a bad IB link shows up as an NCCL
hang and an MFU drop; DESIGN §5). With no strong evidence anywhere the highest-scoring layer wins;
with no findings at all the target is healthy (`none`). A layer is *ruled out* only when every
check of it was evaluated on data and passed; a layer with a check that could not be evaluated
(its signals missing or stale) and no finding is *unknown*, and each unknown layer lowers the
confidence, so "no fault found" never hides a detector that said nothing. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import SEVERITY_WEIGHT, Layer, Severity, layer_rank
from bot.diagnosis.mechanisms import Symptom
from bot.diagnosis.reasoning import UNEXPLAINED_FACTOR, SideFinding, sort_out

#: A layer is "strong" when its findings weigh at least this much (one critical, or 2 warnings).
STRONG_EVIDENCE = 2.0
#: Each layer left unknown (its signals missing) takes this share off the confidence ...
UNKNOWN_LAYER_PENALTY = 0.1
#: ... down to at most this much in total.
MAX_UNKNOWN_PENALTY = 0.4


@dataclass(frozen=True)
class Verdict:
    layer: Layer
    confidence: float
    culprits: tuple[str, ...]
    culprit_details: tuple[Culprit, ...]
    findings: tuple[Finding, ...]
    ranked: tuple[tuple[Layer, float], ...]
    ruled_out: tuple[Layer, ...]
    missing_signals: tuple[str, ...]
    summary: str
    unknown: tuple[Layer, ...] = ()
    """Layers with no finding whose checks could not all be evaluated: neither the verdict
    nor ruled out."""
    detectors: tuple[str, ...] = ()
    """What is wrong with the detectors rather than the hardware (a gauge holding a value it
    stopped updating): reported apart from the verdict, never a reason to act on a GPU."""
    history: tuple[dict[str, Any], ...] = ()
    """Per culprit GPU, what its fault history says (bot.diagnosis.history.GpuRecord.to_dict:
    occurrences, resets, the ladder's rung and a sentence for people)."""
    mechanism: str | None = None
    """The deciding finding's mechanism (bot.diagnosis.mechanisms), None when it has none."""
    symptom: str | None = None
    """The symptom the run investigated (the localize step's `symptom`)."""
    side: tuple[SideFinding, ...] = ()
    """Findings that cannot explain the symptom ("also seen: power cap on gpu-node-09,
    cannot stop collectives"): reported beside the verdict, with their own proposals."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer.value,
            "confidence": round(self.confidence, 3),
            "culprits": list(self.culprits),
            "culprit_nodes": list(dict.fromkeys(c.node for c in self.culprit_details if c.node)),
            "culprit_details": [c.to_dict() for c in self.culprit_details],
            "findings": [f.to_dict() for f in self.findings],
            "ranked": [[layer.value, round(score, 3)] for layer, score in self.ranked],
            "ruled_out": [layer.value for layer in self.ruled_out],
            "missing_signals": list(self.missing_signals),
            "unknown_layers": [layer.value for layer in self.unknown],
            "detectors": list(self.detectors),
            "history": [dict(h) for h in self.history],
            "summary": self.summary,
            "mechanism": self.mechanism,
            "symptom": self.symptom,
            "side_findings": [f.to_dict() for f in self.side],
            "side_nodes": list(dict.fromkeys(n for f in self.side for n in f.nodes)),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            layer=Layer(data["layer"]),
            confidence=float(data["confidence"]),
            culprits=tuple(data.get("culprits", [])),
            culprit_details=tuple(Culprit.from_dict(c) for c in data.get("culprit_details", [])),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", [])),
            ranked=tuple((Layer(layer), float(score)) for layer, score in data.get("ranked", [])),
            ruled_out=tuple(Layer(layer) for layer in data.get("ruled_out", [])),
            missing_signals=tuple(data.get("missing_signals", [])),
            summary=data.get("summary", ""),
            unknown=tuple(Layer(layer) for layer in data.get("unknown_layers", [])),
            detectors=tuple(data.get("detectors", [])),
            history=tuple(dict(h) for h in data.get("history", [])),
            mechanism=data.get("mechanism"),
            symptom=data.get("symptom"),
            side=tuple(SideFinding.from_dict(f) for f in data.get("side_findings", [])),
        )


def localize(outcomes: Sequence[CheckOutcome], *, symptom: Symptom | None = None) -> Verdict:
    """Rank layers by the findings that can explain `symptom` and pick the verdict layer (see
    module docstring); the others become side findings."""
    fired = [o.finding for o in outcomes if o.status is CheckStatus.FIRED and o.finding]
    sorted_out = sort_out(fired, symptom)
    verdict = _rank(outcomes, sorted_out.pool)
    if symptom is None:
        return verdict
    summary, confidence = verdict.summary, verdict.confidence
    if not sorted_out.explained:
        summary = f"nothing found can produce a {symptom.value.replace('_', ' ')}; {summary}"
        confidence = max(0.05, confidence * UNEXPLAINED_FACTOR)
    if sorted_out.side:
        summary += f" (also seen: {'; '.join(f.describe() for f in sorted_out.side)})"
    side_layers = {f.layer for f in sorted_out.side}
    return replace(
        verdict,
        side=sorted_out.side,
        symptom=symptom.value,
        summary=summary,
        confidence=confidence,
        ruled_out=tuple(layer for layer in verdict.ruled_out if layer.value not in side_layers),
    )


def _rank(outcomes: Sequence[CheckOutcome], findings: Sequence[Finding]) -> Verdict:
    scores: dict[Layer, float] = {}
    for finding in findings:
        scores[finding.layer] = scores.get(finding.layer, 0.0) + SEVERITY_WEIGHT[finding.severity]
    missing = tuple(sorted({s for o in outcomes for s in o.missing_signals}))
    ruled_out = _ruled_out(outcomes, scores)
    unknown = _unknown(outcomes, scores)
    if not scores:
        return _healthy(outcomes, ruled_out, missing, unknown)

    ranked = tuple(sorted(scores.items(), key=lambda item: (-item[1], layer_rank(item[0]))))
    strong = [layer for layer, score in scores.items() if _is_strong(layer, score, findings)]
    top = min(strong, key=layer_rank) if strong else ranked[0][0]
    ranked = ((top, scores[top]), *[(layer, s) for layer, s in ranked if layer is not top])
    top_findings = sorted(
        (f for f in findings if f.layer is top),
        key=lambda f: -SEVERITY_WEIGHT[f.severity],
    )
    details = _unique_culprits(_culprit_findings(top_findings))
    culprits = tuple(dict.fromkeys(c.name for c in details if c.name))
    confidence = _confidence(scores, top, outcomes) * _unknown_factor(unknown)
    others = [f for f in findings if f.layer is not top]
    summary = _summary(top, details, top_findings)
    lead = _culprit_findings(top_findings)[0]
    return Verdict(
        layer=top,
        confidence=confidence,
        culprits=culprits,
        culprit_details=details,
        findings=(*top_findings, *others),
        ranked=ranked,
        ruled_out=ruled_out,
        missing_signals=missing,
        summary=summary,
        unknown=unknown,
        mechanism=lead.mechanism,
    )


def _culprit_findings(findings: Sequence[Finding]) -> list[Finding]:
    """The findings that name the culprits: info findings are context (the symptom that
    triggered the run, "MFU is low"), so they name culprits only when nothing stronger does."""
    causes = [f for f in findings if f.severity is not Severity.INFO]
    return causes or list(findings)


def _is_strong(layer: Layer, score: float, findings: Sequence[Finding]) -> bool:
    critical = any(f.layer is layer and f.severity is Severity.CRITICAL for f in findings)
    return critical or score >= STRONG_EVIDENCE


def _ruled_out(outcomes: Sequence[CheckOutcome], scores: dict[Layer, float]) -> tuple[Layer, ...]:
    """Layers whose every check was read and passed (one unknown check keeps a layer open)."""
    passed = {o.layer for o in outcomes if o.status is CheckStatus.PASSED}
    open_ = {o.layer for o in outcomes if o.status is CheckStatus.UNKNOWN}
    return tuple(sorted(passed - open_ - set(scores), key=layer_rank))


def _unknown(outcomes: Sequence[CheckOutcome], scores: dict[Layer, float]) -> tuple[Layer, ...]:
    """Layers with no finding and at least one check that could not be evaluated."""
    open_ = {o.layer for o in outcomes if o.status is CheckStatus.UNKNOWN}
    return tuple(sorted(open_ - set(scores), key=layer_rank))


def _unknown_factor(unknown: Sequence[Layer]) -> float:
    """How much of the confidence survives the layers nobody could look at."""
    return 1.0 - min(MAX_UNKNOWN_PENALTY, UNKNOWN_LAYER_PENALTY * len(unknown))


def _unique_culprits(findings: Sequence[Finding]) -> tuple[Culprit, ...]:
    seen: dict[tuple[str | None, ...], Culprit] = {}
    for finding in findings:
        others = (Culprit(node=n) for n in finding.affected if n != finding.culprit.node)
        for c in (finding.culprit, *finding.members, *others):
            key = (c.node, c.gpu, c.hca, c.pod, c.workload, c.domain)
            if c.name and key not in seen:
                seen[key] = c
    # A culprit that only names a node is subsumed by a more precise one on the same node.
    precise = {c.node for c in seen.values() if c.gpu or c.hca or c.pod}
    return tuple(c for c in seen.values() if c.gpu or c.hca or c.pod or c.node not in precise)


def _confidence(scores: dict[Layer, float], top: Layer, outcomes: Sequence[CheckOutcome]) -> float:
    total = sum(scores.values())
    share = scores[top] / total if total else 0.0
    evaluated = [o for o in outcomes if o.status is not CheckStatus.UNKNOWN]
    coverage = len(evaluated) / len(outcomes) if outcomes else 0.0
    strength = min(1.0, scores[top] / (STRONG_EVIDENCE * 1.5))
    value = share * (0.6 + 0.25 * coverage + 0.15 * strength)
    return max(0.05, min(0.99, value))


def _healthy(
    outcomes: Sequence[CheckOutcome],
    ruled_out: tuple[Layer, ...],
    missing: tuple[str, ...],
    unknown: tuple[Layer, ...],
) -> Verdict:
    evaluated = sum(1 for o in outcomes if o.status is CheckStatus.PASSED)
    confidence = evaluated / len(outcomes) if outcomes else 0.0
    summary = f"No fault found: {evaluated} of {len(outcomes)} checks passed"
    if unknown:
        summary += f"; not checked (signals missing): {', '.join(u.value for u in unknown)}"
    if missing:
        summary += f"; missing signals: {', '.join(missing)}"
    return Verdict(
        layer=Layer.NONE,
        confidence=max(0.05, min(0.99, confidence)),
        culprits=(),
        culprit_details=(),
        findings=(),
        ranked=(),
        ruled_out=ruled_out,
        missing_signals=missing,
        summary=summary,
        unknown=unknown,
    )


def _summary(top: Layer, culprits: Sequence[Culprit], findings: Sequence[Finding]) -> str:
    where = ", ".join(c.describe() for c in culprits) or "no specific culprit"
    lead = findings[0].summary if findings else ""
    return f"{top.value} fault at {where}" + (f": {lead}" if lead else "")
