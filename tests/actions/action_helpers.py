"""Test helpers for one action run outside the engine: the context an action receives (on a
given cluster, or on the healthy simulated fleet) and the action ledger's contract in memory.

Shared by tests/actions/test_node_agent.py, test_node_agent_job.py and
test_workloads_handoff.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.actions.executing import Claim, execute_once
from bot.actions.registry import ActionContext, ActionSpec
from bot.clock import FakeClock
from integrations.cluster import Cluster
from simulator.cluster import SimCluster
from simulator.fleet import Fleet
from simulator.scenarios import load_scenario
from integrations.tickets import RecordedTickets


class MemoryLedger:
    """The ledger's contract in memory: the first claim of a key wins, repeats get its result."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def claim(self, *, key: str, at: datetime, **_: Any) -> Claim:
        if key in self.rows:
            return Claim(False, "succeeded", self.rows[key])
        self.rows[key] = {}
        return Claim(True, "running", {})

    def finish(self, *, key: str, status: str, result: Any, at: datetime) -> None:
        self.rows[key] = dict(result)


def action_context(
    *,
    cluster: Cluster,
    verdict: Mapping[str, Any],
    tickets: RecordedTickets | None = None,
    clock: FakeClock | None = None,
    key: str = "k1",
) -> ActionContext:
    """What an action of run `run-1` in incident INC-7 receives, idempotency key `key`."""
    return ActionContext(
        cluster=cluster,
        clock=clock or FakeClock(),
        tickets=tickets if tickets is not None else RecordedTickets(),
        run_id="run-1",
        incident="INC-7",
        idempotency_key=key,
        verdict=verdict,
    )


def healthy_fleet_context(
    scenario_dir: Path, tickets: RecordedTickets, *, verdict: Mapping[str, Any], key: str = "k1"
) -> ActionContext:
    """`action_context` on the simulated fleet of `healthy-node.yaml`."""
    clock = FakeClock()
    fleet = Fleet.from_scenario(load_scenario(scenario_dir / "healthy-node.yaml"), now=clock.now)
    return action_context(
        cluster=SimCluster(fleet), verdict=verdict, tickets=tickets, clock=clock, key=key
    )


def act_once(spec: ActionSpec, ctx: ActionContext, *, target: str, step_id: str) -> dict[str, Any]:
    """`spec` on `target` once, through a fresh in-memory ledger (as a run resumed elsewhere)."""
    return execute_once(
        spec, ctx, ledger=MemoryLedger(), step_id=step_id, target=target, params={}, dry_run=False
    )
