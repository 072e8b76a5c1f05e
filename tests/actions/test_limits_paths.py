"""One enforcement point: every path to an action meets the same limit check when the action is
claimed, and is blocked by the same limit at the same numbers.

The fleet is the shipped ECC demo (16 nodes of one pool); `maxUnhealthy` is 2 and two earlier
runs cordoned gpu-node-00 and gpu-node-01 through the bot. A runbook then opens a ticket and
cordons gpu-node-03, which would be the third node out. Paths:
- approved by a person (`resume(approve)`), in-process;
- auto-approved by policy (cordon is medium risk, auto-approved), in-process;
- resumed after a crash: `gpu-oncall approve` (a real process) is SIGKILLed while its ticket
  request hangs (the decision committed, the cordon not yet claimed); the next `serve` takes
  the run over and claims the cordon (tests/journeys/test_crash_serve.py's stack).
Each ends with the cordon `blocked` (`blocked_by: maxUnhealthy`), the same line and the same
numbers, the node never cordoned, the ticket opened, and the block on the incident timeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journeys.test_crash_serve import Bot, kill, ticket_desk, wait_until
from sqlmodel import select

from bot.config import PolicySettings, Settings, StorageSettings
from bot.wiring.runtime import Runtime, open_runtime
from simulator import SCENARIO_DIR
from storage import incidents as incident_store
from storage.db import make_engine, session_scope
from storage.tables import ActionRow

TARGET = "gpu-node-03"
SCENARIO = SCENARIO_DIR / "ecc-dbe-storm.yaml"
POOL = "NVIDIA-H100-80GB-HBM3"
EXPECTED_DETAIL = (
    f"would cordon {TARGET}; blocked: 2 of 16 nodes of pool {POOL} already out "
    "(limit 2 = 2 nodes) · circuit breaker closed (2 of 10 node removals in the last 1h)"
)
RUNBOOKS = {
    "cordon-only": [{"action": "cordon", "reason": "Take the node out"}],
    "ticket-then-cordon": [
        {"action": "open_ticket", "params": {"queue": "ops"}, "reason": "Tell the node team"},
        {"action": "cordon", "reason": "Stop new work landing on the node"},
    ],
}


def write_runbooks(where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for name, proposals in RUNBOOKS.items():
        body = {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Runbook",
            "metadata": {"name": name, "title": name},
            "inputs": {"node": {"type": "node", "required": True, "help": "The node"}},
            "steps": [
                {"id": "fix", "title": "Propose", "propose": proposals},
                {"id": "approval", "title": "Approval", "approve": {}},
                {"id": "execute", "title": "Carry out", "act": {}},
            ],
        }
        (where / f"{name}.yaml").write_text(json.dumps(body))
    return where


def settings_for(tmp_path: Path, *, auto: bool) -> Settings:
    return Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        policy=PolicySettings(
            max_unhealthy="2", auto_approve_risks=["low", "medium"] if auto else []
        ),
        runbook_dirs=[write_runbooks(tmp_path / "books")],
    )


def run(rt: Runtime, runbook: str, node: str) -> Any:
    loaded = rt.catalog.get(runbook)
    incident_id, _ = rt.engine.open_incident(loaded, {"node": node}, actor="cli:alice")
    return rt.engine.start(
        loaded, inputs={"node": node}, incident_id=incident_id, requester="cli:alice"
    )


@pytest.fixture
def two_out(tmp_path: Path) -> Path:
    """gpu-node-00 and gpu-node-01 cordoned by two auto-approved runs; returns tmp_path."""
    with open_runtime(settings_for(tmp_path, auto=True), scenario_path=SCENARIO, fresh=True) as rt:
        for node in ("gpu-node-00", "gpu-node-01"):
            assert run(rt, "cordon-only", node).status == "completed"
    return tmp_path


def blocked_cordon(results: list[dict[str, Any]]) -> dict[str, Any]:
    (cordon,) = [r for r in results if r["action"] == "cordon"]
    assert cordon["outcome"] == "blocked", cordon
    return {k: cordon[k] for k in ("detail", "blocked_by", "data")}


def assert_the_same_block(seen: dict[str, Any]) -> None:
    assert seen["detail"] == EXPECTED_DETAIL
    assert seen["blocked_by"] == "maxUnhealthy"
    data = seen["data"]
    assert (data["out"], data["total"], data["allowed"], data["limit"]) == (2, 16, 2, "2")
    assert data["out_nodes"] == ["gpu-node-00", "gpu-node-01"]
    assert data["breaker"] == {
        "state": "closed",
        "removals": 2,
        "threshold": 10,
        "window_seconds": 3600.0,
    }


def timeline_blocks(rt: Runtime, incident: str) -> list[str]:
    with session_scope(rt.db) as session:
        events = incident_store.list_events(session, int(incident.removeprefix("INC-")))
    return [e.summary for e in events if e.kind == "action_blocked"]


@pytest.fixture
def blocked_in_process(two_out: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """The cordon's blocked result on the human-approved and the auto-approved path."""
    found: dict[str, dict[str, Any]] = {}
    with open_runtime(settings_for(two_out, auto=False)) as rt:
        waiting = run(rt, "ticket-then-cordon", TARGET)
        assert waiting.status == "awaiting_approval"
        done = rt.engine.resume(waiting.run_id, decision="approve", actor="cli:bob")
        assert done.status == "completed"  # blocked is a result, not a failure of the run
        found["human"] = blocked_cordon(done.steps["execute"]["results"])
        assert timeline_blocks(rt, done.incident) == [EXPECTED_DETAIL]
    with open_runtime(settings_for(two_out, auto=True)) as rt:
        auto = run(rt, "ticket-then-cordon", "gpu-node-03")
        assert auto.status == "completed"
        found["auto"] = blocked_cordon(auto.steps["execute"]["results"])
        tickets = [r for r in auto.steps["execute"]["results"] if r["action"] == "open_ticket"]
        assert [t["outcome"] for t in tickets] == ["changed"]
        assert rt.fleet is not None and rt.fleet.cordon_calls[TARGET] == 0
    yield found


def test_human_and_auto_approved_cordons_meet_the_same_block(
    blocked_in_process: dict[str, dict[str, Any]],
) -> None:
    assert blocked_in_process["human"] == blocked_in_process["auto"]
    assert_the_same_block(blocked_in_process["human"])


def test_a_cordon_resumed_after_a_crash_meets_the_same_block(tmp_path: Path) -> None:
    bot = Bot(tmp_path)
    books = write_runbooks(tmp_path / "books")
    try:
        with ticket_desk() as (desk, tickets):
            bot.extra_env.update(
                {
                    "GPU_ONCALL_RUNBOOK_DIRS": json.dumps([str(books)]),
                    "GPU_ONCALL_POLICY__MAX_UNHEALTHY": "2",
                    "GPU_ONCALL_POLICY__AUTO_APPROVE_RISKS": '["low", "medium"]',
                    "GPU_ONCALL_TICKETS__WEBHOOK_URL": tickets,
                }
            )
            for node in ("gpu-node-00", "gpu-node-01"):
                done = bot.run("run", "cordon-only", f"node={node}")
                assert done.returncode == 0, done.stdout + done.stderr
            del bot.extra_env["GPU_ONCALL_POLICY__AUTO_APPROVE_RISKS"]
            asked = bot.run("run", "ticket-then-cordon", f"node={TARGET}")
            assert asked.returncode == 0, asked.stdout + asked.stderr
            approving = bot.popen("approve", "INC-3")
            assert desk.arrived.wait(60), "approve never reached the ticket action"
            kill(approving)  # decided; the ticket hangs; the cordon is not claimed yet
            desk.hold = False
            desk.release.set()
            assert [a[:3] for a in actions(bot)] == [
                ("cordon", "gpu-node-00", "succeeded"),
                ("cordon", "gpu-node-01", "succeeded"),
                ("open_ticket", TARGET, "running"),
            ]
            bot.serve()  # takes the run over once the dead worker's lease ends
            wait_until(bot, "the cordon is claimed", lambda s: len(actions(bot)) == 4)
    finally:
        bot.kill_all()
    (cordon,) = [a for a in actions(bot) if a[:2] == ("cordon", TARGET)]
    assert cordon[2] == "blocked"
    assert_the_same_block({k: cordon[3][k] for k in ("detail", "blocked_by", "data")})


def actions(bot: Bot) -> list[tuple[str, str, str, dict[str, Any]]]:
    engine = make_engine(bot.db_url)
    with session_scope(engine) as session:
        rows = list(session.exec(select(ActionRow).order_by(ActionRow.id)))  # type: ignore[arg-type]
    engine.dispose()
    return [(r.action, r.target, r.status, dict(r.result)) for r in rows]
