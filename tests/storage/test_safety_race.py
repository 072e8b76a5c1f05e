"""The execution-time limit check under concurrency and restarts, on SQLite and PostgreSQL.

Covers: two claimers (two engines: two replicas) racing to cordon the last node a pool may
lose, each having read the cluster before either claimed: exactly one claims, the other is
recorded `blocked` with the numbers counting the winner's claim in flight; the circuit breaker
trips at its threshold, blocks every later removal, stays open across a new engine (a restart)
and closes only by a reset, after which earlier removals no longer count; pause requests block
every action that changes the cluster and end with `resume`.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.actions.executing import Claim, idempotency_key
from bot.actions.guarding import SafetyGuard
from bot.actions.ledger import SqlActionLedger
from bot.actions.limits import SafetyLimits
from bot.clock import FakeClock
from integrations.cluster import NodeInfo
from simulator import SCENARIO_DIR, Fleet, SimCluster, load_scenario
from storage import actions as action_store
from storage import safety as safety_store
from storage.db import session_scope

POOL = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def fleet(clock: FakeClock) -> Fleet:
    """16 nodes of one pool (`nvidia.com/gpu.product`), 8 GPUs each, racks of 8."""
    return Fleet.from_scenario(load_scenario(SCENARIO_DIR / "ecc-dbe-storm.yaml"), now=clock.now)


def ledger(db: Engine, fleet: Fleet, clock: FakeClock, **limits: object) -> SqlActionLedger:
    settings = SafetyLimits(**limits)  # type: ignore[arg-type]
    guard = SafetyGuard(limits=settings, cluster=SimCluster(fleet), clock=clock)
    return SqlActionLedger(db, guard=guard)


def claim(
    on: SqlActionLedger, run_id: str, clock: FakeClock, node: str, action: str = "cordon"
) -> Claim:
    key = idempotency_key(run_id=run_id, step_id="act", action=action, target=node)
    return on.claim(
        key=key,
        run_id=run_id,
        step_id="act",
        action=action,
        target=node,
        params={},
        at=clock.now(),
    )


def finish(
    on: SqlActionLedger, run_id: str, clock: FakeClock, node: str, action: str = "cordon"
) -> None:
    key = idempotency_key(run_id=run_id, step_id="act", action=action, target=node)
    on.finish(key=key, status="succeeded", result={"outcome": "changed"}, at=clock.now())


def test_two_replicas_racing_for_the_last_allowed_node_claim_it_once(
    engine: Engine, other_engine: Engine, run_id: str, clock: FakeClock, fleet: Fleet
) -> None:
    for node in ("gpu-node-00", "gpu-node-01", "gpu-node-02"):
        fleet.cordon(node)  # 3 of 16 out; 25% allows 4
    ledgers = [ledger(engine, fleet, clock), ledger(other_engine, fleet, clock)]
    targets = ["gpu-node-10", "gpu-node-11"]
    claims: dict[str, Claim] = {}
    barrier = threading.Barrier(2)

    def race(index: int) -> None:
        barrier.wait()
        claims[targets[index]] = claim(ledgers[index], run_id, clock, targets[index])

    threads = [threading.Thread(target=race, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [n for n, c in claims.items() if c.claimed]
    lost = [n for n, c in claims.items() if c.status == "blocked"]
    assert len(won) == 1 and len(lost) == 1
    blocked = claims[lost[0]].result
    assert blocked["blocked_by"] == "maxUnhealthy"
    assert blocked["data"]["out"] == 4 and blocked["data"]["total"] == 16
    assert blocked["data"]["allowed"] == 4
    assert won[0] in blocked["data"]["out_nodes"]  # the winner's claim counts while in flight
    assert blocked["detail"].startswith(
        f"would cordon {lost[0]}; blocked: 4 of 16 nodes of pool {POOL} already out "
        "(limit 25% = 4 nodes)"
    )
    with session_scope(engine) as session:
        rows = {r.target: r.status for r in action_store.list_actions(session, run_id=run_id)}
    assert rows == {won[0]: "running", lost[0]: "blocked"}


def test_the_breaker_trips_at_its_threshold_survives_a_restart_and_closes_on_reset(
    engine: Engine, other_engine: Engine, run_id: str, clock: FakeClock, fleet: Fleet
) -> None:
    first = ledger(engine, fleet, clock, breaker_threshold=2, max_unhealthy="100%")
    for node in ("gpu-node-00", "gpu-node-01"):
        assert claim(first, run_id, clock, node).claimed
        fleet.cordon(node)
        finish(first, run_id, clock, node)
    tripped = claim(first, run_id, clock, "gpu-node-02")
    assert tripped.status == "blocked" and tripped.result["blocked_by"] == "circuitBreaker"
    assert "2 nodes cordoned or drained in the last 1h (threshold 2)" in tripped.result["detail"]

    restarted = ledger(other_engine, fleet, clock, breaker_threshold=2, max_unhealthy="100%")
    clock.advance(timedelta(hours=2))  # the window has passed: an open breaker stays open
    still = claim(restarted, run_id, clock, "gpu-node-03")
    assert still.result["blocked_by"] == "circuitBreaker"
    assert "circuit breaker OPEN since" in still.result["detail"]
    uncordon = claim(restarted, run_id, clock, "gpu-node-00", action="uncordon")
    assert uncordon.claimed  # the breaker holds back removals only

    with session_scope(other_engine) as session:
        safety_store.reset_breaker(session, at=clock.now(), actor="U0ALICE", reason="checked")
    assert claim(restarted, run_id, clock, "gpu-node-04").claimed


def test_a_pause_blocks_every_cluster_change_until_resumed(
    engine: Engine, run_id: str, clock: FakeClock, fleet: Fleet
) -> None:
    guarded = ledger(engine, fleet, clock)
    with session_scope(engine) as session:
        safety_store.add_pause(session, reason="firmware rollout", actor="U0BOB", at=clock.now())
    paused = claim(guarded, run_id, clock, "gpu-node-05", action="uncordon")
    assert paused.result["blocked_by"] == "pauseRequests"
    assert "remediation paused by U0BOB" in paused.result["detail"]
    assert "firmware rollout" in paused.result["detail"]
    assert claim(guarded, run_id, clock, "gpu-node-05", action="open_ticket").claimed
    with session_scope(engine) as session:
        ended = safety_store.end_pauses(session, actor="U0BOB", at=clock.now())
    assert [p.reason for p in ended] == ["firmware rollout"]
    assert claim(guarded, run_id, clock, "gpu-node-06").claimed


class ReadsByName(SimCluster):
    """The simulator's cluster, noting each read by name in `seen` (with the lock's turns)."""

    def __init__(self, fleet: Fleet, seen: list[tuple[str, ...]]) -> None:
        super().__init__(fleet)
        self.seen = seen

    def nodes(
        self,
        names: Collection[str] | None = None,
        *,
        labels: Mapping[str, str | None] | None = None,
    ) -> list[NodeInfo]:
        if names is not None:
            self.seen.append(("read", *names))
        return super().nodes(names, labels=labels)


def test_a_removal_in_flight_is_read_before_the_limits_lock_not_under_it(
    engine: Engine, run_id: str, clock: FakeClock, fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ledger(engine, fleet, clock)
    assert claim(first, run_id, clock, "gpu-node-10").claimed  # in flight: claimed, not finished
    seen: list[tuple[str, ...]] = []

    def lock(session: Session) -> None:
        seen.append(("lock",))
        safety_store.lock_limits(session)

    monkeypatch.setattr(action_store, "lock_limits", lock)
    guard = SafetyGuard(limits=SafetyLimits(), cluster=ReadsByName(fleet, seen), clock=clock)
    assert claim(SqlActionLedger(engine, guard=guard), run_id, clock, "gpu-node-11").claimed
    assert ("read", "gpu-node-10") in seen  # its pool and GPUs are known to the check
    assert seen.index(("lock",)) > seen.index(("read", "gpu-node-10"))  # read before the lock
    assert seen[-1] == ("lock",)  # nothing read from the cluster while the lock is held
