"""Workload actions (restart_job, rollback, scale, restart_pod) hand the work to the owners.

Covers: each action opens a ticket in its queue saying what is requested, pre-filled with the
verdict, and its result says no controller hook is configured; repeating the same idempotency
key returns the same ticket; a bad workload name is refused with the valid form; the risk
levels and target kinds the approval policy and the presentations rely on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.actions.policy import Risk
from bot.actions.registry import default_registry
from bot.actions.types import ActionContext
from bot.errors import UserInputError
from integrations.tickets import RecordedTickets
from tests.actions.action_helpers import healthy_fleet_context

VERDICT = {
    "layer": "workload",
    "summary": "workload fault at llm-pretrain: data loader starved",
    "findings": [{"severity": "critical", "summary": "Every rank waits 60% for input"}],
    "culprit_details": [{"workload": "llm-pretrain"}],
}


def context(scenario_dir: Path, tickets: RecordedTickets, key: str = "k1") -> ActionContext:
    return healthy_fleet_context(scenario_dir, tickets, verdict=VERDICT, key=key)


def test_restart_job_opens_a_ticket_with_the_request_and_the_evidence(
    scenario_dir: Path,
) -> None:
    tickets = RecordedTickets()
    spec = default_registry().get("restart_job")
    result = spec.run(context(scenario_dir, tickets), "llm-pretrain", {})
    assert result.outcome == "changed"
    assert "no workload-controller hook" in result.detail
    ticket_id, ticket = next(iter(tickets.opened.values()))
    assert result.data["ticket_id"] == ticket_id
    assert ticket.queue == "ml-platform"
    assert ticket.title.startswith(
        "[restart_job] restart job llm-pretrain from its last checkpoint"
    )
    assert "Every rank waits 60% for input" in ticket.body
    assert ticket.fields["workload"] == "llm-pretrain"


def test_scale_rollback_and_restart_pod_name_their_request(scenario_dir: Path) -> None:
    tickets = RecordedTickets()
    registry = default_registry()
    registry.get("scale").run(context(scenario_dir, tickets, "a"), "vllm-chat", {"replicas": 6})
    registry.get("rollback").run(context(scenario_dir, tickets, "b"), "vllm-chat", {})
    registry.get("restart_pod").run(
        context(scenario_dir, tickets, "c"),
        "nvidia-dcgm-exporter-9r8t8",
        {"namespace": "gpu-operator"},
    )
    titles = [ticket.title for _, ticket in tickets.opened.values()]
    assert titles[0].startswith("[scale] scale vllm-chat to 6 replicas")
    assert titles[1].startswith("[rollback] roll back vllm-chat to its previous revision")
    assert titles[2].startswith(
        "[restart_pod] restart pod nvidia-dcgm-exporter-9r8t8 in gpu-operator"
    )


def test_the_same_key_returns_the_same_ticket(scenario_dir: Path) -> None:
    tickets = RecordedTickets()
    spec = default_registry().get("restart_job")
    first = spec.run(context(scenario_dir, tickets), "llm-pretrain", {})
    second = spec.run(context(scenario_dir, tickets), "llm-pretrain", {})
    assert first.data["ticket_id"] == second.data["ticket_id"]
    assert len(tickets.opened) == 1


def test_a_bad_workload_name_is_refused(scenario_dir: Path) -> None:
    with pytest.raises(UserInputError, match="invalid workload name 'LLM Pretrain'"):
        default_registry().get("restart_job").run(
            context(scenario_dir, RecordedTickets()), "LLM Pretrain", {}
        )


def test_risk_levels_and_target_kinds() -> None:
    registry = default_registry()
    risks = {
        name: registry.get(name).risk
        for name in ("restart_job", "rollback", "scale", "restart_pod")
    }
    assert risks == {
        "restart_job": Risk.MEDIUM,
        "rollback": Risk.MEDIUM,
        "scale": Risk.LOW,
        "restart_pod": Risk.MEDIUM,
    }
    assert registry.get("restart_job").target_kind == "workload"
    assert registry.get("restart_pod").target_kind == "pod"
    assert registry.get("scale").destructive is False
