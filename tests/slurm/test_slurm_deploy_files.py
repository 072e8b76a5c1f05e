"""deploy/slurm/: the example environment file configures the Slurm backend with settings that
exist, and the systemd unit runs `cluster check` before `serve`, never sets SLURM_JWT, and reads
that file.

Covers: every `GPU_ONCALL_*` variable in gpu-oncall.env names a real setting (pydantic-settings
ignores unknown ones silently, so a typo would otherwise go unnoticed); loading the file gives
cluster=slurm with a secret token; the unit's ExecStartPre/ExecStart/EnvironmentFile lines;
`agent.mode: job` on Slurm builds the Slurm batch-job agent from the shipped script, and an
unreadable or shebang-less script stops start-up naming the setting.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from bot.config import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "slurm"


def variables() -> dict[str, str]:
    pairs = {}
    for line in (DEPLOY / "gpu-oncall.env").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            pairs[name.strip()] = value.strip()
    return pairs


def known_variables() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        group = field.annotation
        if isinstance(group, type) and issubclass(group, BaseModel):
            names |= {f"GPU_ONCALL_{name.upper()}__{sub.upper()}" for sub in group.model_fields}
        else:
            names.add(f"GPU_ONCALL_{name.upper()}")
    return names


def test_every_variable_in_the_example_is_a_setting() -> None:
    unknown = set(variables()) - known_variables()
    assert not unknown, unknown


def test_the_example_configures_slurm_with_a_secret_token() -> None:
    settings = Settings(_env_file=DEPLOY / "gpu-oncall.env")  # type: ignore[call-arg]
    assert settings.cluster == "slurm" and settings.slurm.drain_mode == "requeue"
    assert settings.slurm.token is not None and "replace" not in repr(settings.slurm)
    assert settings.policy.pool_label == "slurm.schedmd.com/partition"


def test_the_unit_checks_the_cluster_before_serving_and_never_sets_slurm_jwt() -> None:
    unit = (DEPLOY / "gpu-oncall.service").read_text().splitlines()
    assert "EnvironmentFile=/etc/gpu-oncall/gpu-oncall.env" in unit
    assert "ExecStartPre=/opt/gpu-oncall/bin/gpu-oncall cluster check" in unit
    assert "ExecStart=/opt/gpu-oncall/bin/gpu-oncall serve" in unit
    assert "UnsetEnvironment=SLURM_JWT" in unit
    assert not any(line.startswith("Environment=SLURM_JWT") for line in unit)


def test_agent_mode_job_on_slurm_is_the_slurm_agent_with_the_shipped_script(
    tmp_path: Path,
) -> None:
    from bot.config import AgentSettings, SlurmSettings
    from bot.errors import UserInputError
    from bot.wiring.runtime import make_node_agent
    from integrations.slurm.agent import SlurmNodeAgent

    def settings(script: Path) -> Settings:
        slurm = SlurmSettings(token="t", agent_script=script)  # type: ignore[arg-type]
        return Settings(cluster="slurm", agent=AgentSettings(mode="job"), slurm=slurm)

    agent = make_node_agent(settings(DEPLOY / "node-agent.sh"))
    assert isinstance(agent, SlurmNodeAgent) and agent.script.startswith("#!/bin/bash")
    with pytest.raises(UserInputError, match=r"slurm.agent_script .*cannot read"):
        make_node_agent(settings(tmp_path / "missing.sh"))
    (tmp_path / "plain.sh").write_text("nvidia-smi -r\n")
    with pytest.raises(UserInputError, match="must start with '#!'"):
        make_node_agent(settings(tmp_path / "plain.sh"))
