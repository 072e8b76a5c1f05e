"""Where the API server is and who the bot is there: KubernetesEndpoint -> a client
Configuration (a direct URL and token, the pod's service account, or a kubeconfig). Never
process-global config.

A kubeconfig user's impersonation (`as`, `as-uid`, `as-groups`) is honoured as kubectl does,
with the Impersonate-User / -Uid / -Group headers (the Python client's loader ignores it, so
the bot would otherwise act with the underlying credentials). Each group is its own
Impersonate-Group header, as kubectl sends them (the client's default headers are one value a
name, so `impersonate_groups` adds them per request through urllib3's HTTPHeaderDict);
`as-user-extra` is refused at start with one line, never dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.config import incluster_config
from kubernetes.config.config_exception import ConfigException
from urllib3 import HTTPHeaderDict

from integrations.errors import ClusterError

# The config loaders are untyped; give them a type once, here.
_load_kube_config: Callable[..., None] = config.load_kube_config
_InClusterLoader: Callable[..., Any] = incluster_config.InClusterConfigLoader

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
GROUP_HEADER = "Impersonate-Group"


@dataclass(frozen=True)
class KubernetesEndpoint:
    """How to reach the API server. `host` (with `token`/`ca_file`) is a direct URL;
    otherwise `in_cluster` None means: the pod's service account when present (a `token` in
    `service_account_dir`, with its `ca.crt`; the API server from KUBERNETES_SERVICE_HOST and
    KUBERNETES_SERVICE_PORT), else the kubeconfig (`kubeconfig`, or KUBECONFIG, or
    ~/.kube/config) and its `context`."""

    host: str | None = None
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    insecure_skip_verify: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    service_account_dir: str = SERVICE_ACCOUNT_DIR
    timeout_seconds: float = 10.0
    retries: int = 3
    backoff_seconds: float = 0.2
    qps: float = 20.0
    burst: int = 40


def in_cluster(endpoint: KubernetesEndpoint) -> bool:
    """Whether the endpoint means the pod's service account (see KubernetesEndpoint)."""
    if endpoint.in_cluster is not None:
        return endpoint.in_cluster
    return os.path.exists(os.path.join(endpoint.service_account_dir, "token"))


@dataclass(frozen=True)
class Impersonation:
    """Who a kubeconfig user acts as (kubectl's `--as`, `--as-group`, `--as-uid`)."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    def headers(self) -> dict[str, str]:
        """The single-valued headers; the groups go through `impersonate_groups`."""
        found = {"Impersonate-User": self.user}
        if self.uid:
            found["Impersonate-Uid"] = self.uid
        return found


def impersonate_groups(api_client: client.ApiClient, groups: Sequence[str]) -> None:
    """Send one Impersonate-Group header per group on every request of `api_client` (the
    API server reads the header's repeated values; one comma-joined value would be one group
    named "a,b")."""
    rest: Any = api_client.rest_client
    request = rest.request

    def with_groups(method: str, url: str, *args: Any, **kw: Any) -> Any:
        headers = HTTPHeaderDict(kw.pop("headers", None) or {})
        headers.discard(GROUP_HEADER)
        for group in groups:
            headers.add(GROUP_HEADER, group)
        return request(method, url, *args, headers=headers, **kw)

    rest.request = with_groups


def kubeconfig_impersonation(path: str | None, context: str | None) -> Impersonation | None:
    """The impersonation of the kubeconfig's (current or named) context's user, if any.
    `path` None means KUBECONFIG (its first file that names the context) or ~/.kube/config."""
    files = [path] if path else os.environ.get("KUBECONFIG", "").split(os.pathsep)
    files = [f for f in files if f] or [os.path.expanduser("~/.kube/config")]
    documents = []
    for name in files:
        if os.path.exists(name):
            with open(name, encoding="utf-8") as handle:
                loaded = yaml.safe_load(handle) or {}
            if isinstance(loaded, Mapping):
                documents.append(loaded)
    current = context or next(
        (d.get("current-context") for d in documents if d.get("current-context")), None
    )
    user_name = _find(documents, "contexts", current, "context").get("user")
    user = _find(documents, "users", user_name, "user")
    who, groups = user.get("as"), tuple(str(g) for g in user.get("as-groups") or ())
    if not who and (groups or user.get("as-uid")):
        raise ClusterError(
            f"kubeconfig user '{user_name}': as-groups/as-uid need `as` (the user to act as)"
        )
    if not who:
        return None
    where = f"kubeconfig user '{user_name}' impersonates '{who}'"
    if user.get("as-user-extra"):
        raise ClusterError(f"{where} with as-user-extra, which the bot cannot send; remove it")
    return Impersonation(user=str(who), groups=groups, uid=str(user.get("as-uid") or ""))


def _find(
    documents: list[Mapping[str, Any]], section: str, name: Any, key: str
) -> Mapping[str, Any]:
    for document in documents:
        for entry in document.get(section) or ():
            if isinstance(entry, Mapping) and entry.get("name") == name:
                found = entry.get(key)
                return found if isinstance(found, Mapping) else {}
    return {}


def make_configuration(endpoint: KubernetesEndpoint) -> client.Configuration:
    """A client Configuration for the endpoint; bad or missing credentials raise ClusterError."""
    cfg = client.Configuration()
    account = endpoint.service_account_dir
    inside = in_cluster(endpoint)
    where = endpoint.kubeconfig or "KUBECONFIG or ~/.kube/config"
    source = f"the in-cluster service account ({account})" if inside else f"kubeconfig {where}"
    try:
        if endpoint.host:
            cfg.host = endpoint.host.rstrip("/")
            if endpoint.token:
                cfg.api_key = {"BearerToken": endpoint.token}
                cfg.api_key_prefix = {"BearerToken": "Bearer"}
        elif inside:
            # The loader re-reads the token file every minute: projected tokens rotate.
            _InClusterLoader(
                token_filename=os.path.join(account, "token"),
                cert_filename=os.path.join(account, "ca.crt"),
            ).load_and_set(cfg)
        else:
            _load_kube_config(
                config_file=endpoint.kubeconfig, context=endpoint.context, client_configuration=cfg
            )
    except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        raise ClusterError(f"cannot load Kubernetes credentials from {source}: {exc}") from exc
    if endpoint.ca_file:
        cfg.ssl_ca_cert = endpoint.ca_file
    if endpoint.insecure_skip_verify:
        cfg.verify_ssl = False
    cfg.retries = False  # retries are ours (bounded, with backoff), not urllib3's
    return cfg
