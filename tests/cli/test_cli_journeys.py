"""The `gpu-oncall` command line, run as a real subprocess on a temporary database.

Covers: the demo finishes resolved with culprit GPU/node and MTTR figures; without a terminal
and without --yes the demo stops at the approval and says how to approve; `approve` in a new
process resumes the run (actions once, incident resolved); `incidents --json`; `postmortem`
md and json; `diagnose --json` on a healthy node; bad input exits 2 with a one-line error
(unknown node, unknown incident, malformed scenario, invalid runbook, bad KEY=VALUE);
`runbooks validate` and `runbooks graph`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import SCENARIO_DIR


def cli(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["GPU_ONCALL_STORAGE__URL"] = f"sqlite:///{tmp_path / 'oncall.db'}"
    env["USER"] = "alice"
    env["GPU_ONCALL_IDENTITY__ADMINS"] = '["cli:alice"]'  # `approve --as` acts for others
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args],
        cwd=tmp_path,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_yes_resolves_and_prints_culprit_and_mttr(tmp_path: Path) -> None:
    done = cli(tmp_path, "demo", "--yes")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "GPUEccStorm" in out
    assert "Culprit:     gpu-node-03 GPU 5" in out
    assert "INC-1 is monitoring" in out or "INC-1 is resolved" in out
    assert "Timeline of INC-1 (state: resolved)" in out
    for figure in ("MTTD", "MTTA", "Time to diagnosis", "MTTM", "MTTR"):
        assert figure in out


def test_demo_without_terminal_stops_then_approve_in_new_process(tmp_path: Path) -> None:
    stopped = cli(tmp_path, "demo")
    assert stopped.returncode == 0, stopped.stderr
    assert "the run waits, checkpointed" in stopped.stdout
    assert "gpu-oncall approve INC-1" in stopped.stdout
    listed = json.loads(cli(tmp_path, "incidents", "--json").stdout)
    assert [(i["id"], i["state"]) for i in listed] == [("INC-1", "awaiting_approval")]

    approved = cli(tmp_path, "approve", "INC-1", "--as", "cli:bob")
    assert approved.returncode == 0, approved.stderr
    assert "gpu-node-03 cordoned" in approved.stdout
    assert "verification passed" in approved.stdout
    again = cli(tmp_path, "approve", "INC-1", "--as", "cli:bob")
    assert again.returncode == 2
    assert "no pending approval" in again.stderr

    post = json.loads(cli(tmp_path, "postmortem", "INC-1", "--format", "json").stdout)
    kinds = [e["kind"] for e in post["timeline"]]
    assert kinds.count("action_succeeded") == 3
    assert post["incident"]["state"] == "resolved"
    markdown = cli(tmp_path, "postmortem", "INC-1").stdout
    assert markdown.startswith("# INC-1")
    assert "approval_granted" in markdown


def test_diagnose_healthy_node_json(tmp_path: Path) -> None:
    done = cli(
        tmp_path,
        "diagnose",
        "gpu-node-05",
        "--scenario",
        str(Path(SCENARIO_DIR) / "healthy-node.yaml"),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"]["layer"] == "none"
    assert result["approval"] is None
    assert result["steps"]["fix"]["proposals"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["diagnose", "gpu-node-99"], "unknown node 'gpu-node-99'"),
        (["diagnose", "Bad_Node!"], "invalid node name 'Bad_Node!'"),
        (["postmortem", "INC-404"], "unknown incident 'INC-404'"),
        (["approve", "INC-404"], "no incident or run 'INC-404'"),
        (["run", "ecc-storm", "node"], "input 'node' is not key=value"),
        (["run", "ecc-storm", "node=gpu-node-01", "node=gpu-node-02"], "'node' is given twice"),
        (["run", "nope"], "unknown runbook 'nope'"),
        (
            ["run", "node-storm", "nodes=gpu-node-01,Bad_Node!"],
            "runbook 'node-storm': input 'nodes': invalid node name 'Bad_Node!'",
        ),
        (["run", "node-storm", "nodes=gpu-node-[09-03]"], "node range 'gpu-node-[09-03]' goes"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = cli(tmp_path, *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_malformed_scenario_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: gpu-oncall/v1\nkind: Scenario\nmetadata: {name: x}\nfleet: {nodes: 4}\n"
        "faults: [{kind: ecc_storm, node: gpu-node-01}]\ntrigger: {command: diagnose gpu-node-01}\n"
    )
    done = cli(tmp_path, "diagnose", "gpu-node-01", "--scenario", str(bad))
    assert done.returncode == 2
    assert "bad.yaml" in done.stderr and "faults.0.kind" in done.stderr


def test_runbooks_validate_reports_each_invalid_file(tmp_path: Path) -> None:
    assert cli(tmp_path, "runbooks", "validate").returncode == 0
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: gpu-oncall/v1\nkind: Runbook\nmetadata: {name: broken}\n"
        "inputs: {node: {type: node}}\n"
        "steps:\n  - {id: dbe, signal: gpu.ecc.dbe}\n"
        "  - {id: hw, check: 'dbe.max > 0.0', layer: gpu_hardware, finding: x}\n"
    )
    done = cli(tmp_path, "runbooks", "validate", str(broken))
    assert done.returncode == 2
    assert "step 'dbe': field 'signal': unknown signal 'gpu.ecc.dbe'" in done.stdout


def test_runbooks_graph_prints_mermaid(tmp_path: Path) -> None:
    done = cli(tmp_path, "runbooks", "graph", "ecc-storm")
    assert done.returncode == 0
    assert done.stdout.startswith("flowchart TD")
    assert "dbe --> dbe_storm" in done.stdout
