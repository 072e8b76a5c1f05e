"""KubernetesCluster inside a pod (the service-account path) and paged lists whose `continue`
token expires, against the fake API server over real HTTP(S) on 127.0.0.1.

Covers: with a service-account directory (token, ca.crt, namespace) and KUBERNETES_SERVICE_HOST
/ _PORT, the endpoint reaches the fake over HTTPS, verifying the server against that ca.crt,
and sends the token; `in_cluster` unset picks the service account when its token exists (a
broken KUBECONFIG is not read); a CA that did not sign the server's certificate is a
ClusterError, not a library exception; missing env or token is one ClusterError naming the
directory. A `continue` token the API server expired (410 Gone, reason Expired) restarts the
list from the first page once, with no item seen twice, for core lists and for custom objects
(NodeHealthChecks); a second expiry is one ClusterError.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrations.errors import ClusterError
from integrations.k8s import KubernetesCluster, KubernetesEndpoint
from tests.servers.fake_kube import TOKEN, FakeKube, start_fake_kube
from tests.servers.kube_world import make_kubernetes

NODES = ["gpu-node-00", "gpu-node-01", "gpu-node-02"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _authority(directory: Path, name: str) -> None:
    """A self-signed CA `name`.crt / `name`.key."""
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt signing server.crt (SAN IP:127.0.0.1, as the kubernetes Service's cluster IP
    would be), and an unrelated other-ca.crt."""
    pki = tmp_path_factory.mktemp("pki")
    _authority(pki, "ca")
    _authority(pki, "other-ca")
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=kube-apiserver",
        cwd=pki,
    )  # fmt: skip
    (pki / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n"
        "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext",
        cwd=pki,
    )  # fmt: skip
    return pki


@pytest.fixture
def tls_fake(pki: Path) -> Iterator[FakeKube]:
    with start_fake_kube(tls=(pki / "server.crt", pki / "server.key")) as fake:
        for name in NODES:
            fake.add_node(name)
        yield fake


def service_account(tmp_path: Path, ca: Path) -> Path:
    """What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount."""
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text(TOKEN)
    (directory / "ca.crt").write_bytes(ca.read_bytes())
    (directory / "namespace").write_text("gpu-oncall")
    return directory


@pytest.fixture
def in_pod(tls_fake: FakeKube, monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    """The env a pod gets for the `kubernetes` Service, pointing at the fake."""
    host, port = tls_fake.url.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    return tls_fake


def test_the_service_account_reaches_the_api_over_verified_tls(
    in_pod: FakeKube, pki: Path, tmp_path: Path
) -> None:
    account = service_account(tmp_path, pki / "ca.crt")
    endpoint = KubernetesEndpoint(in_cluster=True, service_account_dir=str(account))
    cluster = KubernetesCluster.from_endpoint(endpoint)
    assert cluster.host == in_pod.url and cluster.host.startswith("https://127.0.0.1:")
    assert [n.name for n in cluster.nodes()] == NODES
    (listed,) = in_pod.sent("GET", path="/api/v1/nodes")
    assert listed.status == 200 and listed.permission == ("list", "", "nodes", "")
    cluster.close()


def test_an_unset_in_cluster_prefers_a_present_service_account(
    in_pod: FakeKube, pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("this: [is not a kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(broken))
    account = service_account(tmp_path, pki / "ca.crt")
    cluster = KubernetesCluster.from_endpoint(KubernetesEndpoint(service_account_dir=str(account)))
    assert [n.name for n in cluster.nodes([NODES[1]])] == [NODES[1]]
    cluster.close()


def test_a_ca_that_did_not_sign_the_server_is_refused(
    in_pod: FakeKube, pki: Path, tmp_path: Path
) -> None:
    account = service_account(tmp_path, pki / "other-ca.crt")
    endpoint = KubernetesEndpoint(in_cluster=True, service_account_dir=str(account), retries=0)
    cluster = KubernetesCluster.from_endpoint(endpoint)
    refused = r"TLS with .* \(list nodes\): .*CERTIFICATE_VERIFY_FAILED.*ca\.crt"
    with pytest.raises(ClusterError, match=refused):
        cluster.nodes()
    assert in_pod.requests == []  # the handshake failed: no request was ever read
    cluster.close()


def test_missing_env_or_token_is_one_error_naming_the_directory(
    pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = service_account(tmp_path, pki / "ca.crt")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    endpoint = KubernetesEndpoint(in_cluster=True, service_account_dir=str(account))
    where = f"in-cluster service account \\({account}\\)"
    with pytest.raises(ClusterError, match=f"{where}: Service host/port is not set"):
        KubernetesCluster.from_endpoint(endpoint)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    (account / "token").unlink()
    with pytest.raises(ClusterError, match=f"{where}: Service token file does not exist"):
        KubernetesCluster.from_endpoint(endpoint)


# --- expired continue tokens ---------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with start_fake_kube() as fake:
        for name in NODES:
            fake.add_node(name)
        yield fake


def test_an_expired_continue_token_restarts_the_list_once(fake: FakeKube, tmp_path: Path) -> None:
    cluster = make_kubernetes(fake, tmp_path, page_size=1)
    fake.expire_continue()
    assert [n.name for n in cluster.nodes()] == NODES  # each once, in order
    lists = fake.sent("GET", path="/api/v1/nodes")
    assert [(bool(r.query.get("continue")), r.status) for r in lists] == [
        (False, 200),
        (True, 410),
        (False, 200),
        (True, 200),
        (True, 200),
    ]


def test_a_second_expiry_is_one_cluster_error(fake: FakeKube, tmp_path: Path) -> None:
    cluster = make_kubernetes(fake, tmp_path, page_size=1)
    fake.expire_continue(times=2)
    with pytest.raises(ClusterError, match=r"list nodes could not be paged: .*expired again"):
        cluster.nodes()
    assert [r.status for r in fake.sent("GET")] == [200, 410, 200, 410]


def test_custom_object_lists_restart_too(fake: FakeKube, tmp_path: Path) -> None:
    for name in ("nhc-a", "nhc-b", "nhc-c"):
        fake.add_health_check(name, selector={}, pause_requests=[f"{name}-pause"])
    cluster = make_kubernetes(fake, tmp_path, page_size=2)
    fake.expire_continue()
    pauses = cluster.remediation_pauses(cluster.nodes([NODES[0]])[0])
    assert [p.name for p in pauses] == ["nhc-a", "nhc-b", "nhc-c"]
    lists = fake.sent("GET", path="nodehealthchecks")
    assert [r.status for r in lists] == [200, 410, 200, 200]
