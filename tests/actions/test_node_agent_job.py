"""gpu_reset and reboot as a Kubernetes Job on the node (`agent.mode: job`).

Covers, over real HTTP to the fake Kubernetes API server: the Job the API receives (the shipped
template's entrypoint, the action's command, nodeName, labels, namespace, backoffLimit 0,
activeDeadlineSeconds = the timeout, a name derived from the idempotency key); Complete is a
`changed` result after reads with backoff; a resumed request meets 409 and reads the same Job
(one Job, `already_done` once it completed); Failed is `failed` with the condition's reason and
the pod log's tail; no result within the timeout is `failed` naming the Job and the timeout
(the wait ends exactly at it); an unreadable log and a refused create say so. The template is
checked at start-up: the shipped one passes, each broken field is one error naming the file and
the field, wiring turns it into a UserInputError and the CLI into one line and exit 2; in sim
mode the Job is journaled and completes at once; `cluster check` reviews the Job permissions
in the agent namespace and names the Role when they are missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.actions.registry import default_registry
from bot.cli.checking import check_cluster, render_check
from bot.config import AgentSettings, KubernetesSettings, Settings
from bot.errors import UserInputError
from bot.wiring.runtime import make_node_agent
from integrations.cluster import Cluster
from integrations.k8s import KubernetesCluster
from integrations.node_agent import AgentRequest
from integrations.node_jobs import (
    JobNodeAgent,
    JobTemplateError,
    job_name,
    load_job_template,
    parse_job_template,
)
from simulator import SimCluster
from tests.actions.action_helpers import act_once, action_context
from tests.servers.fake_kube import FakeKube, start_fake_kube
from tests.servers.fake_kube_jobs import JobPlan
from tests.servers.kube_world import (
    FakeTimer,
    contract_fleet,
    job_permissions,
    make_kubernetes,
    role_permissions,
)

TEMPLATE = Path(__file__).parents[2] / "deploy" / "kubernetes" / "node-agent" / "job-template.yaml"
NODE = "gpu-node-01"
NS = "gpu-oncall-agent"
VERDICT = {"layer": "gpu_hardware", "culprit_details": [{"node": NODE, "gpu": "5"}]}


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with start_fake_kube() as fake:
        fake.seed_from_fleet(contract_fleet())
        fake.grant_only(role_permissions() | job_permissions())
        yield fake


@pytest.fixture
def timer() -> FakeTimer:
    return FakeTimer()


@pytest.fixture
def cluster(fake: FakeKube, tmp_path: Path) -> Iterator[KubernetesCluster]:
    cluster = make_kubernetes(fake, tmp_path)
    yield cluster
    cluster.close()


def job_agent(timer: FakeTimer, timeout: float = 120.0) -> JobNodeAgent:
    return JobNodeAgent(
        load_job_template(TEMPLATE),
        namespace=NS,
        timeout_seconds=timeout,
        clock=timer.clock,
        sleep=timer.sleep,
    )


def act(cluster: Cluster, agent: JobNodeAgent, action: str, key: str = "k1") -> dict[str, Any]:
    """One action through the registry and a fresh ledger (as a run resumed elsewhere)."""
    ctx = action_context(cluster=cluster, verdict=VERDICT, key=key)
    return act_once(default_registry(agent=agent).get(action), ctx, target=NODE, step_id="act")


def test_the_api_receives_the_job_pinned_to_the_node_with_the_command(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    fake.plan_jobs(JobPlan("Complete", after_reads=3))
    result = act(cluster, job_agent(timer), "gpu_reset")
    (post,) = fake.sent("POST", path="/jobs")
    assert post.path == f"/apis/batch/v1/namespaces/{NS}/jobs"
    job = post.body
    name = job_name(AgentRequest(node=NODE, action="gpu_reset", idempotency_key="k1"))
    assert job["metadata"]["name"] == name and name.startswith("gpu-oncall-gpu-reset-")
    assert (
        job["metadata"]["labels"].items()
        >= {
            "app.kubernetes.io/managed-by": "gpu-oncall",
            "gpu-oncall.io/action": "gpu-reset",
            "gpu-oncall.io/node": NODE,
        }.items()
    )
    assert job["metadata"]["annotations"]["gpu-oncall.io/idempotency-key"] == "k1"
    assert (job["spec"]["backoffLimit"], job["spec"]["activeDeadlineSeconds"]) == (0, 120)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeName"] == NODE
    assert pod["tolerations"] == [{"operator": "Exists"}]
    (container,) = pod["containers"]
    assert container["command"][0] == "nsenter" and container["command"][-1] == "--"
    assert container["args"] == ["nvidia-smi", "-r", "-i", "5"]
    assert {"name": "GPU_ONCALL_GPU", "value": "5"} in container["env"]
    assert result["outcome"] == "changed"
    assert result["detail"] == (
        f"reset GPU {NODE} GPU 5: changed by the node agent (Job {NS}/{name} completed)"
    )
    assert [r.path.rsplit("/", 1)[-1] for r in fake.sent("GET", path="/jobs/")] == [name] * 3
    assert timer.slept == [1.0, 2.0, 4.0]  # backoff between reads, on the fake timer


def test_reboot_is_scheduled_on_the_host_with_no_gpu(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    fake.plan_jobs(JobPlan("Complete"))
    result = act(cluster, job_agent(timer), "reboot")
    (post,) = fake.sent("POST", path="/jobs")
    container = post.body["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["systemd-run", "--on-active=30s", "systemctl", "reboot"]
    assert post.body["metadata"]["name"].startswith("gpu-oncall-reboot-")
    assert result["outcome"] == "changed"


def test_a_resumed_request_meets_409_and_reads_the_same_job(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    fake.plan_jobs(JobPlan("Complete", after_reads=1))
    first = act(cluster, job_agent(timer), "gpu_reset")
    again = act(cluster, job_agent(timer), "gpu_reset")
    assert [r.status for r in fake.sent("POST", path="/jobs")] == [201, 409]
    assert len(fake.jobs) == 1
    assert (first["outcome"], again["outcome"]) == ("changed", "already_done")
    assert again["detail"].endswith("had already completed)")


def test_a_failed_job_is_a_failed_result_with_its_reason_and_log(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    fake.plan_jobs(
        JobPlan(
            "Failed",
            reason="BackoffLimitExceeded",
            message="Job has reached the specified backoff limit",
            log=("GPU 00000000:18:00.0 is currently in use by another process.", "exit 255"),
        )
    )
    result = act(cluster, job_agent(timer), "gpu_reset")
    assert result["outcome"] == "failed"
    assert (
        "failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
        in (result["detail"])
    )
    assert result["detail"].endswith(
        "log: GPU 00000000:18:00.0 is currently in use by another process. | exit 255)"
    )
    (listing,) = [r for r in fake.sent("GET") if r.path == f"/api/v1/namespaces/{NS}/pods"]
    assert listing.query["labelSelector"].startswith("job-name=gpu-oncall-gpu-reset-")


def test_no_result_within_the_timeout_fails_naming_the_job_and_the_timeout(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    result = act(cluster, job_agent(timer, timeout=30.0), "gpu_reset")
    name = fake.sent("POST", path="/jobs")[0].body["metadata"]["name"]
    assert result["outcome"] == "failed"
    assert f"Job {NS}/{name} did not finish within the 30 s timeout" in result["detail"]
    assert "its pod logged nothing" in result["detail"]
    assert timer.now == 30.0  # waited exactly the timeout: 1+2+4+8+15 s, then the rest
    assert timer.slept == [1.0, 2.0, 4.0, 8.0, 15.0]


def test_an_unreadable_log_is_said_not_raised(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    fake.deny("get", "pods", subresource="log")
    fake.plan_jobs(JobPlan("Failed", reason="DeadlineExceeded"))
    result = act(cluster, job_agent(timer), "reboot")
    assert result["outcome"] == "failed"
    assert "DeadlineExceeded; its pod log is not readable (RBAC: get pods/log)" in result["detail"]


def test_a_refused_create_names_the_role_to_grant(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    fake.deny("create", "jobs", group="batch")
    result = act(cluster, job_agent(timer), "gpu_reset")
    assert result["outcome"] == "failed"
    assert f"may not create jobs.batch in namespace {NS}" in result["detail"]
    assert "deploy/kubernetes/node-agent/rbac.yaml" in result["detail"]


def test_in_sim_mode_the_job_is_journaled_and_completes_at_once(timer: FakeTimer) -> None:
    fleet = contract_fleet()
    result = act(SimCluster(fleet), job_agent(timer), "gpu_reset")
    assert result["outcome"] == "changed"
    (job,) = fleet.jobs.values()
    assert job["node"] == NODE and job["args"][-4:] == ["nvidia-smi", "-r", "-i", "5"]
    rebuilt = contract_fleet()
    rebuilt.restore_state(fleet.export_state())
    assert rebuilt.jobs == fleet.jobs
    assert act(SimCluster(rebuilt), job_agent(timer), "gpu_reset")["outcome"] == "already_done"


# --- the template, checked at start-up --------------------------------------------------------


def test_the_shipped_template_passes_the_start_up_check() -> None:
    template = load_job_template(TEMPLATE)
    assert template.job["spec"]["ttlSecondsAfterFinished"] >= 600


def _broken(change: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(TEMPLATE.read_text())
    pod = job["spec"]["template"]["spec"]
    if change == "tolerations":
        pod["tolerations"] = [{"key": "gpu-oncall.io/quarantine", "operator": "Exists"}]
    elif change == "privileged":
        pod["containers"][0]["securityContext"] = {"privileged": False}
    elif change == "restartPolicy":
        pod["restartPolicy"] = "OnFailure"
    elif change == "ttl":
        job["spec"]["ttlSecondsAfterFinished"] = 60
    elif change == "nodeName":
        pod["nodeName"] = "gpu-node-01"
    elif change == "container":
        pod["containers"][0]["name"] = "reset"
    elif change == "kind":
        job["kind"] = "Pod"
    return job


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("tolerations", "spec.template.spec.tolerations"),
        ("privileged", "spec.template.spec.containers[agent].securityContext.privileged"),
        ("restartPolicy", "spec.template.spec.restartPolicy"),
        ("ttl", "spec.ttlSecondsAfterFinished"),
        ("nodeName", "spec.template.spec.nodeName"),
        ("container", "spec.template.spec.containers"),
        ("kind", "apiVersion/kind"),
    ],
)
def test_each_broken_field_is_one_error_naming_file_and_field(change: str, field: str) -> None:
    with pytest.raises(JobTemplateError) as caught:
        parse_job_template(_broken(change), source="overlay/job.yaml")
    assert str(caught.value).startswith(f"overlay/job.yaml: {field}: ")
    assert "\n" not in str(caught.value)


def test_wiring_refuses_a_bad_template_at_start_up_naming_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(_broken("privileged")))
    settings = Settings(agent=AgentSettings(mode="job", job_template=str(path)))
    with pytest.raises(UserInputError) as caught:
        make_node_agent(settings)
    assert str(caught.value).startswith(
        f"agent.job_template (GPU_ONCALL_AGENT__JOB_TEMPLATE): {path}: spec.template.spec."
    )
    missing = Settings(agent=AgentSettings(mode="job", job_template=str(tmp_path / "none.yaml")))
    with pytest.raises(UserInputError, match="none.yaml: cannot read the Job template"):
        make_node_agent(missing)
    path.write_text("kind: [Job")
    with pytest.raises(UserInputError, match="job.yaml: not YAML"):
        make_node_agent(settings)


def test_wiring_picks_the_agent_by_mode() -> None:
    job = Settings(agent=AgentSettings(mode="job", job_template=str(TEMPLATE)))
    assert isinstance(make_node_agent(job), JobNodeAgent)
    url = "http://127.0.0.1:1/agent"
    assert make_node_agent(Settings(agent=AgentSettings(mode="none", url=url))) is None
    with pytest.raises(UserInputError, match=r"agent.mode is http but agent.url .* is not set"):
        make_node_agent(Settings(agent=AgentSettings(mode="http")))


def test_cluster_check_reviews_the_job_permissions_in_the_agent_namespace(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.deny("create", "jobs", group="batch")
    settings = Settings(
        cluster="kubernetes",
        kubernetes=KubernetesSettings(
            kubeconfig=str(fake.write_kubeconfig(tmp_path / "kubeconfig")), in_cluster=False
        ),
        agent=AgentSettings(mode="job", job_template=str(TEMPLATE)),
    )
    check = check_cluster(settings)
    assert [p.describe() for p in check.missing] == [f"create jobs (batch) in namespace {NS}"]
    reviews = [r.body["spec"]["resourceAttributes"] for r in fake.sent("POST", path="access")]
    assert {(a["verb"], a.get("namespace")) for a in reviews if a["resource"] == "jobs"} == {
        ("create", NS),
        ("get", NS),
    }
    assert "node agent's Role in deploy/kubernetes/node-agent/rbac.yaml" in render_check(check)[-1]


def test_the_cli_refuses_a_broken_template_with_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(_broken("tolerations")))
    env = dict(os.environ) | {
        "GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'oncall.db'}",
        "GPU_ONCALL_AGENT__MODE": "job",
        "GPU_ONCALL_AGENT__JOB_TEMPLATE": str(path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "runbooks", "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{path}: spec.template.spec.tolerations: needs `- operator: Exists`" in line
