"""Exactly-once execution of approved actions, each checked against the safety limits.

Each action is claimed under the idempotency key (run, step, action, target) before it runs.
The key is unique in the database, so a resumed run, a retried node or a second replica finds
the existing claim and reuses its recorded result instead of acting twice. The claim is also
the one place the safety limits are enforced (bot/actions/guarding.py): an action they block
is recorded `blocked` with the reason and never runs; that is a result, not a failure.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from bot.actions.types import ActionContext, ActionResult, ActionSpec
from integrations.errors import IntegrationError

logger = logging.getLogger(__name__)

BLOCKED = "blocked"
"""The status and outcome of an action a safety limit stopped (bot/actions/limits.py)."""


@dataclass(frozen=True)
class Claim:
    claimed: bool
    status: str  # running | succeeded | failed | skipped | dry_run | blocked
    result: dict[str, Any]
    run_id: str = ""
    """The run that claimed the key first ("" when the ledger does not say)."""


class ActionLedger(Protocol):
    """Durable record of action executions, unique by idempotency key."""

    def claim(
        self,
        *,
        key: str,
        run_id: str,
        step_id: str,
        action: str,
        target: str,
        params: Mapping[str, Any],
        at: datetime,
        target_kind: str = "node",
    ) -> Claim:
        """Claim the key, after the safety limits let the action through (else `blocked`).
        Raises IntegrationError when the cluster cannot be read for the limits."""
        ...

    def finish(self, *, key: str, status: str, result: Mapping[str, Any], at: datetime) -> None: ...


def idempotency_key(*, run_id: str, step_id: str, action: str, target: str) -> str:
    raw = f"{run_id}/{step_id}/{action}/{target}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def execute_once(
    spec: ActionSpec,
    ctx: ActionContext,
    *,
    ledger: ActionLedger,
    step_id: str,
    target: str,
    params: Mapping[str, Any],
    dry_run: bool,
) -> dict[str, Any]:
    """Run `spec` once for this key; a repeated call returns the first call's result."""
    now = ctx.clock.now()
    try:
        claim = ledger.claim(
            key=ctx.idempotency_key,
            run_id=ctx.run_id,
            step_id=step_id,
            action=spec.name,
            target=target,
            params=params,
            at=now,
            target_kind=spec.target_kind,
        )
    except IntegrationError as exc:  # nothing was claimed: a retry checks and claims again
        detail = f"{spec.name} {target} not run: cannot read the cluster for the limits: {exc}"
        return ActionResult("failed", detail).to_dict() | _about(spec, target)
    if claim.status == BLOCKED:
        return dict(claim.result) | _about(spec, target)
    if not claim.claimed:
        previous = dict(claim.result)
        previous["repeated"] = True
        previous.setdefault("outcome", claim.status)
        previous.setdefault("detail", f"{spec.name} {target}: already {claim.status}")
        earlier_run = claim.run_id != ctx.run_id  # not this run's own, re-run after a wait
        if spec.per_incident and claim.status == "succeeded" and earlier_run:
            first = previous["detail"]
            previous["outcome"] = "already_done"
            previous["detail"] = f"already done for {ctx.incident or 'this incident'}: {first}"
        return previous
    if dry_run:
        result = ActionResult("dry_run", f"dry run: would {spec.describe(target, params)}")
        status = "dry_run"
    else:
        try:
            result = spec.run(ctx, target, params)
        except IntegrationError as exc:
            result = ActionResult("failed", f"{spec.name} {target} failed: {exc}")
        skipped = ("skipped", "refused", "cancelled")  # refused/cancelled: nothing was done
        status = "failed" if result.outcome == "failed" else "succeeded"
        status = "skipped" if result.outcome in skipped else status
    payload = result.to_dict() | _about(spec, target)
    ledger.finish(key=ctx.idempotency_key, status=status, result=payload, at=ctx.clock.now())
    logger.info(
        "action %s on %s %s: %s",
        spec.name,
        target,
        status,
        result.detail,
        extra={"run_id": ctx.run_id, "step": step_id, "action": spec.name, "target": target},
    )
    return payload


def _about(spec: ActionSpec, target: str) -> dict[str, Any]:
    return {"action": spec.name, "target": target, "risk": spec.risk.value}
