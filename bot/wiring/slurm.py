"""Settings -> SlurmCluster: the Slurm half of the composition root (`wiring.make_cluster`
calls it when `cluster: slurm`). Plain constructor arguments go down to `integrations.slurm`,
which never reads settings itself."""

from __future__ import annotations

import httpx

from bot.config import Settings
from bot.errors import UserInputError
from integrations.slurm import (
    SCRIPT_FILE,
    Labelling,
    NodeTurns,
    Scontrol,
    SlurmCluster,
    SlurmNodeAgent,
    SlurmRest,
    check_turns_file,
)


def make_slurm_cluster(settings: Settings) -> SlurmCluster:
    """slurmrestd at `slurm.url` with the operator token, and `scontrol` with its own
    environment minus SLURM_JWT. The REST version is detected on first use."""
    s = settings.slurm
    if s.token is None:
        raise UserInputError(
            "GPU_ONCALL_CLUSTER=slurm needs GPU_ONCALL_SLURM__TOKEN: a JWT for an operator "
            "(`scontrol token username=<user> lifespan=<seconds>` as root); docs/slurm.md"
        )
    timeout = s.timeout_seconds or settings.timeouts.http_seconds
    http = httpx.Client(base_url=s.url, timeout=timeout)
    rest = SlurmRest(http, user=s.user, token=s.token.get_secret_value(), retries=s.retries)
    scontrol = Scontrol(
        s.scontrol, conf=str(s.conf) if s.conf else None, timeout_seconds=timeout * 4
    )
    labelling = Labelling(
        domain_features=dict(s.domain_features),
        reason_prefix=s.reason_prefix,
        markers_prefix=settings.kubernetes.marker_prefix,
    )
    if s.turns_file is not None and (why := check_turns_file(s.turns_file)):
        raise UserInputError(
            f"{why}: GPU_ONCALL_SLURM__TURNS_FILE must name a file every bot process of this "
            "host can open for writing (docs/slurm.md, \"Reads of one node take turns\")"
        )
    turns = NodeTurns(s.url, path=s.turns_file)
    return SlurmCluster(rest, scontrol, labelling=labelling, drain_mode=s.drain_mode, turns=turns)


def make_slurm_node_agent(settings: Settings) -> SlurmNodeAgent:
    """`agent.mode: job` on Slurm: `gpu_reset` as a batch job from `slurm.agent_script`,
    `reboot` as `scontrol reboot` (docs/slurm.md "Node agent"). Its own SlurmCluster (the
    same settings), so the action's cluster stays the port's."""
    where = f"slurm.agent_script (GPU_ONCALL_SLURM__AGENT_SCRIPT, shipped as {SCRIPT_FILE})"
    try:
        script = settings.slurm.agent_script.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserInputError(
            f"{where}: cannot read {settings.slurm.agent_script}: {exc.strerror}"
        ) from exc
    try:
        return SlurmNodeAgent(
            make_slurm_cluster(settings),
            script=script,
            timeout_seconds=settings.agent.timeout_seconds,
            environment=settings.slurm.agent_environment,
        )
    except ValueError as exc:
        raise UserInputError(f"{where}: {exc}") from exc
