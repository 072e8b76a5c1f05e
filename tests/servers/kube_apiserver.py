"""A real control plane on 127.0.0.1, envtest-style: Debian's etcd + the pinned upstream
kube-apiserver built by tools/setup/kube-apiserver.sh, no kubelet, no controllers.

`start_control_plane()` generates a CA, a serving certificate and an admin client certificate
(openssl CLI; `system:masters`) and a ServiceAccount signing key, starts etcd and the API
server on free loopback ports with RBAC authorization, the ServiceAccount admission plugin and
token signing, waits (bounded polling) for `/readyz`, and writes an admin kubeconfig.
`service_account_kubeconfig()` creates a ServiceAccount bound to a ClusterRole YAML and writes
a kubeconfig holding a token minted through the TokenRequest API. Without a kubelet pods stay
Pending (patch `pods/status` to move them), PDB status is never computed (patch it) and the
node proxy fails: exactly the cases the adapter must survive.

A missing binary FAILS the test naming the setup step; it is never skipped. Only the PIDs
started here are stopped.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client

from tests.servers.prometheus import (
    PortTaken,
    free_port,
    on_free_port,
    poll,
    port_taken,
    require_binary,
    stop_process,
)

KUBE_VERSION = "v1.36.3"
SETUP_SCRIPT = Path(__file__).parents[2] / "tools" / "setup" / "kube-apiserver.sh"
READY_SECONDS = 90.0
BOT_NAMESPACE = "gpu-oncall"


def kube_apiserver_binary() -> str:
    """$GPU_ONCALL_KUBE_APISERVER, else the cached build; fail (never skip) naming the script."""
    explicit = os.environ.get("GPU_ONCALL_KUBE_APISERVER")
    cache = Path(os.environ.get("GPU_ONCALL_CACHE", Path.home() / ".cache" / "gpu-oncall"))
    path = Path(explicit) if explicit else cache / f"kube-apiserver-{KUBE_VERSION}"
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"kube-apiserver {KUBE_VERSION} not found at {path}: build it with "
            f"{SETUP_SCRIPT.relative_to(SETUP_SCRIPT.parents[2])} (.ci/run does this in CI)",
            pytrace=False,
        )
    return str(path)


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        [require_binary("openssl", package="openssl"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"openssl {' '.join(args[:2])} failed: {done.stderr[-800:]}", pytrace=False)


def _make_pki(pki: Path) -> None:
    """CA, serving cert (127.0.0.1/localhost), admin client cert, SA signing key: EC P-256."""
    pki.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=gpu-oncall-test-ca", cwd=pki)  # fmt: skip
    leaves = {
        "server": ("/CN=kube-apiserver", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                   "extendedKeyUsage=serverAuth"),
        "admin": ("/O=system:masters/CN=test-admin", "extendedKeyUsage=clientAuth"),
    }  # fmt: skip
    for name, (subject, extensions) in leaves.items():
        (pki / f"{name}.ext").write_text(extensions + "\n")
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
                 cwd=pki)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
                 "-extfile", f"{name}.ext", cwd=pki)  # fmt: skip
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver; `admin` is an ApiClient with system:masters."""

    workdir: Path
    url: str
    kubeconfig: Path
    etcd_url: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    def admin(self) -> client.ApiClient:
        cfg = client.Configuration()
        cfg.host = self.url
        cfg.ssl_ca_cert = str(self.ca_file)
        cfg.cert_file = str(self.workdir / "pki" / "admin.crt")
        cfg.key_file = str(self.workdir / "pki" / "admin.key")
        return client.ApiClient(cfg)

    def write_kubeconfig(self, path: Path, *, user: dict[str, Any]) -> Path:
        """A kubeconfig for this server with `user` (a kubeconfig `users[].user` mapping)."""
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
            "current-context": "test",
        }
        path.write_text(yaml.safe_dump(document))
        return path

    def mint_token(self, account: str, namespace: str = BOT_NAMESPACE) -> str:
        """A token for the ServiceAccount through the TokenRequest API (1 h)."""
        with self.admin() as api:
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
            )
            answer = client.CoreV1Api(api).create_namespaced_service_account_token(
                account, namespace, request
            )
        return str(answer.status.token)

    def service_account_kubeconfig(
        self, path: Path, *, account: str, role_file: Path, namespace: str = BOT_NAMESPACE
    ) -> Path:
        """Create (idempotently) the ServiceAccount, the ClusterRole in `role_file` (renamed
        after the account) and its binding; write a kubeconfig holding a minted token."""
        role = next(d for d in yaml.safe_load_all(role_file.read_text()) if d)
        role["metadata"] = {"name": f"{namespace}-{account}"}
        with self.admin() as api:
            core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
            _create(lambda: core.create_namespace({"metadata": {"name": namespace}}))
            _create(
                lambda: core.create_namespaced_service_account(
                    namespace, {"metadata": {"name": account}}
                )
            )
            _create(lambda: rbac.create_cluster_role(role))
            binding = {
                "metadata": {"name": f"{namespace}-{account}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role["metadata"]["name"],
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            }
            _create(lambda: rbac.create_cluster_role_binding(binding))
        return self.write_kubeconfig(path, user={"token": self.mint_token(account, namespace)})

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop_process(process)
        self.processes.clear()


def _create(call: Any) -> None:
    """Create an object; one that exists already (409) is fine."""
    try:
        call()
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def _start(argv: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    with log_file.open("wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def _alive(process: subprocess.Popen[bytes], name: str, log_file: Path) -> None:
    if process.poll() is not None:
        pytest.fail(
            f"{name} exited with {process.returncode}: {log_file.read_text()[-3000:]}",
            pytrace=False,
        )


def _apiserver_argv(apiserver: str, etcd_url: str, port: int, root: Path) -> list[str]:
    pki = root / "pki"
    return [
        apiserver,
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki / 'server.crt'}",
        f"--tls-private-key-file={pki / 'server.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--cert-dir={root / 'certs'}",
        "--authorization-mode=RBAC",
        "--enable-admission-plugins=ServiceAccount",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/24",
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        "--profiling=false",
        "--v=0",
    ]


def _ready(
    plane: ControlPlane, process: subprocess.Popen[bytes], log_file: Path, tls: ssl.SSLContext
) -> None:
    """Wait for the kube-apiserver's /readyz; PortTaken when it exited because its port was
    taken, a failure with its log when it exited otherwise."""

    def ready() -> bool:
        if port_taken(process, log_file):
            raise PortTaken(log_file.read_text(errors="replace")[-2000:])
        _alive(process, "kube-apiserver", log_file)
        try:
            return http.get(f"{plane.url}/readyz").status_code == 200
        except httpx.TransportError:
            return False

    with httpx.Client(timeout=2.0, verify=tls) as http:
        poll(
            ready,
            what=f"kube-apiserver /readyz on {plane.url} (log: {log_file})",
            seconds=READY_SECONDS,
        )


@contextmanager
def start_control_plane(workdir: Path | None = None) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on free 127.0.0.1 ports for the duration of the block."""
    apiserver = kube_apiserver_binary()
    etcd = require_binary("etcd", package="etcd-server")
    owned = workdir is None
    root = Path(tempfile.mkdtemp(prefix="kube-control-plane-")) if workdir is None else workdir
    pki = root / "pki"
    _make_pki(pki)
    etcd_port, peer_port = free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    plane = ControlPlane(
        workdir=root,
        url="",  # set as the kube-apiserver starts on its port
        kubeconfig=root / "admin.kubeconfig",
        etcd_url=etcd_url,
    )
    try:
        etcd_log = root / "etcd.log"
        etcd_process = _start(
            [
                etcd,
                "--name=test",
                f"--data-dir={root / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=test=http://127.0.0.1:{peer_port}",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
            etcd_log,
        )
        plane.processes.append(etcd_process)
        with httpx.Client(timeout=2.0) as http:

            def etcd_ready() -> bool:
                _alive(etcd_process, "etcd", etcd_log)
                try:
                    return http.get(f"{etcd_url}/health").status_code == 200
                except httpx.TransportError:
                    return False

            poll(etcd_ready, what=f"etcd /health on {etcd_url} (log: {etcd_log})")
        api_log = root / "kube-apiserver.log"
        admin_cert = (str(pki / "admin.crt"), str(pki / "admin.key"))
        tls = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        tls.load_cert_chain(*admin_cert)

        def start_api(port: int) -> None:
            plane.url = f"https://127.0.0.1:{port}"
            process = _start(_apiserver_argv(apiserver, etcd_url, port, root), api_log)
            plane.processes.append(process)
            try:
                _ready(plane, process, api_log, tls)
            except PortTaken:
                plane.processes.remove(process)
                raise

        on_free_port(start_api, what="kube-apiserver")
        plane.write_kubeconfig(
            plane.kubeconfig,
            user={"client-certificate": admin_cert[0], "client-key": admin_cert[1]},
        )
        yield plane
    finally:
        plane.stop()
        if owned:
            shutil.rmtree(root, ignore_errors=True)
