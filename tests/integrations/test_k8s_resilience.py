"""KubernetesCluster against the fake API server when the API misbehaves or is misconfigured.

Covers: a 503 or an API-priority 429 (with Retry-After) is retried with exponential backoff
and succeeds; retries are bounded and the final error names the verb, resource and status; an
unreachable API server gives one ClusterError naming the host; a wrong token is a clear 401
error; the QPS token bucket paces bursts; a taint that keeps meeting 409 gives ClusterConflict
after the bounded re-reads; a kubelet without the node log query (a /var/log file listing) and
a missing log file are ClusterErrors that say how to enable it; the endpoint is built from a
kubeconfig context or a direct URL + token, and a broken kubeconfig is one ClusterError line;
no error is a library exception.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrations.errors import ClusterConflict, ClusterError
from integrations.k8s import KubernetesCluster, KubernetesEndpoint
from tests.servers.fake_kube import TOKEN, FakeKube, start_fake_kube
from tests.servers.kube_world import FakeTimer, make_kubernetes

NODE = "gpu-node-01"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with start_fake_kube() as fake:
        fake.add_node(NODE)
        fake.add_node("gpu-node-02")
        fake.kernel_logs[NODE] = [
            "[    1.000000] Linux version 6.8.0",
            "[    2.000000] NVRM: Xid (PCI:0000:ab:00): 79, GPU has fallen off the bus.",
        ]
        yield fake


def test_a_503_is_retried_with_backoff_and_succeeds(fake: FakeKube, tmp_path: Path) -> None:
    timer = FakeTimer()
    cluster = make_kubernetes(fake, tmp_path, timer=timer)
    fake.fail_next(503, times=2, path_contains="/nodes/gpu-node-01")
    assert cluster.nodes([NODE])[0].name == NODE
    assert [r.status for r in fake.sent("GET")] == [503, 503, 200]
    assert timer.slept == [0.2, 0.4]


def test_a_throttling_429_waits_for_retry_after(fake: FakeKube, tmp_path: Path) -> None:
    timer = FakeTimer()
    cluster = make_kubernetes(fake, tmp_path, timer=timer)
    fake.fail_next(429, path_contains="/nodes")
    assert len(cluster.nodes()) == 2
    assert [r.status for r in fake.sent("GET")] == [429, 200]
    assert timer.slept == [1.0]  # Retry-After: 1 beats the 0.2 s backoff


def test_retries_are_bounded_and_the_error_names_the_call(fake: FakeKube, tmp_path: Path) -> None:
    cluster = make_kubernetes(fake, tmp_path)
    fake.fail_next(500, times=10)
    with pytest.raises(ClusterError, match=r"patch nodes|get nodes") as caught:
        cluster.cordon(NODE)
    assert "HTTP 500" in str(caught.value) and "Traceback" not in str(caught.value)
    assert len(fake.requests) == 4  # 1 + 3 retries


def test_an_unreachable_api_server_names_the_host(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    timer = FakeTimer()
    endpoint = KubernetesEndpoint(host=f"http://127.0.0.1:{port}", token="t", retries=2)
    cluster = KubernetesCluster.from_endpoint(endpoint, clock=timer.clock, sleep=timer.sleep)
    with pytest.raises(ClusterError, match=rf"127\.0\.0\.1:{port} unreachable .* 3 attempts"):
        cluster.nodes()
    assert timer.slept == [0.2, 0.4]


def test_a_wrong_token_is_a_clear_401_error(fake: FakeKube) -> None:
    endpoint = KubernetesEndpoint(host=fake.url, token="not-the-token")
    cluster = KubernetesCluster.from_endpoint(endpoint)
    with pytest.raises(ClusterError, match="refused the bot's credentials .401."):
        cluster.nodes()


def test_a_direct_url_and_token_reach_the_api(fake: FakeKube) -> None:
    cluster = KubernetesCluster.from_endpoint(KubernetesEndpoint(host=fake.url, token=TOKEN))
    assert [n.name for n in cluster.nodes()] == [NODE, "gpu-node-02"]


def test_the_qps_bucket_paces_a_burst(fake: FakeKube, tmp_path: Path) -> None:
    timer = FakeTimer()
    cluster = make_kubernetes(fake, tmp_path, timer=timer, qps=10.0, burst=2)
    for _ in range(4):
        cluster.nodes([NODE])
    assert timer.slept == pytest.approx([0.1, 0.1])  # the third and fourth call wait a token


def test_a_taint_that_keeps_conflicting_gives_up_with_cluster_conflict(
    fake: FakeKube, tmp_path: Path
) -> None:
    cluster = make_kubernetes(fake, tmp_path)
    fake.interfere(NODE, times=10)
    with pytest.raises(ClusterConflict, match="conflict .409."):
        cluster.taint(NODE, key="gpu-oncall.io/quarantine")
    assert [r.status for r in fake.sent("PATCH")] == [409] * 4


def test_a_kubelet_without_the_node_log_query_says_how_to_enable_it(
    fake: FakeKube, tmp_path: Path
) -> None:
    cluster = make_kubernetes(fake, tmp_path)
    assert cluster.node_logs(NODE, tail_lines=1).endswith("GPU has fallen off the bus.")
    fake.node_log_query = False
    with pytest.raises(ClusterError, match="enable the NodeLogQuery feature gate"):
        cluster.node_logs(NODE)


def test_a_missing_kernel_log_file_says_which_query_failed(fake: FakeKube, tmp_path: Path) -> None:
    cluster = make_kubernetes(fake, tmp_path, kernel_log_query="/dmesg.log")
    with pytest.raises(ClusterError, match=r"query=/dmesg\.log.*HTTP 400: .*no such file"):
        cluster.node_logs(NODE)


def test_a_kubeconfig_context_is_honoured(fake: FakeKube, tmp_path: Path) -> None:
    path = fake.write_kubeconfig(tmp_path / "config", context="lab")
    endpoint = KubernetesEndpoint(kubeconfig=str(path), context="lab", in_cluster=False)
    assert len(KubernetesCluster.from_endpoint(endpoint).nodes()) == 2
    wrong = KubernetesEndpoint(kubeconfig=str(path), context="prod", in_cluster=False)
    with pytest.raises(ClusterError, match="cannot load Kubernetes credentials from kubeconfig"):
        KubernetesCluster.from_endpoint(wrong)


def test_a_broken_kubeconfig_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("this: [is not a kubeconfig")
    with pytest.raises(ClusterError, match=f"kubeconfig {path}"):
        KubernetesCluster.from_endpoint(KubernetesEndpoint(kubeconfig=str(path), in_cluster=False))
    with pytest.raises(ClusterError, match="in-cluster service account"):
        KubernetesCluster.from_endpoint(KubernetesEndpoint(in_cluster=True))
