"""No silent failures in the engine: a broken expression or template fails its step loudly.

Covers: a proposal's `when` that cannot be evaluated, an action parameter or target template
that does not render, and a verify `expect` or `when` that cannot be evaluated each raise
StepError naming file, step and field; the timeline records it as a failed step with the same
words, and the incident fails with them as its reason (never a dropped proposal, a raw template
passed to an action, or "verification failed"); a verify `expect` reading an unknown name is
refused when the runbook loads.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.errors import RunbookError, StepError
from bot.incidents.timeline import EventKind
from bot.wiring.runtime import Runtime
from storage.tables import TimelineEvent
from tests.engine.runbook_helpers import (
    ecc_runbook,
    incident_record,
    load,
    open_incident,
    start,
)

FILE = "runbooks/loud.yaml"


def raw(proposal: dict[str, Any], verify: dict[str, Any] | None = None) -> dict[str, Any]:
    then = [] if verify is None else [{"id": "confirm", "verify": verify}]
    policy = {"auto_approve": [{"action": "cordon"}, {"action": "open_ticket"}]}
    return ecc_runbook("loud", propose=[proposal], policy=policy, then=then)


def run(rt: Runtime, runbook: dict[str, Any]) -> tuple[StepError, str, list[TimelineEvent]]:
    loaded = load(rt, runbook, file=FILE)
    incident_id = open_incident(rt, loaded)
    with pytest.raises(StepError) as caught:
        start(rt, loaded, incident_id=incident_id)
    incident, events = incident_record(rt, incident_id)
    return caught.value, incident.state, events


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
        load(rt, raw({"action": "cordon"}, verify), file=FILE)
    message = str(caught.value)
    where = f"{FILE}: step 'confirm': field 'verify.expect'"
    assert message.startswith(f"{where}: unknown step 'valeu'")
    assert "a verification reads" in message and "value" in message
