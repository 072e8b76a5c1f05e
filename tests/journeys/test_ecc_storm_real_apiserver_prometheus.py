"""The ECC-storm journey with no simulator in the bot: the REAL kube-apiserver (the session's
control plane, as the bot's own ServiceAccount bound to exactly
deploy/kubernetes/base/clusterrole.yaml) and a REAL Prometheus scraping `gpu-oncall sim serve`
of the same scenario (its node names are the API server's nodes). The CLI runs with
GPU_ONCALL_CLUSTER=kubernetes and GPU_ONCALL_TELEMETRY=prometheus, as on a real cluster.

After bob approves: the node is cordoned with the bot's markers, the plain pod is evicted, the
pod a PodDisruptionBudget protects is kept and named in the drain's recorded result, the
DaemonSet pod is untouched, and no other node is touched. The approval is interrupted (Ctrl-C)
once the actions ran: its verification polls the real Prometheus on the wall clock for minutes
(the storm goes on), and the outcome is read from the incident's record.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from simulator import SCENARIO_DIR, Fleet, load_scenario
from tests.servers.kube_real_world import RealKube
from tests.servers.prometheus import PrometheusServer, ScrapeTarget

SCENARIO = SCENARIO_DIR / "ecc-dbe-storm.yaml"
NODE = "gpu-node-03"
MARKERS = ("gpu-oncall.io/cordoned-by", "gpu-oncall.io/incident")
NS = "ops"


@pytest.fixture
def sim_serve(tmp_path: Path) -> Iterator[str]:
    """`gpu-oncall sim serve` of the scenario on a free port; yields its /metrics URL."""
    env = dict(os.environ) | {"GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'sim.db'}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", "sim", "serve", "--scenario", str(SCENARIO)]
        + ["--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = next((line.split()[1] for line in process.stdout if line.startswith("Serving ")), "")
    try:
        assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.stderr else ""
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)


def _seed(real: RealKube) -> None:
    """The scenario's fleet, plus on NODE a plain pod, a PDB-protected pod (minAvailable 1 of
    1: no disruption allowed) and a DaemonSet pod."""
    real.reset([NS])
    real.seed_from_fleet(
        Fleet.from_scenario(load_scenario(SCENARIO), now=lambda: datetime.now(UTC))
    )
    real.add_pod("plain-0", NS, node=NODE)
    real.add_pod("guarded-0", NS, node=NODE, labels={"app": "guarded"},
                 owner=("ReplicaSet", "guarded-7d9f"))  # fmt: skip
    real.add_pod("node-agent-x", NS, node=NODE, owner=("DaemonSet", "node-agent"))
    real.add_pdb("guarded", NS, match_labels={"app": "guarded"}, min_available=1)


def _pod(real: RealKube, name: str) -> client.V1Pod | None:
    try:
        return real.core.read_namespaced_pod(name, NS)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _approve_until_executed(env: dict[str, str], cwd: Path) -> str:
    """bob approves; the lines up to the execute step's result. The verification after it
    polls the real Prometheus for minutes (wall clock, the DBE storm goes on), so the command
    is interrupted there (Ctrl-C), bounded by a deadline."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", "approve", "INC-1"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + 180
    try:
        while not any("execute" in line for line in seen):
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, "approve ended before executing:\n" + "".join(seen)
            seen.append(line)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        reader.join(timeout=10)
        assert process.stdout is not None
        process.stdout.close()
    assert "Traceback" not in "".join(seen)
    return "".join(seen)


def _drain_reports(value: Any) -> Iterator[dict[str, Any]]:
    """Every drain result recorded in the incident (the timeline's action payloads)."""
    if isinstance(value, dict):
        if {"evicted", "skipped", "blocked"} <= value.keys():
            yield value
        for item in value.values():
            yield from _drain_reports(item)
    elif isinstance(value, list):
        for item in value:
            yield from _drain_reports(item)


def _nodes(real: RealKube) -> dict[str, tuple[bool, dict[str, str]]]:
    return {
        n.metadata.name: (bool(n.spec.unschedulable), dict(n.metadata.annotations or {}))
        for n in real.core.list_node().items
    }


def test_ecc_storm_on_the_real_apiserver_with_prometheus_scraping_sim_serve(
    real_kube: RealKube, sim_serve: str, tmp_path: Path
) -> None:
    _seed(real_kube)
    before = _nodes(real_kube)
    prometheus = PrometheusServer(tmp_path / "prometheus", targets=[ScrapeTarget("sim", sim_serve)])
    with prometheus.started():
        prometheus.wait_for_scrapes(2)
        env = dict(os.environ) | {
            "GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'oncall.db'}",
            "GPU_ONCALL_CLUSTER": "kubernetes",
            "GPU_ONCALL_TELEMETRY": "prometheus",
            "GPU_ONCALL_PROMETHEUS__URL": prometheus.url,
            "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
            "GPU_ONCALL_KUBERNETES__KUBECONFIG": str(real_kube.kubeconfig),
            "GPU_ONCALL_KUBERNETES__IN_CLUSTER": "false",
            "GPU_ONCALL_KUBERNETES__RETRIES": "1",
            # the approved drain runs at once: this journey tests the API's writes, not the
            # drain's wait for a checkpoint (tests/actions/test_drain_after_checkpoint.py)
            "GPU_ONCALL_POLICY__DRAIN_CHECKPOINT_DEADLINE_MINUTES": "0",
        }

        run = subprocess.run(
            [sys.executable, "-m", "bot.cli.main", "run", "ecc-storm", f"node={NODE}"]
            + ["window=30s"],
            cwd=tmp_path,
            env=env | {"GPU_ONCALL_IDENTITY__CLI_USER": "alice"},
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        assert run.returncode == 0, run.stdout + run.stderr[-3000:]
        assert "gpu-oncall approve INC-1" in run.stdout, run.stdout
        assert "Traceback" not in run.stderr
        executed = _approve_until_executed(env | {"GPU_ONCALL_IDENTITY__CLI_USER": "bob"}, tmp_path)

    assert f"{NODE} cordoned" in executed and "1 blocked by a PodDisruptionBudget" in executed
    shown = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "incident", "INC-1", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-3000:]
    (drained,) = {json.dumps(d, sort_keys=True) for d in _drain_reports(json.loads(shown.stdout))}
    report = json.loads(drained)
    assert report["blocked"] == ["guarded-0"]  # kept, and named
    assert "plain-0" in report["evicted"] and "node-agent-x" in report["skipped"]
    node = real_kube.node(NODE)
    assert node["spec"]["unschedulable"] is True
    assert set(MARKERS) <= set(node["metadata"]["annotations"])
    plain = _pod(real_kube, "plain-0")
    assert plain is None or plain.metadata.deletion_timestamp is not None  # evicted
    guarded, agent = _pod(real_kube, "guarded-0"), _pod(real_kube, "node-agent-x")
    assert guarded is not None and guarded.metadata.deletion_timestamp is None
    assert agent is not None and agent.metadata.deletion_timestamp is None
    after = _nodes(real_kube)
    assert {k: v for k, v in after.items() if k != NODE} == {
        k: v for k, v in before.items() if k != NODE
    }
