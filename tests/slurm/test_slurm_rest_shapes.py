"""The request bodies the bot sends to slurmrestd, per REST generation.

Slurm 22.05 (v0.0.38): checked against the OpenAPI the real slurmrestd serves (the session's
daemons). Slurm 24.11 (v0.0.40-42): RECORDED-SHAPE tests, not run against a 24.11 daemon (Debian
12 ships 22.05 only, bookworm-backports has no newer Slurm): the field types below are recorded
from slurmrestd's published OpenAPI (`v0.0.40_job_desc_msg`, `v0.0.42_update_node_msg`) and a
slurmrestd of that generation is played by httpx's MockTransport.

Covers: the reset job's submit body uses only fields v0.0.38 serves, each of the served type;
the 24.11 body has the script inside `job`, `K=V` environment strings, `time_limit` as
`{set, infinite, number}`, `required_nodes` and `shared: ["none"]`; on a v0.0.42 slurmrestd the
adapter drains, resumes and writes its markers with `POST node/{name}` (no scontrol), and reads
24.11's list-valued state and `{set, number}` times.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from integrations.cluster import Outcome
from integrations.slurm import Scontrol, SlurmCluster, SlurmRest
from integrations.slurm.agent import JobSpec, submit_body
from tests.servers.slurm import SlurmServers

SPEC = JobSpec(
    name="gpu-oncall-gpu-reset-0123456789ab",
    node="gpu-node-03",
    partition="train",
    comment="INC-9/act/gpu_reset/gpu-node-03",
    minutes=2,
    environment={"GPU_ONCALL_ACTION": "gpu_reset", "GPU_ONCALL_GPU": "5"},
)
JSON_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict}

#: Recorded from slurmrestd's published OpenAPI, v0.0.40 `job_desc_msg` (the same in v0.0.41
#: and v0.0.42 for these fields): the type of each field the bot sends.
V0040_JOB_DESC = {
    "name": str, "comment": str, "partition": str, "reservation": str, "requeue": bool,
    "current_working_directory": str, "standard_output": str, "script": str,
    "required_nodes": list, "minimum_nodes": int, "maximum_nodes": int, "shared": list,
    "time_limit": dict, "environment": list,
}  # fmt: skip


def test_the_2205_body_uses_only_fields_the_real_slurmrestd_serves(
    slurm_servers: SlurmServers,
) -> None:
    token = slurm_servers.token()
    headers = {"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token}
    openapi = httpx.get(f"{slurm_servers.rest_url}/openapi/v3", headers=headers, timeout=10)
    served = openapi.json()["components"]["schemas"]["v0.0.38_job_properties"]["properties"]
    body = submit_body("v0.0.38", "#!/bin/bash\ntrue\n", SPEC)
    assert set(body) == {"script", "job"}
    for key, value in body["job"].items():
        assert key in served, key
        assert isinstance(value, JSON_TYPES[served[key]["type"]]), key
    assert body["job"]["environment"]["GPU_ONCALL_GPU"] == "5"


def test_the_2411_body_has_the_published_shapes() -> None:
    body = submit_body("v0.0.42", "#!/bin/bash\ntrue\n", SPEC)
    assert set(body) == {"job"}
    job = body["job"]
    assert {key: type(value) for key, value in job.items()} == V0040_JOB_DESC
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 2}
    assert job["required_nodes"] == ["gpu-node-03"] and job["shared"] == ["none"]
    assert "GPU_ONCALL_GPU=5" in job["environment"] and job["script"].startswith("#!")


class Slurmrestd2411:
    """A v0.0.42 slurmrestd for one node (RECORDED SHAPES): answers GET node/N and records
    every POST's body."""

    def __init__(self) -> None:
        self.node: dict[str, Any] = {
            "name": "gpu-node-03", "state": ["IDLE"], "reason": "", "comment": "",
            "partitions": ["train"], "features": ["h100", "rack-00"], "gres": "gpu:h100:8",
            "boot_time": {"set": True, "infinite": False, "number": 1_790_000_000},
            "reason_changed_at": {"set": False, "infinite": False, "number": 0},
        }  # fmt: skip
        self.posts: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/openapi/v3":
            paths = {"/slurm/v0.0.42/node/{node_name}": {"get": {}, "post": {}},
                     "/slurm/v0.0.42/jobs/": {"delete": {}}}  # fmt: skip
            return httpx.Response(200, json={"paths": paths})
        assert path == "/slurm/v0.0.42/node/gpu-node-03", path
        if request.method == "POST":
            body = json.loads(request.content)
            self.posts.append(body)
            state = body.get("state", [])
            if state == ["DRAIN"]:
                self.node["state"] = ["IDLE", "DRAIN"]
                self.node["reason"] = body["reason"]
            elif state == ["RESUME"]:
                self.node["state"] = ["IDLE"]  # 24.11 keeps the reason text
            if "comment" in body:
                self.node["comment"] = body["comment"]
            return httpx.Response(200, json={"errors": []})
        return httpx.Response(200, json={"nodes": [self.node], "errors": []})


def test_on_2411_drain_resume_and_markers_are_rest_node_updates() -> None:
    server = Slurmrestd2411()
    http = httpx.Client(base_url="http://slurmrestd.test", transport=httpx.MockTransport(server))
    no_scontrol = Scontrol("/nonexistent/scontrol")  # any call would raise: none is made
    cluster = SlurmCluster(SlurmRest(http, user="root", token="t"), no_scontrol)
    assert cluster.annotate("gpu-node-03", {"gpu-oncall.io/cordon-reason": "INC-9: XID 79"}) is (
        Outcome.CHANGED
    )
    assert cluster.cordon("gpu-node-03") is Outcome.CHANGED
    info = cluster.nodes(["gpu-node-03"])[0]
    assert info.unschedulable and info.gpu_capacity == 8
    assert cluster.uncordon("gpu-node-03") is Outcome.CHANGED
    assert not cluster.nodes(["gpu-node-03"])[0].unschedulable  # from the flag, not the reason
    assert [p.get("state") for p in server.posts] == [None, ["DRAIN"], ["RESUME"]]
    assert server.posts[1]["reason"] == "gpu-oncall: INC-9: XID 79"
    markers = json.loads(server.posts[0]["comment"])
    assert markers == {"gpu-oncall.io/cordon-reason": "INC-9: XID 79"}
    assert no_scontrol.calls == 0
