"""Safety limits at the moment of acting: the arithmetic that says whether one action may run
now, and if not, which limit blocks it, with the numbers. Pure: what the cluster and the
database hold comes in as a `Situation` (built by `guarding.py` inside the claiming
transaction); nothing here reads or writes anything.

Names follow medik8s NodeHealthCheck (`maxUnhealthy`, `stormCooldownDuration`,
`pauseRequests`), extended to GPUs (`maxGPUsRemoved` per pool and per topology domain) and to a
rate limit and a circuit breaker. docs/safety.md explains each limit and how to read a block.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

REMOVES_CAPACITY = frozenset({"cordon", "drain", "taint", "reboot", "gpu_reset"})
"""Actions that take a node's GPUs out of service: the capacity limits, the circuit breaker
and the storm cooldown apply to these."""
EXEMPT = frozenset({"open_ticket", "silence"})
"""Actions that change nothing in the cluster (a ticket, an Alertmanager silence): no limit
applies to them, so a blocked cordon can still be followed by its ticket."""
MAX_NAMED_NODES = 10
"""Out-of-service nodes named in a blocked result (the count is always exact)."""


class BlockedBy(StrEnum):
    """The limit that blocked an action (the `blocked_by` of its result)."""

    PAUSE = "pauseRequests"
    PROTECTED = "protectedNode"
    BREAKER = "circuitBreaker"
    RATE = "maxActionsPerHour"
    MAX_UNHEALTHY = "maxUnhealthy"
    MAX_GPUS = "maxGPUsRemoved"
    COOLDOWN = "stormCooldownDuration"


@dataclass(frozen=True)
class SafetyLimits:
    """The limits, all on by default (settings `policy` and `safety`; docs/safety.md)."""

    max_unhealthy: str = "25%"
    max_gpus_removed: str = "25%"
    pool_label: str = "nvidia.com/gpu.product"
    domain_labels: tuple[str, ...] = (
        "gpu-oncall.io/rack",
        "gpu-oncall.io/leaf-switch",
        "nvidia.com/gpu.clique",
    )
    domain_max_gpus_removed: str = "50%"
    max_actions_per_hour: int = 20
    storm_cooldown: timedelta = timedelta(minutes=10)
    breaker_threshold: int = 10
    breaker_window: timedelta = timedelta(hours=1)
    protected_label: str = "gpu-oncall.io/protected"


class NodeLike(Protocol):
    """What the limits read of a node (the shape of `integrations.cluster.NodeInfo`)."""

    @property
    def name(self) -> str: ...
    @property
    def ready(self) -> bool: ...
    @property
    def unschedulable(self) -> bool: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def gpu_capacity(self) -> int: ...


class CountLike(Protocol):
    """A pool or domain counted (the shape of `integrations.cluster.NodeCount`)."""

    @property
    def nodes(self) -> int: ...
    @property
    def gpus(self) -> int: ...
    @property
    def down(self) -> Sequence[NodeLike]: ...


@dataclass(frozen=True)
class Pause:
    reason: str
    actor: str
    at: datetime


@dataclass(frozen=True)
class Breaker:
    """The breaker as the check sees it: open or not, and the nodes removed in its window."""

    open: bool = False
    tripped_at: datetime | None = None
    trip_detail: str = ""
    removed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Situation:
    """Everything one check reads: the target and the nodes being taken out (or, without
    `counts`, every member of the target's pool and domains), each scope counted, removals
    in flight, and the persisted safety state."""

    nodes: Sequence[NodeLike] = ()
    counts: Mapping[str, CountLike] = field(default_factory=dict)
    """Each scope of the target (`scopes_of`) counted; a scope not here is counted from
    `nodes` (the same numbers: a property test holds the two equal)."""
    in_flight: frozenset[str] = frozenset()
    pauses: tuple[Pause, ...] = ()
    breaker: Breaker = field(default_factory=Breaker)
    actions_last_hour: int = 0
    storms: tuple[tuple[str, datetime], ...] = ()
    """(scope, last time a capacity limit blocked a removal there)."""


@dataclass(frozen=True)
class Blocked:
    """Why an action may not run now. `trips_breaker`: this check opened the breaker;
    `storm_scope`: the pool or domain whose capacity limit blocked (its cooldown starts)."""

    blocked_by: BlockedBy
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)
    trips_breaker: bool = False
    storm_scope: str | None = None


def allowed(limit: str, total: int) -> int:
    """The count a limit allows out of `total`: `"4"` -> 4; `"25%"` of 16 -> 4, rounded up so
    a pool can always lose one node; `"100%"` (or more) -> all of them."""
    text = limit.strip()
    if text.endswith("%"):
        share = min(float(text[:-1]), 100.0)
        return math.ceil(total * share / 100)
    return int(text)


def evaluate(
    limits: SafetyLimits, *, action: str, target: str, situation: Situation, now: datetime
) -> Blocked | None:
    """The first limit that blocks `action` on `target` now, or None. Order: pause requests,
    the protected-node label, the circuit breaker, the hourly rate, the capacity limits (pool
    nodes, pool GPUs, each topology domain's GPUs), then a storm's cooldown."""
    if action in EXEMPT:
        return None
    by_name = {node.name: node for node in situation.nodes}
    node = by_name.get(target)
    blocked = _paused(situation) or (_protected(limits, node) if node else None)
    removal = action in REMOVES_CAPACITY
    if blocked is None and removal:
        blocked = _breaker(limits, target, situation)
    if blocked is None and situation.actions_last_hour >= limits.max_actions_per_hour:
        count, most = situation.actions_last_hour, limits.max_actions_per_hour
        blocked = Blocked(
            BlockedBy.RATE,
            f"{count} actions in the last hour (limit {most} per hour)",
            {"actions": count, "limit": most},
        )
    out = node is None or _down(node) or target in situation.in_flight
    if blocked is None and removal and node is not None and not out:
        blocked = _capacity(limits, node, situation)
        blocked = blocked or _cooldown(limits, node, situation, now)
    return blocked


def scope_selectors(limits: SafetyLimits, node: NodeLike) -> list[dict[str, str | None]]:
    """The label selectors of the node's pool (None: the pool label is absent, the
    "(unlabelled)" pool) and of each topology domain it is in: the nodes a capacity check
    counts, read by label, never by listing the fleet."""
    pool: dict[str, str | None] = {limits.pool_label: node.labels.get(limits.pool_label)}
    domains: list[dict[str, str | None]] = [
        {label: node.labels[label]} for label in limits.domain_labels if label in node.labels
    ]
    return [pool, *domains]


def scopes_of(limits: SafetyLimits, node: NodeLike) -> list[str]:
    """The pool and topology domains a node belongs to, as storm scopes."""
    pool = f"pool {limits.pool_label}={_pool(limits, node)}"
    labels = [label for label in limits.domain_labels if label in node.labels]
    domains = [f"domain {label}={node.labels[label]}" for label in labels]
    return [pool, *domains]


def render_blocked(blocked: Blocked, *, action: str, target: str, breaker: str) -> str:
    """The one line a person reads: what would have been done, and why not."""
    return f"would {action} {target}; blocked: {blocked.reason} · {breaker}"


def describe_breaker(limits: SafetyLimits, breaker: Breaker) -> str:
    """`circuit breaker closed (3 of 10 node removals in the last 1h)`, or open since when."""
    if breaker.open:
        since = f" since {breaker.tripped_at:%Y-%m-%d %H:%M} UTC" if breaker.tripped_at else ""
        return f"circuit breaker OPEN{since} (an approver resets it: /gpu breaker reset)"
    return (
        f"circuit breaker closed ({len(breaker.removed)} of {limits.breaker_threshold} node "
        f"removals in the last {_span(limits.breaker_window)})"
    )


# -- the checks -----------------------------------------------------------------------------------


def _paused(situation: Situation) -> Blocked | None:
    if not situation.pauses:
        return None
    shown = "; ".join(f"{p.actor} at {p.at:%H:%M} UTC: {p.reason}" for p in situation.pauses)
    numbers = {"pauses": [{"actor": p.actor, "reason": p.reason} for p in situation.pauses]}
    return Blocked(BlockedBy.PAUSE, f"remediation paused by {shown} (/gpu resume)", numbers)


def _protected(limits: SafetyLimits, node: NodeLike) -> Blocked | None:
    if node.labels.get(limits.protected_label, "").lower() != "true":
        return None
    label = f"{limits.protected_label}=true"
    reason = f"{node.name} is protected (label {label})"
    return Blocked(BlockedBy.PROTECTED, reason, {"label": label})


def _breaker(limits: SafetyLimits, target: str, situation: Situation) -> Blocked | None:
    breaker = situation.breaker
    numbers = {
        "removals": len(breaker.removed),
        "threshold": limits.breaker_threshold,
        "window_seconds": limits.breaker_window.total_seconds(),
    }
    if breaker.open:
        why = f" ({breaker.trip_detail})" if breaker.trip_detail else ""
        return Blocked(BlockedBy.BREAKER, f"the circuit breaker is open{why}", numbers)
    if target in breaker.removed or len(breaker.removed) < limits.breaker_threshold:
        return None
    reason = (
        f"circuit breaker tripped: {len(breaker.removed)} nodes cordoned or drained in the last "
        f"{_span(limits.breaker_window)} (threshold {limits.breaker_threshold})"
    )
    return Blocked(BlockedBy.BREAKER, reason, numbers, trips_breaker=True)


def _down(node: NodeLike) -> bool:
    """Out of service in the cluster: cordoned or NotReady."""
    return node.unschedulable or not node.ready


@dataclass(frozen=True)
class _Scope:
    """A pool or domain as the capacity limits read it: its nodes, its GPUs, and its members
    out of service (down in the cluster, or being taken out)."""

    kind: str
    label: str
    value: str
    nodes: int
    gpus: int
    out: tuple[NodeLike, ...]


def _scope(
    situation: Situation, kind: str, label: str, value: str, member: Callable[[NodeLike], bool]
) -> _Scope:
    """The scope from its count, or counted from the member list when it has none; the
    members being taken out are added from `situation.nodes` either way."""
    count = situation.counts.get(f"{kind} {label}={value}")
    if count is None:
        members = [n for n in situation.nodes if member(n)]
        nodes, gpus = len(members), sum(n.gpu_capacity for n in members)
        down = [n for n in members if _down(n)]
    else:
        nodes, gpus, down = count.nodes, count.gpus, list(count.down)
    named = {n.name for n in down}
    flying = [
        n
        for n in situation.nodes
        if n.name in situation.in_flight and n.name not in named and member(n)
    ]
    return _Scope(kind, label, value, nodes, gpus, (*down, *flying))


def _capacity(limits: SafetyLimits, node: NodeLike, situation: Situation) -> Blocked | None:
    pool = _pool(limits, node)
    scope = _scope(situation, "pool", limits.pool_label, pool, lambda n: _pool(limits, n) == pool)
    where = f"pool {pool}"
    down = sorted(n.name for n in scope.out)
    most = allowed(limits.max_unhealthy, scope.nodes)
    if len(down) + 1 > most:
        reason = (
            f"{len(down)} of {scope.nodes} nodes of {where} already out "
            f"(limit {limits.max_unhealthy} = {most} nodes)"
        )
        numbers = _numbers("pool", limits.pool_label, pool, len(down), scope.nodes, most, down)
        numbers |= {"limit": limits.max_unhealthy, "unit": "nodes"}
        storm = f"pool {limits.pool_label}={pool}"
        return Blocked(BlockedBy.MAX_UNHEALTHY, reason, numbers, storm_scope=storm)
    blocked = _gpus(limits.max_gpus_removed, scope, node)
    for label in limits.domain_labels:
        if blocked is not None or label not in node.labels:
            continue
        value = node.labels[label]
        domain = _scope(situation, "domain", label, value, _labelled(label, value))
        blocked = _gpus(limits.domain_max_gpus_removed, domain, node)
    return blocked


def _labelled(label: str, value: str) -> Callable[[NodeLike], bool]:
    return lambda n: n.labels.get(label) == value


def _gpus(limit: str, scope: _Scope, node: NodeLike) -> Blocked | None:
    """`maxGPUsRemoved` over a pool or a domain: GPUs, not nodes."""
    kind, label, value = scope.kind, scope.label, scope.value
    down = sorted(n.name for n in scope.out)
    gone = sum(n.gpu_capacity for n in scope.out)
    most = allowed(limit, scope.gpus)
    if gone + node.gpu_capacity <= most:
        return None
    where = f"pool {value}" if kind == "pool" else f"{label}={value}"
    reason = (
        f"{gone} of {scope.gpus} GPUs of {where} already out and {node.name} holds "
        f"{node.gpu_capacity} more (limit {limit} = {most} GPUs)"
    )
    numbers = _numbers(kind, label, value, gone, scope.gpus, most, down)
    numbers |= {"limit": limit, "unit": "GPUs", "target_gpus": node.gpu_capacity}
    return Blocked(BlockedBy.MAX_GPUS, reason, numbers, storm_scope=f"{kind} {label}={value}")


def _cooldown(
    limits: SafetyLimits, node: NodeLike, situation: Situation, now: datetime
) -> Blocked | None:
    mine = set(scopes_of(limits, node))
    for scope, last in situation.storms:
        until = last + limits.storm_cooldown
        if scope in mine and now < until:
            reason = (
                f"{scope} hit a capacity limit at {last:%H:%M} UTC; no new removal there "
                f"until {until:%H:%M} UTC (stormCooldownDuration {_span(limits.storm_cooldown)})"
            )
            numbers = {
                "scope": scope,
                "last_blocked_at": last.isoformat(),
                "until": until.isoformat(),
            }
            return Blocked(BlockedBy.COOLDOWN, reason, numbers)
    return None


def _numbers(
    kind: str, label: str, value: str, out: int, total: int, most: int, down: Sequence[str]
) -> dict[str, Any]:
    return {
        "scope": kind,
        "label": label,
        "value": value,
        "out": out,
        "total": total,
        "allowed": most,
        "out_nodes": list(down[:MAX_NAMED_NODES]),
    }


def _pool(limits: SafetyLimits, node: NodeLike) -> str:
    return node.labels.get(limits.pool_label, "(unlabelled)")


def _span(delta: timedelta) -> str:
    """`1h`, `10m`, `90s`."""
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
