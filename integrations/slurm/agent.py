"""The node agent on Slurm: `gpu_reset` as a batch job pinned to the node, `reboot` as
`scontrol reboot ASAP`, both inside a maintenance reservation the bot holds on the node.

Why the reservation: the bot drains a node before it resets or reboots it, and Slurm starts no
job on a DRAINED node (measured on 22.05: `PENDING (ReqNodeNotAvail)`, even as root in a
`flags=maint,ignore_jobs` reservation); and a reboot ends with the node's drain cleared (22.05's
`nextstate=` takes only RESUME or DOWN). So the agent first reserves the node for the bot's
Slurm user (`gpu-oncall-<action>-<hash>`, `flags=maint,ignore_jobs`, for the agent's timeout):
nobody else's job can start there. Then it lifts the drain (`RESUME`: `UNDRAIN` would wait for
the node to register again) and submits the reset job into the reservation (one node,
exclusive, no requeue: the reservation is the node list, since v0.0.38's job properties have
none; the script is deploy/slurm/node-agent.sh), or asks for the reboot (`nextstate=RESUME`).
When it has finished, the agent drains the node again with the reason it had (the bot's own, so
ownership is unchanged) and deletes the reservation. While it holds the node, its marker in the
node comment (`<prefix>/agent-hold`) keeps that reason, and a retry after a crash gives the node
back the same way; the action returns only after the node is drained again, so the bot's later
steps never see the window.

Idempotency: one job, one reboot, one reservation per request. The job's name and the
reservation's name derive from the idempotency key and the job's comment carries the key, so a
retry finds the job (`GET jobs`) and waits for it instead of submitting a second; a retried
reboot finds its request time in the node's markers and waits for the node's boot time to pass
it. Timeouts: the job's time limit and the wait are the agent's timeout (`agent.timeout_seconds`);
a wait that runs out answers `failed` naming what was still pending, cancels the job, and gives
the node back drained. A node drained by someone else is refused (coexistence), never held.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from integrations.errors import ClusterError
from integrations.names import check_node_name
from integrations.node_agent import AgentRequest, AgentResult, NodeAgentError
from integrations.slurm.cluster import SlurmCluster
from integrations.slurm.records import epoch, job_state, node_flags, parse_markers
from integrations.throttling import backoff_delay

REBOOT_FLAGS = frozenset({"REBOOT_REQUESTED", "REBOOT_ISSUED"})
JOB_DONE = "COMPLETED"
JOB_ENDED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
    }
)
SCRIPT_FILE = "deploy/slurm/node-agent.sh"


@dataclass(frozen=True)
class JobSpec:
    """What the reset job is, whatever the REST version."""

    name: str
    node: str
    partition: str
    comment: str
    minutes: int
    environment: Mapping[str, str]


def submit_body(version: str, script: str, spec: JobSpec) -> dict[str, Any]:
    """The `POST job/submit` body in the served version's shape. v0.0.37/38 (Slurm 22.05,
    tested on the real daemons): `{"script", "job": {...}}` with an environment mapping, minutes
    as a number and no node list (the reservation is the node list). v0.0.40-42 (Slurm 24.11,
    from slurmrestd's published OpenAPI; no 24.11 daemon here): the script inside `job`, the
    environment as `K=V` strings, `time_limit` as `{set, infinite, number}`, `required_nodes`,
    and `shared: ["none"]` for exclusive."""
    common: dict[str, Any] = {
        "name": spec.name,
        "comment": spec.comment,
        "partition": spec.partition,
        "reservation": spec.name,
        "requeue": False,
        "current_working_directory": "/tmp",
        "standard_output": "/dev/null",
    }
    if int(version.rsplit(".", 1)[1]) < 40:
        job = common | {
            "nodes": [1, 1],
            "exclusive": "exclusive",
            "time_limit": spec.minutes,
            "environment": dict(spec.environment),
        }
        return {"script": script, "job": job}
    job = common | {
        "script": script,
        "required_nodes": [spec.node],
        "minimum_nodes": 1,
        "maximum_nodes": 1,
        "shared": ["none"],
        "time_limit": {"set": True, "infinite": False, "number": spec.minutes},
        "environment": [f"{k}={v}" for k, v in spec.environment.items()],
    }
    return {"job": job}


def _comment(job: Mapping[str, Any]) -> str:
    """A job's comment: a string (22.05) or `{administrator, job, system}` (24.11)."""
    comment = job.get("comment")
    return str(comment.get("job") or "") if isinstance(comment, Mapping) else str(comment or "")


@dataclass(frozen=True)
class Held:
    """The reservation the agent holds and the drain reason it gives back."""

    reservation: str
    reason: str


def request_name(request: AgentRequest) -> str:
    """`gpu-oncall-<action>-<12 hex of the idempotency key>`: the same request, the same job
    name and reservation."""
    digest = hashlib.sha256(request.idempotency_key.encode()).hexdigest()[:12]
    return f"gpu-oncall-{request.action.replace('_', '-')}-{digest}"


class SlurmNodeAgent:
    """The NodeAgent port on Slurm, through the SlurmCluster's REST client and scontrol."""

    def __init__(
        self,
        cluster: SlurmCluster,
        *,
        script: str,
        timeout_seconds: float,
        environment: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        poll_seconds: float = 1.0,
        poll_cap_seconds: float = 15.0,
    ) -> None:
        if not script.startswith("#!"):
            raise ValueError(f"the node agent script ({SCRIPT_FILE}) must start with '#!'")
        self.cluster, self.script, self.timeout = cluster, script, timeout_seconds
        self.environment = dict(environment or {})
        self._clock, self._sleep = clock, sleep
        self._poll, self._cap = poll_seconds, poll_cap_seconds

    @property
    def _markers_key(self) -> str:
        return f"{self.cluster.labelling.markers_prefix}/agent-hold"

    def request(self, request: AgentRequest) -> AgentResult:
        node = check_node_name(request.node)
        try:
            if request.action == "gpu_reset":
                return self._reset(node, request)
            if request.action == "reboot":
                return self._reboot(node, request)
        except ClusterError as exc:
            raise NodeAgentError(f"{request.action} of {node} on Slurm: {exc}") from exc
        raise NodeAgentError(f"the Slurm node agent does not run '{request.action}'")

    # --- gpu_reset: a batch job in the reservation ---------------------------------------

    def _reset(self, node: str, request: AgentRequest) -> AgentResult:
        name = request_name(request)
        job = self._find_job(name, request.idempotency_key)
        if job is not None and job_state(job) == JOB_DONE:
            self._give_back(node, name)
            return AgentResult("already_done", f"Slurm job {job['job_id']} ({name}) had completed")
        refusal = self._foreign_drain(node)
        if refusal:
            return AgentResult("failed", refusal)
        with self._hold(node, name, undrain=True):
            deadline = self._clock() + self.timeout
            if job is None:
                raw = self._responding(node, deadline)
                if raw is None:
                    return AgentResult(
                        "failed",
                        f"{node} did not answer slurmctld within the {self.timeout:g} s timeout "
                        "(agent.timeout_seconds) after its drain was lifted; no job was submitted",
                    )
                job_id = self._submit(node, name, request, _partition(raw))
            else:
                job_id = str(job["job_id"])
            state, detail = self._wait_job(job_id, deadline)
            if state not in JOB_ENDED:
                self.cluster.cancel_job(job_id)
        where = f"Slurm job {job_id} ({name}) on {node}"
        if state == JOB_DONE:
            return AgentResult("changed", f"{where} completed")
        if state in JOB_ENDED:
            return AgentResult("failed", f"{where} ended {state}{detail}")
        return AgentResult(
            "failed",
            f"{where} did not finish within the {self.timeout:g} s timeout "
            f"(agent.timeout_seconds; it was {state}{detail}) and was cancelled",
        )

    def _submit(self, node: str, name: str, request: AgentRequest, partition: str) -> str:
        env = (
            {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
            | self.environment
            | {
                "GPU_ONCALL_ACTION": request.action,
                "GPU_ONCALL_NODE": node,
                "GPU_ONCALL_GPU": request.gpu or "",
            }
        )
        spec = JobSpec(
            name=name,
            node=node,
            partition=partition,
            comment=request.idempotency_key,
            minutes=max(1, math.ceil(self.timeout / 60)),
            environment=env,
        )
        body = submit_body(self.cluster.rest.api.version, self.script, spec)
        answer = self.cluster.rest.slurm("POST", "job/submit", what=f"submit {name}", json=body)
        job_id = answer.get("job_id")
        if job_id is None:
            raise NodeAgentError(f"slurmrestd accepted {name} but named no job id: {answer}")
        return str(job_id)

    def _find_job(self, name: str, key: str) -> dict[str, Any] | None:
        """The job of this request, by name and comment (the idempotency key); newest first."""
        jobs = self.cluster.rest.slurm("GET", "jobs", what="list jobs").get("jobs") or []
        mine = [dict(j) for j in jobs if j.get("name") == name and _comment(j) == key]
        return max(mine, key=lambda j: int(j.get("job_id", 0)), default=None)

    def _responding(self, node: str, deadline: float) -> dict[str, Any] | None:
        """The node once slurmctld hears from it again (a lifted drain waits for the next
        ping: NOT_RESPONDING until then, and Slurm refuses a job for it), or None at the
        deadline."""
        attempt = 0
        while True:
            raw = self.cluster.record(node)
            if "NOT_RESPONDING" not in node_flags(raw):
                return raw
            if self._clock() >= deadline:
                return None
            self._pause(deadline, attempt)
            attempt += 1

    def _wait_job(self, job_id: str, deadline: float) -> tuple[str, str]:
        attempt = 0
        while True:
            body = self.cluster.rest.slurm("GET", f"job/{job_id}", what=f"read job {job_id}")
            raw = (body.get("jobs") or [{}])[0]
            state = job_state(raw)
            if state in JOB_ENDED or self._clock() >= deadline:
                exit_code = raw.get("exit_code")
                reason = str(raw.get("state_reason") or "")
                detail = f" (exit code {exit_code})" if state in JOB_ENDED else ""
                detail += f" ({reason})" if reason and reason != "None" else ""
                return state, detail
            self._pause(deadline, attempt)
            attempt += 1

    # --- reboot: scontrol reboot ASAP in the reservation -------------------------------

    def _reboot(self, node: str, request: AgentRequest) -> AgentResult:
        name = request_name(request)
        raw = self.cluster.record(node)
        markers = parse_markers(str(raw.get("comment") or ""))
        asked = _asked_at(markers.get(f"{self.cluster.labelling.markers_prefix}/{name}"))
        booted = epoch(raw.get("boot_time"))
        if asked is not None and booted is not None and booted.timestamp() >= asked:
            self._give_back(node, name)
            return AgentResult("already_done", f"{node} had rebooted ({name})")
        refusal = self._foreign_drain(node)
        if refusal:
            return AgentResult("failed", refusal)
        with self._hold(node, name, undrain=False) as held:
            if asked is None:
                asked = math.floor(self._clock())
                self.cluster.annotate(
                    node, {f"{self.cluster.labelling.markers_prefix}/{name}": f"asked {asked}"}
                )
                self.cluster.scontrol.run(
                    ["reboot", "ASAP", "nextstate=RESUME", f"reason={held.reason}", node],
                    node=node,
                )
            done, state = self._wait_reboot(node, asked)
            if not done:  # like the job's time limit: the request ends with the timeout
                self._cancel_reboot(node)
        if done:
            return AgentResult("changed", f"{node} rebooted (scontrol reboot, {name})")
        return AgentResult(
            "failed",
            f"{node}'s reboot (asked at {asked}) was not done within the {self.timeout:g} s "
            f"timeout (agent.timeout_seconds; it was {state}), so the request was cancelled",
        )

    def _cancel_reboot(self, node: str) -> None:
        try:
            self.cluster.scontrol.run(["cancel_reboot", node], node=node)
        except ClusterError as exc:  # already issued: too late to cancel, say so
            raise NodeAgentError(f"{node}'s reboot could not be cancelled: {exc}") from exc

    def _wait_reboot(self, node: str, asked: int) -> tuple[bool, str]:
        """Until slurmctld reports a boot after `asked` with no reboot pending, or the timeout."""
        deadline = self._clock() + self.timeout
        attempt = 0
        while True:
            raw = self.cluster.record(node)
            flags = node_flags(raw)
            booted = epoch(raw.get("boot_time"))
            if booted is not None and booted.timestamp() >= asked and not REBOOT_FLAGS & set(flags):
                return True, "+".join(flags)
            if self._clock() >= deadline:
                reason = str(raw.get("reason") or "")
                return False, "+".join(flags) + (f" ({reason})" if reason else "")
            self._pause(deadline, attempt)
            attempt += 1

    # --- the hold: reservation, markers, drain given back --------------------------------

    def _foreign_drain(self, node: str) -> str:
        """Why the node is not the agent's to hold (drained with someone else's reason)."""
        raw = self.cluster.record(node)
        reason = str(raw.get("reason") or "")
        held = self._markers_key in parse_markers(str(raw.get("comment") or ""))
        ours = reason.startswith(self.cluster.labelling.reason_prefix)
        if "DRAIN" in node_flags(raw) and not held and not ours:
            return f"{node} is drained by someone else ({reason or 'no reason'}): not held"
        return ""

    @contextmanager
    def _hold(self, node: str, name: str, *, undrain: bool) -> Iterator[Held]:
        raw = self.cluster.record(node)
        markers = parse_markers(str(raw.get("comment") or ""))
        reason = str(raw.get("reason") or "").split(" [", 1)[0].strip()
        if not reason.startswith(self.cluster.labelling.reason_prefix):
            reason = self.cluster.drain_reason(raw)
        held = Held(name, markers.get(self._markers_key, "").partition("|")[2] or reason)
        self.cluster.annotate(node, {self._markers_key: f"{name}|{held.reason}"})
        self._reserve(node, name)
        if undrain and "DRAIN" in node_flags(raw):
            self.cluster.scontrol.update_node(node, state="resume")
        try:
            yield held
        finally:
            self._give_back(node, name)

    def _reserve(self, node: str, name: str) -> None:
        minutes = max(1, math.ceil(self.timeout / 60)) + 5
        try:
            self.cluster.scontrol.run(
                [
                    "create",
                    "reservation",
                    f"reservationname={name}",
                    f"nodes={node}",
                    f"users={self.cluster.rest.user}",
                    "starttime=now",
                    f"duration={minutes}",
                    "flags=maint,ignore_jobs",
                ],
                node=node,
            )
        except ClusterError as exc:
            if "duplicate reservation name" not in str(exc).lower():
                raise

    def _give_back(self, node: str, name: str) -> None:
        """Drain the node again with the reason it had, delete the reservation, drop the
        hold marker (each step idempotent: a retry after a crash finishes it)."""
        raw = self.cluster.record(node)
        markers = parse_markers(str(raw.get("comment") or ""))
        hold = markers.get(self._markers_key, "")
        if not hold.startswith(name):
            return
        reason = hold.partition("|")[2] or self.cluster.drain_reason(raw)
        if "DRAIN" not in node_flags(raw):
            self.cluster.scontrol.update_node(node, state="drain", reason=reason)
        try:
            self.cluster.scontrol.run(["delete", f"reservationname={name}"], node=node)
        except ClusterError as exc:  # gone already, or a cancelled job still completing in it:
            if not any(t in str(exc).lower() for t in ("invalid reservation", "in use")):
                raise  # it then ends by itself, `_reserve`'s minutes after it began
        self.cluster.annotate(node, {self._markers_key: None})

    def _pause(self, deadline: float, attempt: int) -> None:
        remaining = deadline - self._clock()
        self._sleep(
            max(0.0, min(remaining, backoff_delay(attempt, base=self._poll, cap=self._cap)))
        )


def _asked_at(marker: str | None) -> int | None:
    if not marker or not marker.startswith("asked "):
        return None
    try:
        return int(marker.removeprefix("asked "))
    except ValueError:
        return None


def _partition(raw: Mapping[str, Any]) -> str:
    partitions = raw.get("partitions") or []
    if isinstance(partitions, str):
        partitions = partitions.split(",")
    return str(partitions[0]) if partitions else ""
