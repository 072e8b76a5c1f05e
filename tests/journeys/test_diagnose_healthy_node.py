"""`node-diagnose` on a healthy node localizes to `none` and proposes nothing destructive;
on a faulty one it names the layer and culprit.

Covers: healthy control (no proposals, no approval, incident resolved as "no fault found"),
the IB symbol-error node (fabric, cordon + fabric ticket, no drain or RMA), and the node
NotReady case (kubernetes), all through the real engine on the simulated fleet.
"""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings
from bot.engine.running import RunOutcome
from bot.incidents import lifecycle
from bot.wiring.runtime import Runtime, open_runtime
from storage import incidents as incident_store
from storage.db import session_scope


def diagnose(rt: Runtime, node: str) -> RunOutcome:
    now = rt.clock.now()
    with session_scope(rt.db) as session:
        incident, _ = lifecycle.open_or_attach(
            session,
            runbook="node-diagnose",
            target=node,
            target_kind="node",
            severity="warning",
            title=f"diagnose {node}",
            fired_at=now,
            detected_at=now,
            actor="cli:alice",
        )
        incident_id = int(incident.id or 0)
    return rt.engine.start(
        rt.catalog.get("node-diagnose"),
        inputs={"node": node},
        incident_id=incident_id,
        requester="cli:alice",
    )


def test_healthy_node_proposes_no_destructive_action(
    settings: Settings, scenario_dir: Path
) -> None:
    with open_runtime(settings, scenario_path=scenario_dir / "healthy-node.yaml", fresh=True) as rt:
        outcome = diagnose(rt, "gpu-node-05")
        assert outcome.status == "completed"
        assert outcome.verdict["layer"] == "none"
        assert outcome.verdict["culprits"] == []
        assert outcome.steps["fix"]["proposals"] == []
        assert outcome.approval is None
        assert outcome.steps["execute"]["results"] == []
        assert sum(rt.fleet.cordon_calls.values()) == 0
        assert sum(rt.fleet.drain_calls.values()) == 0
        with session_scope(rt.db) as session:
            incident = incident_store.get_incident(session, outcome.incident)
            assert incident is not None and incident.state == "resolved"


def test_ib_symbol_errors_localize_to_fabric_not_gpu(
    settings: Settings, scenario_dir: Path
) -> None:
    with open_runtime(
        settings, scenario_path=scenario_dir / "ib-symbol-errors.yaml", fresh=True
    ) as rt:
        node = rt.scenario.expect.culprits[0]  # type: ignore[union-attr]
        outcome = diagnose(rt, node)
        assert outcome.verdict["layer"] == "fabric"
        assert outcome.verdict["culprits"] == [node]
        actions = [(p["action"], p["params"].get("queue")) for p in outcome.approval["proposals"]]  # type: ignore[index]
        assert actions == [("cordon", None), ("open_ticket", "fabric")]


def test_node_not_ready_localizes_to_kubernetes(settings: Settings, scenario_dir: Path) -> None:
    with open_runtime(
        settings, scenario_path=scenario_dir / "node-not-ready.yaml", fresh=True
    ) as rt:
        node = rt.scenario.expect.culprits[0]  # type: ignore[union-attr]
        outcome = diagnose(rt, node)
        assert outcome.verdict["layer"] == "kubernetes"
        assert node in outcome.verdict["culprits"]
        assert "drain" not in [p["action"] for p in (outcome.approval or {}).get("proposals", [])]
