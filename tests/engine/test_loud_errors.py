"""No silent failures in the engine: a broken expression or template fails its step loudly.

Covers: a proposal's `when` that cannot be evaluated, an action parameter or target template
that does not render, and a verify `expect` or `when` that cannot be evaluated each raise
StepError naming file, step and field; the timeline records it as a failed step with the same
words, and the incident fails with them as its reason (never a dropped proposal, a raw template
passed to an action, or "verification failed"); a verify `expect` reading an unknown name is
refused when the runbook loads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.engine.loading import parse_runbook
from bot.errors import RunbookError, StepError
from bot.incidents.timeline import EventKind
from bot.wiring import Runtime, open_runtime
from storage import incidents as incident_store
from storage.db import session_scope

NODE = "gpu-node-03"
FILE = "runbooks/loud.yaml"


@pytest.fixture
def rt(settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    with open_runtime(settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True) as r:
        yield r


def raw(proposal: dict[str, Any], verify: dict[str, Any] | None = None) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
        {
            "id": "storm",
            "check": "dbe.max > 0.0",
            "layer": "gpu_hardware",
            "severity": "critical",
            "finding": "ECC errors on {{ node }}",
            "culprit": {"node": "{{ node }}"},
        },
        {"id": "where", "localize": {}},
        {"id": "fix", "propose": [proposal]},
        {"id": "approval", "approve": {}},
        {"id": "execute", "act": {}},
    ]
    if verify is not None:
        steps.append({"id": "confirm", "verify": verify})
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Runbook",
        "metadata": {"name": "loud"},
        "inputs": {"node": {"type": "node", "required": True}},
        "policy": {"auto_approve": [{"action": "cordon"}, {"action": "open_ticket"}]},
        "steps": steps,
    }


def run(rt: Runtime, runbook: dict[str, Any]) -> tuple[StepError, str, list[Any]]:
    loaded = parse_runbook(
        runbook, file=FILE, signals=rt.deps.signals.names(), actions=rt.deps.actions.names()
    )
    incident_id, _ = rt.engine.open_incident(loaded, {"node": NODE}, actor="cli:dave")
    with pytest.raises(StepError) as caught:
        rt.engine.start(
            loaded, inputs={"node": NODE}, incident_id=incident_id, requester="cli:dave"
        )
    with session_scope(rt.db) as session:
        incident = incident_store.get_incident(session, incident_id)
        assert incident is not None
        return caught.value, incident.state, incident_store.list_events(session, incident_id)


def assert_loud(rt: Runtime, runbook: dict[str, Any], step: str, field: str) -> str:
    error, state, events = run(rt, runbook)
    where = f"{FILE}: step '{step}': field '{field}': could not be evaluated: "
    assert str(error).startswith(where)
    failed = [e for e in events if e.kind == EventKind.STEP_FAILED]
    assert failed[0].summary == f"Step failed: {error}"
    assert failed[0].payload["field"] == field
    assert failed[-1].summary == f"Run of 'loud' failed: {error}"
    assert state == "failed"
    return str(error)


def test_a_proposal_condition_that_cannot_be_evaluated_fails_the_step(rt: Runtime) -> None:
    proposal = {"action": "cordon", "when": "where.no_such_field == 'x'"}
    message = assert_loud(rt, raw(proposal), "fix", "propose.0.when")
    assert "no_such_field" in message


def test_an_action_parameter_that_does_not_render_is_never_passed_raw(rt: Runtime) -> None:
    proposal = {"action": "open_ticket", "params": {"queue": "{{ where.no_such_field.x }}"}}
    assert_loud(rt, raw(proposal), "fix", "propose.0.params.queue")
    assert not rt.deps.tickets.opened  # type: ignore[attr-defined]


def test_a_target_template_that_does_not_render_fails_the_step(rt: Runtime) -> None:
    proposal = {"action": "cordon", "target": "{{ storm.finding.no_such_field.x }}"}
    assert_loud(rt, raw(proposal), "fix", "propose.0.target")


def test_a_verify_expectation_that_cannot_be_evaluated_is_not_verification_failed(
    rt: Runtime,
) -> None:
    verify = {"signal": "gpu.ecc.dbe_rate", "expect": "value > 'zero'", "within": "2m"}
    assert_loud(rt, raw({"action": "cordon"}, verify), "confirm", "verify.expect")


def test_a_verify_condition_that_cannot_be_evaluated_fails_the_step(rt: Runtime) -> None:
    verify = {
        "signal": "gpu.ecc.dbe_rate",
        "expect": "value == 0.0",
        "when": "where.no_such_field",
    }
    assert_loud(rt, raw({"action": "cordon"}, verify), "confirm", "verify.when")


def test_a_verify_expectation_typo_is_refused_at_load(rt: Runtime) -> None:
    verify = {"signal": "gpu.ecc.dbe_rate", "expect": "valeu == 0.0"}
    with pytest.raises(RunbookError) as caught:
        parse_runbook(
            raw({"action": "cordon"}, verify),
            file=FILE,
            signals=rt.deps.signals.names(),
            actions=rt.deps.actions.names(),
        )
    message = str(caught.value)
    where = f"{FILE}: step 'confirm': field 'verify.expect'"
    assert message.startswith(f"{where}: unknown step 'valeu'")
    assert "a verification reads" in message and "value" in message
