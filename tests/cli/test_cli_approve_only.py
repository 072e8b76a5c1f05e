"""Approving per action from the command line (`approve INC-N --only ACTION`), as processes.

Covers: a requester under the two-person rule may approve their own medium-risk cordon alone
(the rule covers the approved actions' risks only), the cordon runs and is on the timeline at
once, and the drain and ticket stay pending as a new approval asked when the cordon was
approved; the requester's approval of the high-risk rest is refused (exit 2); another person
approves the rest and the run completes; a rejected rest leaves those actions not run, on the
record; the postmortem page lists what awaits approval and who may approve it; `--only`
naming an action not awaiting approval exits 2 naming the ones that are.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from simulator import SCENARIO_DIR
from tests.cli.cli_process import run_cli

SCENARIO = str(Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml")


def cli(tmp_path: Path, *args: str, user: str = "alice") -> subprocess.CompletedProcess[str]:
    who = {"USER": user, "LOGNAME": user, "GPU_ONCALL_IDENTITY__CLI_USER": None}
    return run_cli(tmp_path, *args, env=who)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def postmortem(tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads(ok(cli(tmp_path, "postmortem", "INC-1", "--format", "json"))))


def waiting(tmp_path: Path) -> None:
    out = ok(cli(tmp_path, "diagnose", "gpu-node-03", "--scenario", SCENARIO))
    assert "Approval needed (INC-1" in out


def test_cordon_alone_now_and_the_rest_by_another_person(tmp_path: Path) -> None:
    waiting(tmp_path)
    page = ok(cli(tmp_path, "postmortem", "INC-1", "--format", "html"))
    assert '<section id="pending-approvals">' in page
    assert "Who may approve: anyone, except cli:alice (two-person rule: high risk)" in page
    cordoned = ok(cli(tmp_path, "approve", "INC-1", "--only", "cordon"))
    assert "Still awaiting approval (INC-1" in cordoned
    assert "drain gpu-node-03" in cordoned and "open_ticket gpu-node-03" in cordoned

    record = postmortem(tmp_path)
    assert record["incident"]["state"] == "awaiting_approval"
    assert [(a["action"], a["status"]) for a in record["story"]["actions"]] == [
        ("cordon", "succeeded")
    ]
    first, rest = record["story"]["approvals"]
    assert (first["state"], first["actor"]) == ("approved", "cli:alice")
    assert rest["state"] == "pending" and rest["requested_at"] >= first["decided_at"]
    kinds = [e["kind"] for e in record["timeline"]]
    assert kinds.index("action_succeeded") < len(kinds) - 2, "the cordon is on the record now"

    refused = cli(tmp_path, "approve", "INC-1")
    assert refused.returncode == 2
    assert "two-person rule: cli:alice requested this high-risk action" in refused.stderr

    ok(cli(tmp_path, "approve", "INC-1", user="bob"))
    record = postmortem(tmp_path)
    assert [a["action"] for a in record["story"]["actions"]] == ["cordon", "drain", "open_ticket"]
    assert all(a["status"] == "succeeded" for a in record["story"]["actions"])
    assert [a["state"] for a in record["story"]["approvals"]] == ["approved", "approved"]
    assert sum(1 for e in record["timeline"] if e["kind"] == "action_succeeded") == 3


def test_a_rejected_rest_is_not_run_and_says_so(tmp_path: Path) -> None:
    waiting(tmp_path)
    ok(cli(tmp_path, "approve", "INC-1", "--only", "cordon", user="bob"))
    ok(cli(tmp_path, "reject", "INC-1", "--reason", "let the job checkpoint", user="bob"))
    record = postmortem(tmp_path)
    assert [a["action"] for a in record["story"]["actions"]] == ["cordon"]
    skipped = [e["summary"] for e in record["timeline"] if e["kind"] == "action_skipped"]
    assert skipped == [
        "drain gpu-node-03 (grace_seconds=30): not run (rejected by cli:bob)",
        "open_ticket gpu-node-03 (queue=rma): not run (rejected by cli:bob)",
    ]
    rejected = [e["summary"] for e in record["timeline"] if e["kind"] == "approval_rejected"]
    assert rejected == ["Remaining actions rejected by cli:bob: let the job checkpoint"]


def test_only_an_action_not_awaiting_approval_exits_2(tmp_path: Path) -> None:
    waiting(tmp_path)
    done = cli(tmp_path, "approve", "INC-1", "--only", "reboot", user="bob")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "--only reboot: not among the actions awaiting approval" in line
    assert "(cordon, drain, open_ticket)" in line
