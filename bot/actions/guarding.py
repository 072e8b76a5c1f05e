"""The one enforcement point of the safety limits: every action, whoever approved it (a person,
the auto-approve policy, or nobody again because its run was resumed after a crash), is checked
here immediately before it runs, inside the database transaction that claims it.

`observe` reads the cluster before that transaction opens (a slow API server never holds the
database lock); `check` then reads the persisted safety state under the limits lock
(storage/safety.py), counts removals claimed or finished since the cluster was read as out of
service, asks `limits.evaluate`, and records what a block starts (a tripped breaker, a storm
cooldown). A blocked action becomes a result: `blocked_by`, the numbers, and one line to read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session

from bot.actions.limits import (
    EXEMPT,
    REMOVES_CAPACITY,
    Blocked,
    BlockedBy,
    Breaker,
    Pause,
    SafetyLimits,
    Situation,
    describe_breaker,
    evaluate,
    render_blocked,
    scope_selectors,
    scopes_of,
)
from bot.clock import Clock
from integrations.cluster import Cluster, NodeCount, NodeInfo
from integrations.errors import InvalidName, NodeNotFound
from storage import safety as store

CLOCK_SKEW = timedelta(minutes=1)
"""Removals finished this long before the cluster was read still count as in flight: another
replica's clock may lag this one's."""


@dataclass(frozen=True)
class Observation:
    """The cluster as `observe` read it, and when."""

    nodes: Sequence[NodeInfo]
    at: datetime
    counts: Mapping[str, NodeCount] = field(default_factory=dict)
    """The target's pool and topology domains counted (by `scopes_of` scope)."""


class SafetyGuard:
    """Checks one action against every limit; holds the limits, the cluster and the clock."""

    def __init__(self, *, limits: SafetyLimits, cluster: Cluster, clock: Clock) -> None:
        self.limits, self.cluster, self.clock = limits, cluster, clock

    def guards(self, action: str) -> bool:
        """Whether any limit applies to `action` (tickets and silences change nothing)."""
        return action not in EXEMPT

    def observe(self, *, action: str, target: str, target_kind: str) -> Observation:
        """Read the nodes the check needs: for a capacity removal the target by name, then its
        pool and each of its topology domains counted (`Cluster.count_nodes`: the node and
        GPU totals and the few members out of service, never the member list); the target
        alone for another node action; none for a workload action. An unknown target is left
        to the action itself."""
        at = self.clock.now()
        if target_kind != "node":
            return Observation((), at)
        try:
            found = self.cluster.nodes([target])
        except (NodeNotFound, InvalidName):
            return Observation((), at)
        if action not in REMOVES_CAPACITY:
            return Observation(found, at)
        node = found[0]
        scopes = zip(scopes_of(self.limits, node), scope_selectors(self.limits, node), strict=True)
        counts = {scope: self.cluster.count_nodes(selector) for scope, selector in scopes}
        return Observation(found, at, counts)

    def check(
        self,
        session: Session,
        *,
        observed: Observation,
        action: str,
        target: str,
        key: str,
        at: datetime,
    ) -> dict[str, Any] | None:
        """The blocked result of `action` on `target`, or None when it may run. Call inside
        the claiming transaction, after `storage.safety.lock_limits`."""
        situation = self.situation(session, observed=observed, target=target, key=key, at=at)
        blocked = evaluate(self.limits, action=action, target=target, situation=situation, now=at)
        if blocked is None:
            return None
        breaker = situation.breaker
        if blocked.trips_breaker:
            row = store.trip_breaker(session, at=at, detail=blocked.reason)
            breaker = Breaker(True, row.tripped_at, row.trip_detail or "", breaker.removed)
        if blocked.storm_scope is not None:
            store.record_storm(session, scope=blocked.storm_scope, at=at, detail=blocked.reason)
        return blocked_result(self.limits, blocked, action=action, target=target, breaker=breaker)

    def situation(
        self, session: Session, *, observed: Observation, target: str, key: str, at: datetime
    ) -> Situation:
        """What the limits read, from the database (under the lock) and the observation."""
        limits = self.limits
        row = store.read_breaker(session)
        since = at - limits.breaker_window
        if row.reset_at is not None and row.reset_at > since:
            since = row.reset_at
        removals = sorted(REMOVES_CAPACITY)
        removed = store.removed_targets_since(
            session, since=since, actions=removals, exclude_key=key
        )
        in_flight = self.in_flight(session, observed=observed, key=key, at=at)
        node = next((n for n in observed.nodes if n.name == target), None)
        storms = store.storms_in(session, scopes_of(limits, node)) if node else []
        nodes = list(observed.nodes)
        if observed.counts:
            nodes += self._named(in_flight - {n.name for n in nodes})
        return Situation(
            nodes=nodes,
            counts=observed.counts,
            in_flight=frozenset(in_flight),
            pauses=tuple(
                Pause(p.reason, p.requested_by, p.requested_at)
                for p in store.active_pauses(session)
            ),
            breaker=Breaker(
                row.state == "open", row.tripped_at, row.trip_detail or "", frozenset(removed)
            ),
            actions_last_hour=store.count_actions_since(
                session, since=at - timedelta(hours=1), exempt=sorted(EXEMPT), exclude_key=key
            ),
            storms=tuple((s.scope, s.last_blocked_at) for s in storms),
        )

    def in_flight(
        self, session: Session, *, observed: Observation, key: str, at: datetime
    ) -> set[str]:
        """The nodes other capacity removals are taking out (`store.in_flight_targets`)."""
        return store.in_flight_targets(
            session,
            actions=sorted(REMOVES_CAPACITY),
            at=at,
            finished_since=observed.at - CLOCK_SKEW,
            exclude_key=key,
        )

    def read_in_flight(self, observed: Observation, names: Collection[str]) -> Observation:
        """`observed` with the nodes in flight read by name, before the limits lock is taken
        (the caller read `names` with `in_flight` in a read transaction): under the lock only
        a removal claimed in between is still read. A name that is not in flight at the lock
        changes nothing (the limits count only members in `Situation.in_flight`)."""
        if not observed.counts:
            return observed
        known = {n.name for n in observed.nodes}
        return replace(observed, nodes=(*observed.nodes, *self._named(set(names) - known)))

    def _named(self, names: Collection[str]) -> list[NodeInfo]:
        """The nodes being taken out, each by name (their pool and domains and GPUs: which
        scope each counts against); one that is gone is left out, as a listing leaves it.
        Read before the limits lock (`read_in_flight`), and under it only for a removal
        claimed in between: the removals in flight are a handful (the hourly rate caps them),
        never a pool."""
        found = []
        for name in sorted(names):
            try:
                found += self.cluster.nodes([name])
            except (NodeNotFound, InvalidName):
                continue
        return found


def blocked_result(
    limits: SafetyLimits, blocked: Blocked, *, action: str, target: str, breaker: Breaker
) -> dict[str, Any]:
    """The result recorded on a blocked action (docs/safety.md, "Reading a blocked action")."""
    state = describe_breaker(limits, breaker)
    return {
        "outcome": "blocked",
        "detail": render_blocked(blocked, action=action, target=target, breaker=state),
        "blocked_by": blocked.blocked_by.value,
        "data": {
            "blocked_by": blocked.blocked_by.value,
            "reason": blocked.reason,
            **blocked.numbers,
            "breaker": {
                "state": "open" if breaker.open else "closed",
                "removals": len(breaker.removed),
                "threshold": limits.breaker_threshold,
                "window_seconds": limits.breaker_window.total_seconds(),
            },
        },
        "action": action,
        "target": target,
    }


__all__ = ["BlockedBy", "Observation", "SafetyGuard", "blocked_result"]
