"""The node agent on real Slurm (integrations/slurm/agent.py): `gpu_reset` as a batch job and
`reboot` as `scontrol reboot`, each inside a maintenance reservation the agent holds on a node
the bot has drained.

Covers: the reset job really runs on the drained node (slurmctld shows it COMPLETED on that
node; the shipped script deploy/slurm/node-agent.sh ran the fake nvidia-smi with `-r -i 5`),
the node is given back drained with the bot's reason and the reservation is gone; a retry with
the same idempotency key finds the job and submits no second one; a job that outlives the
timeout is reported failed, cancelled, and the node given back; the reboot is requested
(slurmctld shows REBOOT_REQUESTED / REBOOT_ISSUED), the fake RebootProgram restarts the node's
slurmd, the node's boot time passes the request and a retry is already done with no second
reboot; a reboot pending past the timeout (the node still runs a job, ASAP waits for it) is
failed and cancelled; a node NHC drained is refused and not touched. Waits use an injectable
clock where the test is the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from integrations.node_agent import AgentRequest
from integrations.slurm import SlurmCluster
from integrations.slurm.agent import SlurmNodeAgent, request_name
from integrations.slurm.records import node_flags
from tests.servers.prometheus import poll
from tests.servers.slurm import SlurmServers

NODE = "gpu-node-03"
SCRIPT = (Path(__file__).parents[2] / "deploy" / "slurm" / "node-agent.sh").read_text()
BOT_REASON = "gpu-oncall: INC-9: XID 79 on GPU 5"


@pytest.fixture
def drained(cluster: SlurmCluster) -> str:
    """NODE drained by the bot for INC-9 (its markers, then its cordon)."""
    cluster.annotate(NODE, {"gpu-oncall.io/cordon-reason": "INC-9: XID 79 on GPU 5"})
    cluster.cordon(NODE)
    return NODE


@pytest.fixture
def fake_smi(slurm: SlurmServers) -> Iterator[Path]:
    """An nvidia-smi that logs its node and arguments to a file (the job runs as root)."""
    log = slurm.workdir / "log" / "resets"
    smi = slurm.workdir / "nvidia-smi"
    smi.write_text(f'#!/bin/bash\necho "$SLURMD_NODENAME $*" >> {log}\n${{SLEEP:-true}}\n')
    smi.chmod(0o755)
    yield log
    log.unlink(missing_ok=True)


def agent(
    cluster: SlurmCluster,
    *,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> SlurmNodeAgent:
    return SlurmNodeAgent(
        cluster,
        script=SCRIPT,
        timeout_seconds=timeout,
        environment=env or {},
        clock=clock,
        sleep=sleep,
        poll_seconds=0.2,
        poll_cap_seconds=1.0,
    )


def reset_request(key: str = "INC-9/act/gpu_reset/gpu-node-03") -> AgentRequest:
    return AgentRequest(node=NODE, action="gpu_reset", idempotency_key=key, gpu="5")


def bot_drained(slurm: SlurmServers) -> bool:
    reason = slurm.run("sinfo", "-h", "-R", "-n", NODE, "-o", "%E").strip()
    return "drain" in slurm.node_state(NODE) and reason == BOT_REASON


def reservations(slurm: SlurmServers) -> str:
    return slurm.run("scontrol", "-o", "show", "reservation", check=False).strip()


def reboots(slurm: SlurmServers) -> list[str]:
    """The nodes the fake RebootProgram has rebooted this session, in order."""
    log = slurm.workdir / "log" / "reboots"
    return log.read_text().split()[1::2] if log.exists() else []


def jobs_named(slurm: SlurmServers, name: str) -> list[str]:
    out = slurm.run("scontrol", "-o", "show", "job", check=False)
    return [line for line in out.splitlines() if f"JobName={name} " in line]


class Ticking:
    """A clock that moves `step` seconds each time it is read (the timeout comes in a few
    polls), and a sleep that really waits a little so slurmctld can move."""

    def __init__(self, step: float) -> None:
        self.now, self.step = time.time(), step

    def clock(self) -> float:
        self.now += self.step
        return self.now

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, 0.3))


def test_gpu_reset_runs_as_a_job_on_the_drained_node_once(
    slurm: SlurmServers, cluster: SlurmCluster, drained: str, fake_smi: Path
) -> None:
    env = {"GPU_ONCALL_NVIDIA_SMI": str(slurm.workdir / "nvidia-smi")}
    answer = agent(cluster, env=env).request(reset_request())
    assert answer.outcome == "changed", answer.detail
    name = request_name(reset_request())
    [job] = jobs_named(slurm, name)
    assert "JobState=COMPLETED" in job and f"NodeList={NODE} " in job
    assert fake_smi.read_text().split() == [NODE, "-r", "-i", "5"]
    assert bot_drained(slurm) and reservations(slurm) == "No reservations in the system"
    assert "gpu-oncall.io/agent-hold" not in cluster.nodes([NODE])[0].annotations

    again = agent(cluster, env=env).request(reset_request())
    assert again.outcome == "already_done", again.detail
    assert len(jobs_named(slurm, name)) == 1 and len(fake_smi.read_text().splitlines()) == 1


def test_gpu_reset_past_the_timeout_fails_cancels_and_gives_the_node_back(
    slurm: SlurmServers, cluster: SlurmCluster, drained: str, fake_smi: Path
) -> None:
    env = {"GPU_ONCALL_NVIDIA_SMI": str(slurm.workdir / "nvidia-smi"), "SLEEP": "sleep 600"}
    ticking = Ticking(step=2.0)
    request = reset_request("INC-9/act/gpu_reset/slow")
    answer = agent(cluster, timeout=20, env=env, clock=ticking.clock, sleep=ticking.sleep).request(
        request
    )
    assert answer.outcome == "failed"
    assert "did not finish within the 20 s timeout" in answer.detail
    assert "was cancelled" in answer.detail
    [job] = jobs_named(slurm, request_name(request))
    job_id = job.split()[0].removeprefix("JobId=")
    poll(lambda: slurm.job_state(job_id) == "GONE", what=f"job {job_id} cancelled")
    assert bot_drained(slurm)


def test_reboot_is_requested_done_once_and_the_node_stays_the_bots(
    slurm: SlurmServers, cluster: SlurmCluster, drained: str
) -> None:
    seen: set[str] = set()

    def watching(seconds: float) -> None:
        seen.update(node_flags(cluster.record(NODE)))
        time.sleep(seconds)

    booted_before, rebooted_before = cluster.record(NODE)["boot_time"], reboots(slurm)
    request = AgentRequest(node=NODE, action="reboot", idempotency_key="INC-9/act/reboot/n3")
    answer = agent(cluster, sleep=watching).request(request)
    assert answer.outcome == "changed", answer.detail
    assert seen & {"REBOOT_REQUESTED", "REBOOT_ISSUED"}
    assert cluster.record(NODE)["boot_time"] > booted_before
    assert reboots(slurm) == [*rebooted_before, NODE]
    assert bot_drained(slurm) and reservations(slurm) == "No reservations in the system"

    again = agent(cluster).request(request)
    assert again.outcome == "already_done", again.detail
    assert reboots(slurm) == [*rebooted_before, NODE]


def test_reboot_still_pending_at_the_timeout_is_failed_and_cancelled(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    job = slurm.submit(node=NODE, name="still-training", gpus=8)  # ASAP waits for it
    rebooted_before = reboots(slurm)
    ticking = Ticking(step=2.0)
    request = AgentRequest(node=NODE, action="reboot", idempotency_key="INC-9/act/reboot/busy")
    answer = agent(cluster, timeout=10, clock=ticking.clock, sleep=ticking.sleep).request(request)
    assert answer.outcome == "failed" and "REBOOT_REQUESTED" in answer.detail
    assert "not done within the 10 s timeout" in answer.detail
    flags = node_flags(cluster.record(NODE))
    assert not {"REBOOT_REQUESTED", "REBOOT_ISSUED"} & set(flags) and "DRAIN" in flags
    assert slurm.job_state(job) == "RUNNING"
    assert reboots(slurm) == rebooted_before


def test_a_node_drained_by_someone_else_is_not_held(
    slurm: SlurmServers, cluster: SlurmCluster, fake_smi: Path
) -> None:
    slurm.drain(NODE, "NHC: check_gpu_ecc failed")
    answer = agent(cluster).request(reset_request("INC-9/act/gpu_reset/nhc"))
    assert answer.outcome == "failed" and "NHC: check_gpu_ecc failed" in answer.detail
    assert reservations(slurm) == "No reservations in the system"
    assert not jobs_named(slurm, request_name(reset_request("INC-9/act/gpu_reset/nhc")))
    assert not fake_smi.exists()
