"""Reviewing proposals against the verdict before anyone is asked to approve them.

Two passes over the runbook's proposals: the GPU's fault history climbs the escalation ladder
(bot.diagnosis.history: a repeat fault adds drain and reset, a third one or a second failed
reset turns the reset into cordon + RMA ticket), then actions the evidence does not justify are
withheld with a reason (bot.diagnosis.gating). A withheld action is shown with its reason
instead of a button. Reads only JSON step outputs and the action registry; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.actions.types import ActionRegistry
from bot.diagnosis.gating import Withheld, gate
from bot.diagnosis.history import Rung
from bot.diagnosis.localizing import Verdict

#: What each rung adds, by action: (action, params).
_LADDER: dict[Rung, tuple[tuple[str, dict[str, Any]], ...]] = {
    Rung.RESET: (),
    Rung.DRAIN_RESET: (("drain", {}), ("gpu_reset", {})),
    Rung.RMA: (("cordon", {}), ("open_ticket", {"queue": "rma"})),
}


def review(
    steps: Mapping[str, Any],
    localizers: Sequence[str],
    proposals: list[dict[str, Any]],
    *,
    actions: ActionRegistry,
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The proposals after the ladder and the gate, and the withheld ones with reasons."""
    verdicts = [steps[sid] for sid in localizers if steps.get(sid, {}).get("kind") == "localize"]
    if not verdicts:
        return proposals, []
    verdict = Verdict.from_dict(verdicts[0])
    proposals, retired = escalate(verdict, proposals, actions=actions)
    if not proposals:
        return proposals, [w.to_dict() for w in retired]
    kept, withheld = gate(verdict, proposals)
    ids = {id(p) for p in kept}
    return [p for p in proposals if id(p) in ids], [w.to_dict() for w in (*retired, *withheld)]


def escalate(
    verdict: Verdict, proposals: list[dict[str, Any]], *, actions: ActionRegistry
) -> tuple[list[dict[str, Any]], list[Withheld]]:
    """Add what each culprit GPU's rung asks for; on the RMA rung, retire its resets."""
    out, retired = list(proposals), []
    for record in verdict.history:
        rung, node, gpu = Rung(record["rung"]), str(record["node"]), record.get("gpu")
        reason = f"GPU {gpu}: {record['text']} (escalation ladder: {rung.value})"
        if rung is Rung.RMA:
            for p in [p for p in out if p["action"] == "gpu_reset" and p["target"] == node]:
                out.remove(p)
                retired.append(Withheld("gpu_reset", node, f"{reason}: resets did not hold"))
        for action, params in _LADDER[rung]:
            wanted = params | ({"gpu": gpu} if action == "gpu_reset" and gpu else {})
            if action in actions and not _has(out, action, node, params):  # no duplicates
                out.append(_proposal(actions, action, node, wanted, reason))
    return out, retired


def _has(
    proposals: Sequence[Mapping[str, Any]], action: str, node: str, params: Mapping[str, Any]
) -> bool:
    return any(
        p["action"] == action
        and p["target"] == node
        and all(p.get("params", {}).get(k) == v for k, v in params.items())
        for p in proposals
    )


def _proposal(
    actions: ActionRegistry, action: str, node: str, params: dict[str, Any], reason: str
) -> dict[str, Any]:
    spec = actions.get(action)
    return {
        "action": action,
        "target": node,
        "params": params,
        "risk": spec.risk.value,
        "destructive": spec.destructive,
        "reason": reason,
        "description": spec.describe(node, params),
    }
