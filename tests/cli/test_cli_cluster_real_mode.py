"""The CLI pointed at a real cluster and a real Prometheus (GPU_ONCALL_CLUSTER=kubernetes,
GPU_ONCALL_TELEMETRY=prometheus), as real processes: the fake Kubernetes API on 127.0.0.1
(seeded from the ECC-storm scenario's fleet) through a kubeconfig, and a Prometheus that is
not running.

Covers: `diagnose NODE` needs no scenario, reads the node, its pods, events and kernel log from
the API (and never writes), reports the Prometheus signals as missing, and the process never
loads any `simulator` module; `--scenario` outside sim mode exits 2 with one line and
sends nothing to the API; `demo` outside sim mode exits 2 pointing at `serve`; `cluster check`
in sim mode says the simulated cluster grants everything, and against the API lists what the
identity holds, exits 1 naming the missing verb/resource and the ClusterRole file (also as
JSON), and exits 2 when the kubeconfig does not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from servers.prometheus import free_port

from simulator import SCENARIO_DIR, Fleet, load_scenario
from tests.servers.fake_kube import FakeKube, start_fake_kube

SCENARIO = SCENARIO_DIR / "ecc-dbe-storm.yaml"
NODE = "gpu-node-03"
#: Runs the CLI in this process, then reports which simulator modules were ever imported.
PROBE = (
    "import json, sys\n"
    "from bot.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "sim = sorted(m for m in sys.modules if m.split('.')[:2] == ['integrations', 'sim'])\n"
    "sys.stderr.write('SIM-MODULES ' + json.dumps(sim) + '\\n')\n"
    "raise SystemExit(code)\n"
)


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKube]:
    fleet = Fleet.from_scenario(load_scenario(SCENARIO), now=lambda: datetime.now(UTC))
    with start_fake_kube() as fake:
        fake.seed_from_fleet(fleet)
        fake.write_kubeconfig(tmp_path / "kubeconfig")
        yield fake


def real_env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ) | {
        "GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'oncall.db'}",
        "GPU_ONCALL_CLUSTER": "kubernetes",
        "GPU_ONCALL_TELEMETRY": "prometheus",
        "GPU_ONCALL_PROMETHEUS__URL": f"http://127.0.0.1:{free_port()}",
        "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
        "GPU_ONCALL_KUBERNETES__KUBECONFIG": str(tmp_path / "kubeconfig"),
        "GPU_ONCALL_KUBERNETES__IN_CLUSTER": "false",
        "GPU_ONCALL_KUBERNETES__RETRIES": "0",
    }


def run(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def sim_modules(done: subprocess.CompletedProcess[str]) -> list[str]:
    line = next(x for x in done.stderr.splitlines() if x.startswith("SIM-MODULES "))
    return list(json.loads(line.removeprefix("SIM-MODULES ")))


def test_diagnose_reads_the_real_api_and_never_loads_the_simulator(
    tmp_path: Path, kube: FakeKube
) -> None:
    done = run(tmp_path, "diagnose", NODE, "--json", env=real_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sim_modules(done) == []
    outcome = json.loads(done.stdout)
    assert outcome["verdict"]["missing_signals"]  # Prometheus is down: absence is data
    paths = [r.path for r in kube.sent("GET")]
    assert f"/api/v1/nodes/{NODE}" in paths
    assert any(p == "/api/v1/pods" for p in paths)  # pods on the node, all namespaces
    assert any(p.startswith(f"/api/v1/nodes/{NODE}/proxy/logs") for p in paths)
    assert [r for r in kube.requests if r.method != "GET"] == []  # diagnose never writes
    assert not (tmp_path / "oncall.sim-state.json").exists()


def test_a_scenario_outside_sim_mode_exits_2_and_sends_nothing(
    tmp_path: Path, kube: FakeKube
) -> None:
    args = ("run", "ecc-storm", f"node={NODE}", "--scenario", str(SCENARIO))
    done = run(tmp_path, *args, env=real_env(tmp_path))
    assert done.returncode == 2
    errors = [x for x in done.stderr.splitlines() if not x.startswith("SIM-MODULES ")]
    assert len(errors) == 1 and "--scenario" in errors[0] and "GPU_ONCALL_CLUSTER" in errors[0]
    assert kube.requests == []
    demo = run(tmp_path, "demo", "--yes", env=real_env(tmp_path))
    assert demo.returncode == 2 and "gpu-oncall serve" in demo.stderr
    assert sim_modules(demo) == []


def test_cluster_check_in_sim_mode_grants_everything(tmp_path: Path) -> None:
    env = dict(os.environ) | {"GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'o.db'}"}
    done = run(tmp_path, "cluster", "check", env=env)
    assert done.returncode == 0, done.stderr
    assert "Simulated cluster" in done.stdout and "permissions granted" in done.stdout


def test_cluster_check_lists_what_the_identity_holds(tmp_path: Path, kube: FakeKube) -> None:
    done = run(tmp_path, "cluster", "check", env=real_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "permissions granted" in done.stdout
    reviews = kube.sent("POST", path="selfsubjectaccessreviews")
    assert reviews and all(
        r.body["spec"]["resourceAttributes"]["verb"] for r in reviews
    )  # one review per permission, each naming its verb
    assert sim_modules(done) == []


def test_cluster_check_exits_1_naming_the_missing_permission(
    tmp_path: Path, kube: FakeKube
) -> None:
    kube.deny("create", "pods", subresource="eviction")
    done = run(tmp_path, "cluster", "check", env=real_env(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "create pods/eviction" in done.stdout
    assert "deploy/kubernetes/base/clusterrole.yaml" in done.stdout
    as_json = run(tmp_path, "cluster", "check", "--json", env=real_env(tmp_path))
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and report["missing"] == ["create pods/eviction"]


def test_cluster_check_with_a_missing_kubeconfig_exits_2(tmp_path: Path) -> None:
    env = real_env(tmp_path) | {"GPU_ONCALL_KUBERNETES__KUBECONFIG": str(tmp_path / "nope")}
    done = run(tmp_path, "cluster", "check", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [x for x in done.stderr.splitlines() if not x.startswith("SIM-MODULES ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
