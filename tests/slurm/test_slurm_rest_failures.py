"""The slurmrestd client's resilience and error translation, by failure injection (httpx's
MockTransport: failures the real daemons cannot be made to produce on demand).

Covers: 503 then 200 is retried with exponential backoff (no real sleep); a connection that
keeps failing gives up after `retries` naming the URL and the call; 401/511 name the token
setting; an unknown node's 500 (22.05's errno 2018) is NodeNotFound, other 500s are not retried;
a slurmrestd serving no version the client knows names the served ones and the fix.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from integrations.errors import ClusterError, ClusterForbidden, NodeNotFound
from integrations.slurm.client import SlurmRest

SPEC = {"paths": {"/slurm/v0.0.38/nodes": {"get": {}}, "/slurm/v0.0.38/node/{node_name}": {
    "get": {}, "delete": {}}}}


def rest(handler: Callable[[httpx.Request], httpx.Response], slept: list[float]) -> SlurmRest:
    http = httpx.Client(base_url="http://slurmrestd.test", transport=httpx.MockTransport(handler))
    return SlurmRest(http, user="root", token="t0k", retries=2, backoff_seconds=0.5,
                     sleep=slept.append)  # fmt: skip


def test_a_503_is_retried_with_backoff_then_answers() -> None:
    answers = iter([503, 503, 200])
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["X-SLURM-USER-TOKEN"] == "t0k"
        assert request.headers["X-SLURM-USER-NAME"] == "root"
        return httpx.Response(next(answers), json={"nodes": [], "errors": []})

    assert rest(handler, slept).request("GET", "/slurm/v0.0.38/nodes", what="list nodes") == {
        "nodes": [], "errors": []}  # fmt: skip
    assert slept == [0.5, 1.0]


def test_a_dead_slurmrestd_gives_up_naming_the_url_and_call() -> None:
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(ClusterError, match=r"slurmrestd at http://slurmrestd.test unreachable "
                       r"\(ConnectError\) after 3 attempts: list nodes"):  # fmt: skip
        rest(handler, slept).request("GET", "/slurm/v0.0.38/nodes", what="list nodes")
    assert len(slept) == 2


@pytest.mark.parametrize("status", [401, 511])
def test_a_refused_token_names_the_setting(status: int) -> None:
    client = rest(lambda r: httpx.Response(status), [])
    with pytest.raises(ClusterForbidden, match="GPU_ONCALL_SLURM__TOKEN"):
        client.request("GET", "/slurm/v0.0.38/nodes", what="list nodes")


def test_an_unknown_node_is_node_not_found_and_a_500_is_not_retried() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        errors = [{"error": "Invalid node name specified", "errno": 2018}]
        return httpx.Response(500, json={"nodes": [], "errors": errors})

    client = rest(handler, [])
    with pytest.raises(NodeNotFound, match="gpu-node-77"):
        client.request("GET", "/x", what="read", missing=lambda: NodeNotFound("gpu-node-77"))
    with pytest.raises(ClusterError, match=r"Invalid node name specified \(errno 2018\)"):
        client.request("GET", "/x", what="read")
    assert len(calls) == 2


def test_detection_picks_the_newest_known_version_and_its_calls() -> None:
    api = rest(lambda r: httpx.Response(200, json=SPEC), []).detect()
    assert (api.version, api.node_update, api.jobs_delete) == ("v0.0.38", False, False)
    newer = {"paths": {"/slurm/v0.0.42/node/{node_name}": {"get": {}, "post": {}},
                       "/slurm/v0.0.42/jobs/": {"delete": {}}, **SPEC["paths"]}}  # fmt: skip
    api = rest(lambda r: httpx.Response(200, json=newer), []).detect()
    assert (api.version, api.node_update, api.jobs_delete) == ("v0.0.42", True, True)


def test_a_slurmrestd_with_no_known_version_names_what_it_serves() -> None:
    spec = {"paths": {"/slurm/v0.0.36/nodes": {"get": {}}}}
    with pytest.raises(ClusterError, match=r"serves v0.0.36; the bot speaks v0.0.42, .*"
                       r"-s openapi/v0.0.38"):  # fmt: skip
        rest(lambda r: httpx.Response(200, json=spec), []).detect()
