"""batch/v1 Jobs on the fake Kubernetes API server, with a tiny Job controller.

POST validates the Job as kube-apiserver would for what the bot sends (apiVersion/kind, name,
namespace, containers, restartPolicy Never|OnFailure) and answers 409 AlreadyExists for a name
that exists. Each created Job gets one pod (`<job>-<5 chars>`, labelled `job-name` and
`batch.kubernetes.io/job-name`, bound to the template's nodeName). What the Job then does is the
test's `JobPlan` (`FakeKube.plan_jobs`): after that many GETs of the Job its Complete or Failed
condition is set (with reason and message) and its pod logs the plan's lines. Without a plan a
Job runs forever.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.servers import kube_objects as ko
from tests.servers.fake_kube import _fail

if TYPE_CHECKING:
    from tests.servers.fake_kube import FakeKube
    from tests.servers.fake_kube_api import Req

JSON = dict[str, Any]


@dataclass(frozen=True)
class JobPlan:
    """What every Job created from now on does: after `after_reads` GETs it finishes with the
    `condition` (Complete | Failed) carrying `reason` and `message`; its pod logs `log`."""

    condition: str = "Complete"
    after_reads: int = 1
    reason: str = ""
    message: str = ""
    log: tuple[str, ...] = ()


def create_job(fake: FakeKube, req: Req) -> tuple[int, Any]:
    body = req.body
    if not isinstance(body, dict) or (body.get("apiVersion"), body.get("kind")) != (
        "batch/v1",
        "Job",
    ):
        raise _fail(400, "BadRequest", "the body must be a Job of apiVersion batch/v1")
    meta = body.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name:
        raise _fail(422, "Invalid", 'Job.batch "" is invalid: metadata.name: Required value')
    if meta.get("namespace", req.namespace) != req.namespace:
        message = (
            "the namespace of the provided object does not match the namespace sent on the request"
        )
        raise _fail(400, "BadRequest", message)
    pod_spec = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
    if not pod_spec.get("containers"):
        raise _fail(
            422,
            "Invalid",
            f'Job.batch "{name}" is invalid: spec.template.spec.containers: Required value',
        )
    if pod_spec.get("restartPolicy") not in ("Never", "OnFailure"):
        raise _fail(
            422,
            "Invalid",
            f'Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: Required value: '
            'valid values: "OnFailure", "Never"',
        )
    if (req.namespace, name) in fake.jobs:
        raise _fail(
            409,
            "AlreadyExists",
            f'jobs.batch "{name}" already exists',
            name=name,
            group="batch",
            kind="jobs",
        )
    job = copy.deepcopy(body)
    job["metadata"] = dict(meta) | {"namespace": req.namespace}
    job["metadata"].setdefault("labels", {})
    job["status"] = {"active": 1}
    fake._store(job)
    fake.jobs[(req.namespace, name)] = job
    fake.job_reads[(req.namespace, name)] = 0
    _start_pod(fake, job, pod_spec)
    return 201, copy.deepcopy(job)


def get_job(fake: FakeKube, req: Req) -> tuple[int, Any]:
    key = (req.namespace, req.name)
    job = fake.jobs.get(key)
    if job is None:
        raise _fail(404, "NotFound", f'jobs.batch "{req.name}" not found', name=req.name,
                    group="batch", kind="jobs")  # fmt: skip
    fake.job_reads[key] += 1
    plan = fake.job_plan
    running = "conditions" not in job["status"]
    if plan is not None and running and fake.job_reads[key] >= plan.after_reads:
        _finish(fake, job, plan)
    return 200, copy.deepcopy(job)


def _start_pod(fake: FakeKube, job: JSON, pod_spec: JSON) -> None:
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    suffix = hashlib.sha256(name.encode()).hexdigest()[:5]
    containers = tuple(c.get("name", "main") for c in pod_spec["containers"])
    labels = {"job-name": name, "batch.kubernetes.io/job-name": name}
    pod = ko.pod_object(
        f"{name}-{suffix}",
        namespace,
        node=pod_spec.get("nodeName"),
        phase="Running",
        labels=labels,
        owner=("Job", name),
        containers=containers,
    )
    fake._store(pod)
    fake.pods[(namespace, pod["metadata"]["name"])] = pod


def _finish(fake: FakeKube, job: JSON, plan: JobPlan) -> None:
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    condition: JSON = {"type": plan.condition, "status": "True"}
    if plan.reason:
        condition["reason"] = plan.reason
    if plan.message:
        condition["message"] = plan.message
    done = "succeeded" if plan.condition == "Complete" else "failed"
    job["status"] = {done: 1, "conditions": [condition]}
    job["metadata"]["resourceVersion"] = str(next(fake._rv))
    for (ns, pod_name), pod in fake.pods.items():
        if ns == namespace and pod["metadata"]["labels"].get("job-name") == name:
            pod["status"]["phase"] = "Succeeded" if done == "succeeded" else "Failed"
            container = pod["spec"]["containers"][0]["name"]
            fake.pod_logs[(ns, pod_name, container)] = [(None, line) for line in plan.log]
