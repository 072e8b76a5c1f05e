"""Per-runbook approval policy in the runbook YAML (`policy:`), over the settings' defaults.

Covers: a runbook's approvers replace the settings' (a settings approver is refused, the
runbook's accepted); its two-person risks, expiry and approvers are applied and each override is
named in the approval payload, on the CLI and in the Slack blocks; an auto-approve rule runs the
action without asking, but only up to its number of targets; an admin acting for another
person still meets the approver list and the two-person rule; schema errors (a bad risk, an
unknown auto-approve action, a bad expiry) name the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.actions.policy import (
    Policy,
    Risk,
    RunbookPolicy,
    check_approver,
    effective_policy,
    proposals_need_approval,
)
from bot.config import PolicySettings, Settings, StorageSettings
from bot.engine.running import RunOutcome
from bot.errors import PolicyDenied, RunbookError
from bot.slack.blocks import triage_blocks
from bot.slack.snapshots import read_triage
from bot.wiring.runtime import Runtime, open_runtime
from storage.db import session_scope
from tests.engine.runbook_helpers import ecc_runbook, load
from tests.engine.runbook_helpers import start as start_run

STRICT = {"approvers": ["cli:carol"], "two_person_risks": ["medium", "high"], "expiry": "15m"}
AUTO = {"auto_approve": [{"action": "cordon", "max_targets": 1}]}


@pytest.fixture
def rt(tmp_path: Path, scenario_dir: Path) -> Iterator[Runtime]:
    books = tmp_path / "runbooks"
    books.mkdir()
    (books / "strict.yaml").write_text(yaml.safe_dump(ecc_runbook("strict-cordon", policy=STRICT)))
    (books / "auto.yaml").write_text(yaml.safe_dump(ecc_runbook("auto-cordon", policy=AUTO)))
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        policy=PolicySettings(approvers=["cli:erin"]),
        runbook_dirs=[books],
    )
    with open_runtime(settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True) as r:
        yield r


def start(rt: Runtime, name: str, requester: str = "cli:dave") -> RunOutcome:
    return start_run(rt, rt.catalog.get(name), requester=requester)


def test_overrides_are_named_in_the_approval_payload(rt: Runtime) -> None:
    outcome = start(rt, "strict-cordon")
    assert outcome.status == "awaiting_approval"
    policy = outcome.approval["policy"]
    assert policy["approvers"] == ["cli:carol"]
    assert policy["overrides"] == [
        "runbook strict-cordon policy: approvers: cli:carol",
        "runbook strict-cordon policy: two-person rule for risk: medium, high",
        "runbook strict-cordon policy: approval expires after 15 min",
    ]
    asked = datetime.fromisoformat(outcome.approval["requested_at"])
    assert datetime.fromisoformat(outcome.approval["expires_at"]) - asked == timedelta(minutes=15)


def test_runbook_approvers_replace_the_settings_approvers(rt: Runtime) -> None:
    outcome = start(rt, "strict-cordon")
    with pytest.raises(PolicyDenied, match=r"cli:erin is not an approver of runbook strict-cordon"):
        rt.engine.resume(outcome.run_id, decision="approve", actor="cli:erin")
    done = rt.engine.resume(outcome.run_id, decision="approve", actor="cli:carol")
    assert done.steps["approval"]["actor"] == "cli:carol"
    assert done.steps["execute"]["results"][0]["outcome"] == "changed"


def test_two_person_rule_of_the_runbook_covers_medium_risk(rt: Runtime) -> None:
    outcome = start(rt, "strict-cordon", requester="cli:carol")
    with pytest.raises(PolicyDenied, match="two-person rule: cli:carol requested this medium"):
        rt.engine.resume(outcome.run_id, decision="approve", actor="cli:carol")


def test_the_slack_message_names_the_overrides(rt: Runtime) -> None:
    outcome = start(rt, "strict-cordon")
    incident_id = int(outcome.incident.removeprefix("INC-"))
    with session_scope(rt.db) as session:
        view = read_triage(
            session, incident_id=incident_id, run_id=None, catalog=rt.catalog, policy=rt.deps.policy
        )
    text = json.dumps(triage_blocks(view))
    assert "cli:carol" in text
    assert "runbook strict-cordon policy: approval expires after 15 min" in text


def test_an_auto_approve_rule_runs_the_action_without_asking(rt: Runtime) -> None:
    outcome = start(rt, "auto-cordon")
    assert outcome.status == "completed"
    assert outcome.steps["approval"]["actor"] == "policy:auto"
    assert outcome.steps["execute"]["results"][0]["outcome"] == "changed"


def test_an_auto_approve_rule_stops_at_its_number_of_targets() -> None:
    policy = effective_policy(
        Policy(), RunbookPolicy(runbook="r", auto_approve={"cordon": 1})
    )
    one = [{"action": "cordon", "risk": "medium"}]
    two = one + [{"action": "cordon", "risk": "medium"}]
    assert not proposals_need_approval(policy, one)
    assert proposals_need_approval(policy, two)
    assert policy.overrides == (
        "runbook r policy: auto-approve: cordon (up to 1 target(s)); the safety limits still apply",
    )


def test_approval_risks_decide_which_levels_ask() -> None:
    policy = effective_policy(
        Policy(), RunbookPolicy(runbook="r", approval_risks=frozenset({Risk.HIGH}))
    )
    assert not proposals_need_approval(policy, [{"action": "cordon", "risk": "medium"}])
    assert proposals_need_approval(policy, [{"action": "drain", "risk": "high"}])


def test_an_admin_acting_for_someone_still_meets_the_rules() -> None:
    policy = Policy(approvers=frozenset({"cli:bob"}))
    acting = "cli:alice as cli:bob (admin)"
    check_approver(policy, actor=acting, requester="cli:dave", risks=[Risk.HIGH])
    with pytest.raises(PolicyDenied, match="two-person rule: cli:alice"):
        check_approver(policy, actor=acting, requester="cli:alice", risks=[Risk.HIGH])
    with pytest.raises(PolicyDenied, match="cli:carol is not an approver"):
        check_approver(
            policy, actor="cli:alice as cli:carol (admin)", requester="cli:dave", risks=[]
        )


@pytest.mark.parametrize(
    ("policy", "field", "says"),
    [
        ({"approval_risks": ["severe"]}, "policy.approval_risks.0", "'low', 'medium' or 'high'"),
        ({"auto_approve": [{"action": "cordn"}]}, "policy.auto_approve.0.action", "cordon"),
        ({"expiry": "soon"}, "policy.expiry", "should match pattern"),
        ({"approvers": "cli:carol"}, "policy.approvers", "valid list"),
        ({"two_person": ["high"]}, "policy.two_person", "Extra inputs"),
    ],
)
def test_a_bad_policy_names_file_and_field(
    rt: Runtime, policy: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(RunbookError) as caught:
        load(rt, ecc_runbook("bad", policy=policy), file="runbooks/bad.yaml")
    message = str(caught.value)
    assert message.startswith(f"runbooks/bad.yaml: field '{field}': ")
    assert says in message
