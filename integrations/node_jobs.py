"""The node agent as a Kubernetes Job: `gpu_reset` / `reboot` run by a privileged Job pinned to
the node, from a template the operator ships (deploy/kubernetes/node-agent/job-template.yaml).

`load_job_template` reads and checks the template once, at start-up: every problem is one
JobTemplateError naming the file and the field. `JobTemplate.render` fills in what belongs to
one request: a name derived from the idempotency key (so a retried create meets 409 and reads
the same Job, never starting a second), the namespace, the node (`nodeName`: no scheduler, so a
cordon does not keep it off), `backoffLimit: 0`, `activeDeadlineSeconds` (the timeout), labels,
and the command of the `agent` container. `JobNodeAgent` creates it through the Cluster port,
waits for Complete or Failed with backoff until the timeout, and answers like the HTTP agent
(`changed` | `already_done` | `failed`, with the tail of the pod's log when it failed).
"""

from __future__ import annotations

import copy
import hashlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from integrations.cluster import Cluster, JobRun, Outcome
from integrations.errors import ClusterError, ClusterForbidden, IntegrationError
from integrations.names import check_namespace, check_node_name
from integrations.node_agent import AgentRequest, AgentResult, NodeAgentError
from integrations.throttling import backoff_delay

CONTAINER = "agent"
MIN_TTL_SECONDS = 600
RBAC_FILE = "deploy/kubernetes/node-agent/rbac.yaml"
REBOOT_DELAY = "30s"
"""A reboot is scheduled, not run inline: the Job completes (and says so) before the node goes."""
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-oncall"}


class JobTemplateError(IntegrationError, ValueError):
    """The Job template cannot be used; the message names the file and the field."""


def command(action: str, gpu: str | None) -> list[str]:
    """The agent container's arguments, run on the host (the template's entrypoint enters the
    host's namespaces): `nvidia-smi -r [-i GPU]`, or a reboot scheduled in REBOOT_DELAY."""
    if action == "gpu_reset":
        return ["nvidia-smi", "-r", *(["-i", gpu] if gpu is not None else [])]
    if action == "reboot":
        return ["systemd-run", f"--on-active={REBOOT_DELAY}", "systemctl", "reboot"]
    raise ValueError(f"the node agent Job does not run '{action}' (gpu_reset | reboot)")


def job_name(request: AgentRequest) -> str:
    """`gpu-oncall-<action>-<12 hex of the idempotency key>`: the same request, the same Job."""
    digest = hashlib.sha256(request.idempotency_key.encode()).hexdigest()[:12]
    return f"gpu-oncall-{request.action.replace('_', '-')}-{digest}"


@dataclass(frozen=True)
class JobTemplate:
    """A checked batch/v1 Job template (plain data) and the file it came from."""

    source: str
    job: Mapping[str, Any]

    def render(
        self, request: AgentRequest, *, namespace: str, timeout_seconds: float
    ) -> dict[str, Any]:
        """The Job for one request (the template itself is never changed)."""
        node = check_node_name(request.node)
        job: dict[str, Any] = copy.deepcopy(dict(self.job))
        labels = MANAGED_BY | {
            "gpu-oncall.io/action": request.action.replace("_", "-"),
            "gpu-oncall.io/node": node,
        }
        meta = job.setdefault("metadata", {})
        meta["name"], meta["namespace"] = job_name(request), check_namespace(namespace)
        meta["labels"] = dict(meta.get("labels") or {}) | labels
        meta["annotations"] = dict(meta.get("annotations") or {}) | {
            "gpu-oncall.io/idempotency-key": request.idempotency_key
        }
        spec = job["spec"]
        spec["backoffLimit"] = 0
        spec["activeDeadlineSeconds"] = max(1, math.ceil(timeout_seconds))
        pod = spec["template"]
        pod.setdefault("metadata", {})
        pod["metadata"]["labels"] = dict(pod["metadata"].get("labels") or {}) | labels
        pod["spec"]["nodeName"] = node
        agent = next(c for c in pod["spec"]["containers"] if c.get("name") == CONTAINER)
        agent["args"] = command(request.action, request.gpu)
        env = [
            e
            for e in agent.get("env") or []
            if not str(e.get("name", "")).startswith("GPU_ONCALL_")
        ]
        agent["env"] = env + [
            {"name": "GPU_ONCALL_ACTION", "value": request.action},
            {"name": "GPU_ONCALL_NODE", "value": node},
            {"name": "GPU_ONCALL_GPU", "value": request.gpu or ""},
        ]
        return job


def load_job_template(path: str | Path) -> JobTemplate:
    """Read and check the template; JobTemplateError names the file and the field."""
    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise JobTemplateError(f"{where}: cannot read the Job template: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise JobTemplateError(f"{where}: not YAML: {' '.join(str(exc).split())}") from exc
    return parse_job_template(data, source=where)


def parse_job_template(data: Any, *, source: str) -> JobTemplate:
    def bad(field: str, problem: str) -> JobTemplateError:
        return JobTemplateError(f"{source}: {field}: {problem}")

    if not isinstance(data, dict):
        raise bad("(document)", "expected one batch/v1 Job mapping")
    if (data.get("apiVersion"), data.get("kind")) != ("batch/v1", "Job"):
        raise bad(
            "apiVersion/kind",
            f"expected batch/v1 Job, found {data.get('apiVersion')} {data.get('kind')}",
        )
    spec = data.get("spec")
    pod = spec.get("template", {}).get("spec") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(pod, dict):
        raise bad("spec.template.spec", "missing: the pod the Job runs")
    ttl = spec.get("ttlSecondsAfterFinished")
    if not isinstance(ttl, int) or ttl < MIN_TTL_SECONDS:
        raise bad(
            "spec.ttlSecondsAfterFinished",
            f"must be at least {MIN_TTL_SECONDS} (found {ttl}): a finished Job is kept that long "
            "so a resumed run reads its result instead of starting another",
        )
    if pod.get("restartPolicy") != "Never":
        raise bad("spec.template.spec.restartPolicy", "must be Never (a reset is tried once)")
    if "nodeName" in pod:
        raise bad(
            "spec.template.spec.nodeName", "must not be set: the bot pins each Job to its node"
        )
    if not any(t == {"operator": "Exists"} for t in pod.get("tolerations") or []):
        raise bad(
            "spec.template.spec.tolerations",
            "needs `- operator: Exists` (tolerate every taint): the node is tainted and cordoned, "
            "often by the bot itself",
        )
    agents = [
        c for c in pod.get("containers") or [] if isinstance(c, dict) and c.get("name") == CONTAINER
    ]
    if len(agents) != 1:
        raise bad(
            "spec.template.spec.containers", f"needs exactly one container named '{CONTAINER}'"
        )
    if (agents[0].get("securityContext") or {}).get("privileged") is not True:
        raise bad(
            f"spec.template.spec.containers[{CONTAINER}].securityContext.privileged",
            "must be true: resetting a GPU or rebooting the host needs it",
        )
    if "args" in agents[0]:
        raise bad(
            f"spec.template.spec.containers[{CONTAINER}].args",
            "must not be set: the bot sets the command",
        )
    return JobTemplate(source=source, job=data)


class JobNodeAgent:
    """The NodeAgent port over Kubernetes Jobs. Needs the cluster of the action (`on`)."""

    def __init__(
        self,
        template: JobTemplate,
        *,
        namespace: str,
        timeout_seconds: float,
        cluster: Cluster | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_seconds: float = 1.0,
        poll_cap_seconds: float = 15.0,
        log_lines: int = 20,
    ) -> None:
        self.template, self.namespace = template, check_namespace(namespace)
        self.timeout = timeout_seconds
        self.cluster = cluster
        self._clock, self._sleep = clock, sleep
        self._poll, self._cap, self._log_lines = poll_seconds, poll_cap_seconds, log_lines

    def on(self, cluster: Cluster) -> JobNodeAgent:
        """The same agent, creating its Jobs through `cluster`."""
        bound = copy.copy(self)
        bound.cluster = cluster
        return bound

    def request(self, request: AgentRequest) -> AgentResult:
        if self.cluster is None:
            raise NodeAgentError("the node agent Job needs a cluster (JobNodeAgent.on)")
        job = self.template.render(request, namespace=self.namespace, timeout_seconds=self.timeout)
        where = f"Job {self.namespace}/{job['metadata']['name']}"
        try:
            run = self.cluster.create_job(job)
            if run.outcome is Outcome.ALREADY_DONE and run.state == "complete":
                return AgentResult("already_done", f"{where} had already completed")
            run = self._wait(run)
        except ClusterForbidden as exc:
            raise NodeAgentError(
                f"RBAC: the bot may not {exc.verb or 'use'} {exc.resource or 'jobs'} in namespace "
                f"{self.namespace}; grant it with the Role in {RBAC_FILE}"
            ) from exc
        if run.state == "complete":
            return AgentResult("changed", f"{where} completed")
        if run.state == "failed":
            return AgentResult(
                "failed", f"{where} failed: {run.reason or 'no reason given'}" + self._tail(run)
            )
        return AgentResult(
            "failed",
            f"{where} did not finish within the {self.timeout:g} s timeout (agent.timeout_seconds)"
            + self._tail(run),
        )

    def _wait(self, run: JobRun) -> JobRun:
        """Read the Job with backoff until it finished or the timeout has passed."""
        assert self.cluster is not None
        deadline = self._clock() + self.timeout
        attempt = 0
        while run.state == "running":
            remaining = deadline - self._clock()
            if remaining <= 0:
                return run
            self._sleep(min(remaining, backoff_delay(attempt, base=self._poll, cap=self._cap)))
            attempt += 1
            run = self.cluster.read_job(run.name, run.namespace)
        return run

    def _tail(self, run: JobRun) -> str:
        """`; log: a | b | c` from the Job's pod, or why there is none (never raises)."""
        assert self.cluster is not None
        try:
            text = self.cluster.job_logs(run.name, run.namespace, tail_lines=self._log_lines)
        except ClusterForbidden:
            return "; its pod log is not readable (RBAC: get pods/log)"
        except ClusterError as exc:
            return f"; its pod log could not be read: {exc}"
        lines = [line for line in text.splitlines() if line.strip()]
        return f"; log: {' | '.join(lines)}" if lines else "; its pod logged nothing"
