"""The `cluster` / `telemetry` choice and the `kubernetes` settings group.

Covers: `GPU_ONCALL_KUBERNETES__*` reach the group (kubeconfig, context, in_cluster, timeouts,
retries, QPS, markers); `cluster` and `telemetry` accept only their backends, and a bad value
(or a malformed safety limit) exits 2 with one line naming the variable and the valid values (a
real process); a bad marker
prefix is refused; a scenario given outside sim mode is refused before anything is opened,
naming both variables; the markers the node actions write follow the settings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.config import KubernetesSettings, Settings, StorageSettings
from bot.errors import UserInputError
from bot.wiring.runtime import make_markers, open_runtime, simulated


def test_kubernetes_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_ONCALL_CLUSTER", "kubernetes")
    monkeypatch.setenv("GPU_ONCALL_KUBERNETES__KUBECONFIG", "/etc/gpu-oncall/kubeconfig")
    monkeypatch.setenv("GPU_ONCALL_KUBERNETES__CONTEXT", "h100-east")
    monkeypatch.setenv("GPU_ONCALL_KUBERNETES__IN_CLUSTER", "false")
    monkeypatch.setenv("GPU_ONCALL_KUBERNETES__QPS", "5")
    monkeypatch.setenv("GPU_ONCALL_KUBERNETES__PROTECTED_LABEL", "example.com/hands-off")
    settings = Settings()
    k = settings.kubernetes
    assert settings.cluster == "kubernetes" and settings.telemetry == "sim"
    assert k.kubeconfig == Path("/etc/gpu-oncall/kubeconfig") and k.context == "h100-east"
    assert k.in_cluster is False and k.qps == 5.0
    assert make_markers(settings).protected_label == "example.com/hands-off"
    assert simulated(settings)  # telemetry is still sim: the fleet serves it


def test_the_backends_are_validated() -> None:
    with pytest.raises(ValidationError, match="cluster"):
        Settings(cluster="k8s")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="telemetry"):
        Settings(telemetry="thanos")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="marker_prefix"):
        KubernetesSettings(marker_prefix="Not A Prefix/")


@pytest.mark.parametrize(
    ("variable", "value", "valid"),
    [("GPU_ONCALL_CLUSTER", "k8s", "'sim' or 'kubernetes'"),
     ("GPU_ONCALL_TELEMETRY", "thanos", "'sim' or 'prometheus'"),
     ("GPU_ONCALL_POLICY__MAX_UNHEALTHY", "abc", "should match pattern '^\\d+%?$'")],
)
def test_a_bad_setting_exits_2_naming_the_variable(
    tmp_path: Path, variable: str, value: str, valid: str
) -> None:
    env = dict(os.environ) | {variable: value}
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "cluster", "check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0] and valid in lines[0], done.stderr


def test_a_scenario_outside_sim_mode_is_refused_before_anything_opens(
    tmp_path: Path, scenario_dir: Path
) -> None:
    db = tmp_path / "oncall.db"
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{db}"), cluster="kubernetes", telemetry="prometheus"
    )
    assert not simulated(settings)
    with (
        pytest.raises(UserInputError, match="GPU_ONCALL_CLUSTER=kubernetes") as raised,
        open_runtime(settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml"),
    ):
        pass
    assert "GPU_ONCALL_TELEMETRY=prometheus" in str(raised.value)
    assert not db.exists()
