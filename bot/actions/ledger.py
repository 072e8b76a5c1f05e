"""The action ledger over the database: idempotency keys are unique in `actions`, so the
claim is decided by the database, never by an in-memory cache (DESIGN §8). With a
`SafetyGuard`, every claim first passes the safety limits in the same transaction."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.actions.executing import Claim
from bot.actions.guarding import SafetyGuard
from storage import actions as action_store
from storage.db import read_scope, session_scope

#: How long a claimed action may run before another worker may take it over.
ACTION_LEASE = timedelta(minutes=10)


class SqlActionLedger:
    def __init__(self, db: Engine, *, guard: SafetyGuard | None = None) -> None:
        self._db = db
        self._guard = guard

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
        check: action_store.Check | None = None
        guard = self._guard
        if guard is not None and guard.guards(action):
            observed = guard.observe(action=action, target=target, target_kind=target_kind)
            if observed.counts:  # the nodes in flight read now, not under the limits lock
                with read_scope(self._db) as session:
                    flying = guard.in_flight(session, observed=observed, key=key, at=at)
                observed = guard.read_in_flight(observed, flying)

            def check(session: Session) -> dict[str, Any] | None:
                return guard.check(
                    session, observed=observed, action=action, target=target, key=key, at=at
                )

        with session_scope(self._db) as session:
            row, claimed = action_store.claim_action(
                session,
                key=key,
                run_id=run_id,
                step_id=step_id,
                action=action,
                target=target,
                params=params,
                at=at,
                lease=ACTION_LEASE,
                check=check,
            )
            return Claim(claimed, row.status, dict(row.result or {}), row.run_id)

    def finish(self, *, key: str, status: str, result: Mapping[str, Any], at: datetime) -> None:
        with session_scope(self._db) as session:
            action_store.finish_action(
                session,
                key=key,
                status=status,
                at=at,
                result=result,
                outcome=str(result.get("outcome", status)),
            )
