"""The ECC-storm journey from the CLI against the REAL kube-apiserver (the session's control
plane), as the bot's own ServiceAccount bound to exactly deploy/kubernetes/base/clusterrole.yaml;
telemetry from the simulated fleet of the same scenario (the fleet's nodes, pods and events are
written into the API server first).

It is the journey a new user runs on a real cluster, and it found three faults, one test each:
- no kubelet serves the node-log query (as on most clusters: NodeLogQuery is off by default):
  the run used to exit 2 with a traceback; now the kernel log is an unavailable input, the
  verdict says why, the XID gauge carries the fact, and the run reaches its approval;
- with `pods/eviction create` missing, the run used to exit 0 leaving the node cordoned, not
  drained, the incident `triaging` and "no action was carried out"; now it exits 1, says what
  was done and what was not, and the incident is `mitigating`;
- a second run of the same incident opened a second RMA ticket; now it finds the first.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from simulator import SCENARIO_DIR, Fleet, load_scenario
from tests.servers.kube_real_world import RealKube

SCENARIO = SCENARIO_DIR / "ecc-dbe-storm.yaml"
NODE = "gpu-node-03"
MARKERS = ("gpu-oncall.io/cordoned-by", "gpu-oncall.io/incident")


@dataclass
class Cli:
    env: dict[str, str]
    cwd: Path

    def __call__(self, *args: str, user: str = "alice") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli.main", *args],
            cwd=self.cwd,
            env=self.env | {"GPU_ONCALL_IDENTITY__CLI_USER": user},
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture
def cli(real_kube: RealKube, tmp_path: Path) -> Iterator[Cli]:
    real_kube.reset()
    fleet = Fleet.from_scenario(load_scenario(SCENARIO), now=lambda: datetime.now(UTC))
    real_kube.seed_from_fleet(fleet)
    env = real_kube.cli_env(tmp_path / "oncall.db")
    yield Cli(env, tmp_path)


def _start_and_approve(cli: Cli) -> tuple[subprocess.CompletedProcess[str], str]:
    """alice runs ecc-storm on the node (it waits: no terminal), bob approves."""
    run = cli("run", "ecc-storm", f"node={NODE}", "--scenario", str(SCENARIO))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "gpu-oncall approve INC-1" in run.stdout, run.stdout
    return cli("approve", "INC-1", user="bob"), run.stdout


def test_a_kubelet_without_node_log_query_is_an_unavailable_input_not_a_crash(
    cli: Cli, real_kube: RealKube
) -> None:
    run = cli("run", "ecc-storm", f"node={NODE}", "--scenario", str(SCENARIO), "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert "kernel log unavailable: the kubelet's node-log query" in run.stdout
    assert "rely on the XID gauge" in run.stdout
    assert '"layer": "gpu_hardware"' in run.stdout  # the DBE and XID gauges still decide

    diagnose = cli("diagnose", NODE, "--scenario", str(SCENARIO))
    assert diagnose.returncode == 0, diagnose.stderr[-3000:]
    assert "Traceback" not in diagnose.stderr
    assert "kernel log unavailable" in diagnose.stdout


def test_a_refused_eviction_exits_1_and_says_what_was_done_and_what_was_not(
    cli: Cli, real_kube: RealKube
) -> None:
    real_kube.deny("create", "pods", subresource="eviction")
    approve, _ = _start_and_approve(cli)
    out = approve.stdout
    assert approve.returncode == 1, out + approve.stderr
    assert "Acted, not fully: done:" in out and f"{NODE} cordoned" in out
    assert "not done:" in out and "may not create pods/eviction" in out
    assert "no action was carried out" not in out
    assert "INC-1 is mitigating" in out
    node = real_kube.node(NODE)
    assert node["spec"]["unschedulable"] is True
    assert set(MARKERS) <= set(node["metadata"]["annotations"])
    pods = real_kube.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}")
    assert pods.items and all(p.metadata.deletion_timestamp is None for p in pods.items)


def test_a_second_run_of_the_incident_finds_its_ticket(cli: Cli, real_kube: RealKube) -> None:
    first, _ = _start_and_approve(cli)
    assert first.returncode == 0, first.stdout + first.stderr
    opened = [line for line in first.stdout.splitlines() if "opened rma ticket" in line]
    assert len(opened) == 1, first.stdout
    ticket = opened[0].split("opened rma ticket ")[1].split()[0]

    again = cli("run", "ecc-storm", f"node={NODE}", "--scenario", str(SCENARIO))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "INC-1" in again.stdout  # the same incident, run again
    second = cli("approve", "INC-1", user="bob")
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"already done for INC-1: opened rma ticket {ticket}" in second.stdout
    assert "opened rma ticket" not in second.stdout.replace(
        f"already done for INC-1: opened rma ticket {ticket}", ""
    )
