"""Calls and wall time of SlurmCluster against real Slurm 22.05 daemons on loopback (the tests'
throw-away cluster: munged, slurmctld, 16 slurmd, slurmrestd with JWT), per port call and per
removal step.

Each call runs `--runs` times; writes alternate with their undo (cordon/uncordon, annotate
add/remove). A "removal" is what the bot's actions do for one node of the ECC-storm journey:
the `cordon` action (act-time read, ownership claim in the node comment, DRAIN through scontrol,
`cordoned-at` mark) then the `drain` action (read, requeue of the node's one job through
`scontrol requeue`); between runs the job is resubmitted and the node resumed (not timed).
Counted: REST requests to slurmrestd and scontrol processes.

The node agent (`--agent-runs`, fewer: each waits for Slurm): `gpu_reset` on a node the bot
drained (reservation, drain lifted, the shipped script as a batch job run to completion, drain
given back) and `reboot` (the same hold, `scontrol reboot ASAP`, the fixture's RebootProgram
restarting that node's slurmd, drain given back), each from request to answer.

    python bench/slurm_calls.py --runs 30 --agent-runs 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from common import ROOT, machine, percentile, print_calls, time_calls

sys.path.insert(0, str(ROOT))  # tests.servers.slurm, tests.actions.action_helpers

from bot.actions.registry import default_registry  # noqa: E402
from integrations.node_agent import AgentRequest  # noqa: E402
from integrations.slurm import Labelling, Scontrol, SlurmCluster, SlurmRest  # noqa: E402
from integrations.slurm.agent import SlurmNodeAgent  # noqa: E402
from tests.actions.action_helpers import action_context  # noqa: E402
from tests.servers.slurm import SlurmServers, start_slurm  # noqa: E402

Call = Callable[[SlurmCluster, int], Any]
NODE, BUSY, REMOVED = "gpu-node-03", "gpu-node-01", "gpu-node-07"


def calls(servers: SlurmServers) -> dict[str, Call]:
    since = datetime.now(UTC) - timedelta(hours=1)
    marker = {"gpu-oncall.io/incident": "INC-7"}
    return {
        "nodes(all)": lambda c, i: c.nodes(),
        "nodes([one])": lambda c, i: c.nodes([NODE]),
        "pods_on (1 job)": lambda c, i: c.pods_on(BUSY),
        "events": lambda c, i: c.events(NODE, since=since),
        "cordon/uncordon": lambda c, i: c.cordon(NODE) if i % 2 == 0 else c.uncordon(NODE),
        "annotate add/remove": lambda c, i: c.annotate(
            NODE, marker if i % 2 == 0 else dict.fromkeys(marker)
        ),
        "cordon-again": lambda c, i: c.cordon("gpu-node-05"),
    }


def measure(cluster: SlurmCluster, call: Call, runs: int) -> dict[str, float]:
    counters = {"rest_per_call": lambda: cluster.rest.calls,
                "scontrol_per_call": lambda: cluster.scontrol.calls}  # fmt: skip
    return time_calls(lambda i: call(cluster, i), runs, counters)


def removals(
    servers: SlurmServers, cluster: SlurmCluster, runs: int
) -> dict[str, dict[str, float]]:
    """The cordon and drain actions on a node holding one requeueable job, per run."""
    registry = default_registry()
    steps: dict[str, list[tuple[float, int, int]]] = {"cordon": [], "drain": [], "removal": []}
    for i in range(runs):
        servers.submit(node=REMOVED, name="llm-pretrain", gpus=8)
        ctx = action_context(cluster=cluster, verdict={"summary": "XID 48 on GPU 5"}, key=f"k{i}")
        total = (0.0, 0, 0)
        for action in ("cordon", "drain"):
            rest, cli = cluster.rest.calls, cluster.scontrol.calls
            start = time.perf_counter()
            result = registry.get(action).run(ctx, REMOVED, {})
            took = (time.perf_counter() - start) * 1000
            assert result.outcome == "changed", result
            row = (took, cluster.rest.calls - rest, cluster.scontrol.calls - cli)
            steps[action].append(row)
            total = (total[0] + row[0], total[1] + row[1], total[2] + row[2])
        steps["removal"].append(total)
        servers.reset()
    return {name: summary(rows) for name, rows in steps.items()}


def summary(rows: list[tuple[float, int, int]]) -> dict[str, float]:
    """p50/p99 of (ms, REST, scontrol) rows, and the mean calls per row."""
    return {
        "p50_ms": round(percentile([r[0] for r in rows], 0.50), 1),
        "p99_ms": round(percentile([r[0] for r in rows], 0.99), 1),
        "rest_per_call": sum(r[1] for r in rows) / len(rows),
        "scontrol_per_call": sum(r[2] for r in rows) / len(rows),
    }


def agent_requests(
    servers: SlurmServers, cluster: SlurmCluster, runs: int
) -> dict[str, dict[str, float]]:
    """One gpu_reset and one reboot per run on a node the bot drained, request to answer."""
    smi = servers.workdir / "nvidia-smi"
    smi.write_text("#!/bin/bash\ntrue\n")
    smi.chmod(0o755)
    script = (ROOT / "deploy" / "slurm" / "node-agent.sh").read_text()
    env = {"GPU_ONCALL_NVIDIA_SMI": str(smi)}
    agent = SlurmNodeAgent(cluster, script=script, timeout_seconds=120, environment=env,
                           poll_seconds=0.1, poll_cap_seconds=0.5)  # fmt: skip
    rows: dict[str, list[tuple[float, int, int]]] = {"agent gpu_reset": [], "agent reboot": []}
    for i in range(runs):
        for action in ("gpu_reset", "reboot"):
            cluster.annotate(REMOVED, {"gpu-oncall.io/cordon-reason": f"INC-{i}: XID 79"})
            cluster.cordon(REMOVED)
            rest, cli = cluster.rest.calls, cluster.scontrol.calls
            start = time.perf_counter()
            answer = agent.request(AgentRequest(REMOVED, action, f"INC-{i}/{action}", gpu="5"))
            took = (time.perf_counter() - start) * 1000
            assert answer.outcome == "changed", answer
            rows[f"agent {action}"].append(
                (took, cluster.rest.calls - rest, cluster.scontrol.calls - cli)
            )
            servers.reset()
    return {name: summary(got) for name, got in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--agent-runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    rows: dict[str, dict[str, float]] = {}
    with start_slurm() as servers:
        servers.reset()
        servers.submit(node=BUSY, name="llm-pretrain", gpus=8)
        rest = SlurmRest(httpx.Client(base_url=servers.rest_url, timeout=10), user="root",
                         token=servers.token())  # fmt: skip
        scontrol = Scontrol(environ=servers.env, conf=str(servers.conf))
        cluster = SlurmCluster(rest, scontrol, labelling=Labelling({"rack-": "gpu-oncall.io/rack"}))
        for name, call in calls(servers).items():
            rows[name] = measure(cluster, call, args.runs)
        servers.reset()
        rows |= {f"action {k}": v for k, v in removals(servers, cluster, args.runs).items()}
        rows |= agent_requests(servers, cluster, args.agent_runs)
        cluster.close()
    print_calls(rows, {"rest_per_call": "REST", "scontrol_per_call": "scontrol"})
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "calls": rows}, indent=2))


if __name__ == "__main__":
    main()
