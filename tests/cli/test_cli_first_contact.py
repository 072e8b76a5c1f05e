"""A new user's first contact with the command line, as real subprocesses: a mistyped node and
a solo operator under the two-person rule.

Covers: `diagnose` of a node the fleet does not have exits 2 with one line naming the closest
nodes, and no incident exists afterwards (none to clutter `incidents` or MTTR); the same for
`run RUNBOOK node=...`; a solo operator's `diagnose` without a terminal is told that another
approver must approve, and the refusal of their own `approve` names who else may approve and
the setting that changes the rule; with the rule turned off by that setting, the same person's
`approve` goes through.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from simulator import SCENARIO_DIR
from tests.cli.cli_process import run_cli

SCENARIO = str(Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml")


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    who = {"USER": "alice", "LOGNAME": "alice", "GPU_ONCALL_IDENTITY__CLI_USER": None}
    return run_cli(tmp_path, *args, env=who | env)


def incidents(tmp_path: Path) -> list[dict[str, object]]:
    listed = cli(tmp_path, "incidents", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


@pytest.mark.parametrize(
    "args",
    [
        ["diagnose", "gpu-node-3"],
        ["run", "ecc-storm", "node=gpu-node-3"],
    ],
)
def test_a_mistyped_node_is_refused_before_any_incident_exists(
    tmp_path: Path, args: list[str]
) -> None:
    done = cli(tmp_path, *args)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "unknown node 'gpu-node-3'" in line
    assert "closest: gpu-node-03" in line
    assert "Traceback" not in done.stderr
    assert incidents(tmp_path) == []


def test_a_solo_operator_is_told_the_way(tmp_path: Path) -> None:
    waiting = cli(tmp_path, "diagnose", "gpu-node-03", "--scenario", SCENARIO)
    assert waiting.returncode == 0, waiting.stderr
    assert "by another approver: cli:alice requested it" in waiting.stdout
    assert "GPU_ONCALL_POLICY__TWO_PERSON_RISKS" in waiting.stdout

    refused = cli(tmp_path, "approve", "INC-1")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "who else may approve: anyone but cli:alice" in line
    assert "GPU_ONCALL_POLICY__TWO_PERSON_RISKS" in line

    solo = cli(tmp_path, "approve", "INC-1", GPU_ONCALL_POLICY__TWO_PERSON_RISKS="[]")
    assert solo.returncode == 0, solo.stderr
    assert "gpu-node-03 cordoned" in solo.stdout
