"""The fake Kubernetes API server answers raw HTTP the way kube-apiserver does, so the adapter's
tests against it mean something.

Covers: no or a wrong bearer token is a 401 Status; RBAC refusals are 403 Status bodies worded
like the real API (cluster scope and namespaced, with subresources); an unsupported field
selector is 400 "field label not supported"; a PATCH in a content type the API does not accept
is 415, a JSON patch must be a list, a stale metadata.resourceVersion is 409 Conflict, and a
taint with an unknown effect is 422 Invalid; lists page with limit/continue and
remainingItemCount; an Eviction must be policy/v1 Eviction naming the pod, and a PDB refusal
is 429 with the real message and a DisruptionBudget cause; a SelfSubjectAccessReview is
answered from the rules; requests are recorded with their RBAC attributes; a fake seeded from
a simulated fleet follows the fleet's clock (kernel log, node conditions).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from simulator import Fleet
from simulator.scenarios import parse_scenario
from tests.servers.fake_kube import TOKEN, FakeKube, start_fake_kube
from tests.servers.kube_world import SCENARIO, T0

AUTH = {"Authorization": f"Bearer {TOKEN}"}
USER = "system:serviceaccount:gpu-oncall:gpu-oncall"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with start_fake_kube() as fake:
        for i in range(3):
            fake.add_node(f"gpu-node-0{i}")
        for rank in range(2):
            fake.add_pod(f"w-{rank}", "ml", node="gpu-node-00", labels={"app": "w"})
        yield fake


@pytest.fixture
def api(fake: FakeKube) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, headers=AUTH, timeout=5) as client:
        yield client


def patch(api: httpx.Client, body: Any, content_type: str) -> httpx.Response:
    headers = {"Content-Type": content_type}
    return api.patch("/api/v1/nodes/gpu-node-01", json=body, headers=headers)


def test_credentials_are_required(fake: FakeKube) -> None:
    answer = httpx.get(f"{fake.url}/api/v1/nodes", headers={"Authorization": "Bearer nope"})
    assert answer.status_code == 401 and answer.json()["reason"] == "Unauthorized"


def test_rbac_refusals_read_like_the_real_api(fake: FakeKube, api: httpx.Client) -> None:
    fake.deny("patch", "nodes")
    fake.deny("create", "pods", subresource="eviction")
    refused = patch(api, {"spec": {}}, "application/merge-patch+json").json()
    assert (refused["code"], refused["reason"]) == (403, "Forbidden")
    assert refused["message"] == (
        f'nodes "gpu-node-01" is forbidden: User "{USER}" cannot patch resource "nodes" '
        'in API group "" at the cluster scope'
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w-0"}}
    answer = api.post("/api/v1/namespaces/ml/pods/w-0/eviction", json=eviction)
    assert answer.json()["message"].endswith(
        'cannot create resource "pods/eviction" in API group "" in the namespace "ml"'
    )
    assert fake.requests[-1].permission == ("create", "", "pods", "eviction")


def test_an_unsupported_field_selector_is_a_400(api: httpx.Client) -> None:
    answer = api.get("/api/v1/pods", params={"fieldSelector": "spec.gpu=8"})
    assert answer.status_code == 400
    assert answer.json()["message"] == "field label not supported: spec.gpu"


def test_patches_are_checked_like_the_real_api(fake: FakeKube, api: httpx.Client) -> None:
    assert patch(api, {"spec": {}}, "application/json").status_code == 415
    assert patch(api, {"spec": {}}, "application/json-patch+json").status_code == 400
    stale = {"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": True}}
    conflict = patch(api, stale, "application/merge-patch+json").json()
    assert (conflict["code"], conflict["reason"]) == (409, "Conflict")
    assert "the object has been modified" in conflict["message"]
    bad = {"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}
    assert patch(api, bad, "application/strategic-merge-patch+json").status_code == 422
    ops = [{"op": "add", "path": "/spec/unschedulable", "value": True}]
    assert patch(api, ops, "application/json-patch+json").json()["spec"]["unschedulable"] is True
    taints = fake.node("gpu-node-01")["spec"]["taints"]  # the node controller's taint follows
    assert taints[0]["key"] == "node.kubernetes.io/unschedulable"


def test_lists_page_with_limit_and_continue(api: httpx.Client) -> None:
    first = api.get("/api/v1/nodes", params={"limit": 2}).json()
    assert [n["metadata"]["name"] for n in first["items"]] == ["gpu-node-00", "gpu-node-01"]
    assert first["metadata"]["remainingItemCount"] == 1
    rest = api.get("/api/v1/nodes", params={"limit": 2, "continue": first["metadata"]["continue"]})
    assert [n["metadata"]["name"] for n in rest.json()["items"]] == ["gpu-node-02"]
    assert "continue" not in rest.json()["metadata"]


def test_evictions_are_checked_and_honour_a_pdb(fake: FakeKube, api: httpx.Client) -> None:
    url = "/api/v1/namespaces/ml/pods/w-0/eviction"
    wrong = {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "w-0"}}
    assert api.post(url, json=wrong).status_code == 400
    other = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w-1"}}
    assert "does not match" in api.post(url, json=other).json()["message"]
    fake.add_pdb("w", "ml", match_labels={"app": "w"}, max_unavailable=1)
    ok: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction"}
    ok["metadata"] = {"name": "w-0"}
    assert api.post(url, json=ok).status_code == 201
    ok["metadata"]["name"] = "w-1"
    refused = api.post("/api/v1/namespaces/ml/pods/w-1/eviction", json=ok)
    body = refused.json()
    assert (refused.status_code, body["reason"]) == (429, "TooManyRequests")
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget w needs 1 healthy pods and has 1 currently",
        }
    ]


def test_access_reviews_are_answered_from_the_rules(fake: FakeKube, api: httpx.Client) -> None:
    fake.deny("delete", "pods")
    review: dict[str, Any] = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "delete", "resource": "pods"}},
    }
    url = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    assert api.post(url, json=review).json()["status"] == {"allowed": False}
    review["spec"]["resourceAttributes"]["verb"] = "list"
    assert api.post(url, json=review).json()["status"]["allowed"] is True


def test_a_seeded_fake_follows_the_fleet_clock() -> None:
    at = [T0 - timedelta(minutes=20)]  # before the ECC storm starts (-10m)
    fleet = Fleet(parse_scenario(SCENARIO), lambda: at[0], t0=T0)
    with start_fake_kube() as fake, httpx.Client(base_url=fake.url, headers=AUTH) as client:
        fake.seed_from_fleet(fleet)
        url = "/api/v1/nodes/gpu-node-01/proxy/logs/"
        before = client.get(url, params={"query": "/kern.log"}).text
        at[0] = T0 + timedelta(minutes=5)
        after = client.get(url, params={"query": "/kern.log"}).text
        assert "NVRM: Xid" not in before and ": 48," in after
        assert after.startswith(before)
        node = client.get("/api/v1/nodes/gpu-node-01").json()
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
        assert node["metadata"]["labels"]["gpu-oncall.io/rack"] == "rack-00"
