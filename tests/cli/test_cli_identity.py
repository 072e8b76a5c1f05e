"""Who approves on the command line is who they are; refusals exit 2.

Covers, as real subprocesses on a temporary database: the CLI acts as the operating-system user
(or `identity.cli_user`); `approve --as` by someone without the admin role is refused with exit 2
and the approval stays pending; an admin's `--as` is recorded as "cli:alice as cli:bob (admin)"
and still meets the two-person rule; `diagnose --yes` whose approval the two-person rule refuses
says so before trying, names who else may approve and the setting,
and exits 2; a refused `approve` (not an approver) exits 2 with one line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from simulator import SCENARIO_DIR
from tests.cli.cli_process import run_cli

SCENARIO = str(Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml")


def cli(
    tmp_path: Path, *args: str, user: str = "alice", **env: str
) -> subprocess.CompletedProcess[str]:
    who = {"USER": user, "LOGNAME": user, "GPU_ONCALL_IDENTITY__CLI_USER": None}
    return run_cli(tmp_path, *args, env=who | env)


def waiting_demo(tmp_path: Path) -> None:
    """The demo's alert run waits at its approval (requested by alertmanager)."""
    stopped = cli(tmp_path, "demo")
    assert stopped.returncode == 0, stopped.stderr
    assert "the run waits, checkpointed" in stopped.stdout


def incident_state(tmp_path: Path) -> str:
    listed = json.loads(cli(tmp_path, "incidents", "--json").stdout)
    return str(listed[0]["state"])


def timeline(tmp_path: Path) -> str:
    return cli(tmp_path, "postmortem", "INC-1", "--format", "md").stdout


def test_as_without_the_admin_role_is_refused_and_the_approval_stays(tmp_path: Path) -> None:
    waiting_demo(tmp_path)
    refused = cli(tmp_path, "approve", "INC-1", "--as", "cli:bob")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "gpu-oncall: refused: cli:alice may not act as cli:bob: --as needs the admin role "
        "(GPU_ONCALL_IDENTITY__ADMINS; admins: none configured); approve as yourself instead"
    ]
    assert incident_state(tmp_path) == "awaiting_approval"


def test_an_admin_acting_for_someone_is_recorded_as_such(tmp_path: Path) -> None:
    waiting_demo(tmp_path)
    done = cli(
        tmp_path, "approve", "INC-1", "--as", "bob", GPU_ONCALL_IDENTITY__ADMINS='["cli:alice"]'
    )
    assert done.returncode == 0, done.stderr
    assert "Remediation approved by cli:alice as cli:bob (admin)" in timeline(tmp_path)


def test_the_configured_identity_replaces_the_os_user(tmp_path: Path) -> None:
    waiting_demo(tmp_path)
    done = cli(tmp_path, "approve", "INC-1", GPU_ONCALL_IDENTITY__CLI_USER="oncall-carol")
    assert done.returncode == 0, done.stderr
    assert "Remediation approved by cli:oncall-carol" in timeline(tmp_path)


def test_a_refused_approve_exits_2(tmp_path: Path) -> None:
    waiting_demo(tmp_path)
    refused = cli(tmp_path, "approve", "INC-1", GPU_ONCALL_POLICY__APPROVERS='["cli:bob"]')
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "gpu-oncall: refused: cli:alice is not an approver (approvers: cli:bob); "
        "ask one of them to approve (the list is GPU_ONCALL_POLICY__APPROVERS)"
    ]


def test_diagnose_yes_under_the_two_person_rule_says_so_up_front_and_exits_2(
    tmp_path: Path,
) -> None:
    done = cli(tmp_path, "diagnose", "gpu-node-03", "--scenario", SCENARIO, "--yes")
    assert done.returncode == 2
    assert "--yes: approving as" not in done.stdout, "it must not try what the rule forbids"
    assert "--yes cannot approve: cli:alice requested this run" in done.stdout
    assert "gpu-oncall approve INC-1" in done.stdout
    assert done.stderr.strip().splitlines() == [
        "gpu-oncall: refused: two-person rule: cli:alice requested this high-risk action and "
        "cannot also approve it; who else may approve: anyone but cli:alice (on the CLI another "
        "user runs `gpu-oncall approve`, or set GPU_ONCALL_IDENTITY__CLI_USER; `--as` needs the "
        'admin role); the rule is set by GPU_ONCALL_POLICY__TWO_PERSON_RISKS (now ["high"]; [] '
        "turns it off)"
    ]
    assert incident_state(tmp_path) == "awaiting_approval"
    # another person then approves it
    approved = cli(tmp_path, "approve", "INC-1", user="bob")
    assert approved.returncode == 0, approved.stderr
