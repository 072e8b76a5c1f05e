"""Node events are read beside a silent detector (issue 22 item 2), on the REAL kube-apiserver.

dcgm-exporter on gpu-node-05 went quiet 31 minutes before GPU 6 there fell off the bus. The bot
may not read that node's kernel log (no kubelet answers the node-log query, as on most
clusters), the device plugin runs with its health checks off (allocatable stays 8), and
node-problem-detector's XID rule (DOMAIN.md §7) turned the `NVRM: Xid ... 79` kernel line into
a Warning event on the Node. That event, created through the API server, is the only source
of the fact: `nccl-hang` must blame the lost GPU (gpu_hardware, cordon + drain), not the
silent exporter (telemetry, a ticket).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from simulator import Fleet, load_scenario
from tests.servers.kube_real_world import RealKube

SCENARIO = (
    Path(__file__).resolve().parents[2]
    / "simulator/scenarios/combined/hang-exporter-down-gpu-lost-in-node-events.yaml"
)
NODE = "gpu-node-05"


def test_a_gpu_lost_behind_a_silent_exporter_is_found_in_the_nodes_events(
    real_kube: RealKube, tmp_path: Path
) -> None:
    real_kube.reset()
    fleet = Fleet.from_scenario(load_scenario(SCENARIO), now=lambda: datetime.now(UTC))
    real_kube.seed_from_fleet(fleet)
    listed = real_kube.core.list_event_for_all_namespaces(
        field_selector=f"involvedObject.kind=Node,involvedObject.name={NODE}"
    ).items
    assert any("NVRM: Xid" in (e.message or "") and ": 79," in e.message for e in listed)

    env = real_kube.cli_env(tmp_path / "oncall.db")
    run = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "run", "nccl-hang", "job=llm-pretrain",
         "--scenario", str(SCENARIO), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    verdict = json.loads(run.stdout)["verdict"]
    assert (verdict["layer"], verdict["culprit_nodes"]) == ("gpu_hardware", [NODE])
    assert verdict["mechanism"] == "gpu_lost"
    deciding = verdict["findings"][0]
    assert deciding["check_id"] == "gpu_lost_in_events"
    assert deciding["evidence"][0]["source"] == "silent_events"
    assert ": 79, GPU has fallen off the bus" in deciding["evidence"][0]["value"]
    assert [f["layer"] for f in verdict["side_findings"]] == ["telemetry"]  # a note, not the cause
    assert any("kernel log unavailable" in d for d in verdict["detectors"])
