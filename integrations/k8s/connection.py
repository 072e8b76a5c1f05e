"""Where the API server is and who the bot is there: KubernetesEndpoint -> a client
Configuration (a direct URL and token, the pod's service account, or a kubeconfig). Never
process-global config.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.config import incluster_config
from kubernetes.config.config_exception import ConfigException

from integrations.errors import ClusterError

# The config loaders are untyped; give them a type once, here.
_load_kube_config: Callable[..., None] = config.load_kube_config
_InClusterLoader: Callable[..., Any] = incluster_config.InClusterConfigLoader

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


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


def make_configuration(endpoint: KubernetesEndpoint) -> client.Configuration:
    """A client Configuration for the endpoint; bad or missing credentials raise ClusterError."""
    cfg = client.Configuration()
    in_cluster = endpoint.in_cluster
    account = endpoint.service_account_dir
    if in_cluster is None:
        in_cluster = os.path.exists(os.path.join(account, "token"))
    where = endpoint.kubeconfig or "KUBECONFIG or ~/.kube/config"
    source = f"the in-cluster service account ({account})" if in_cluster else f"kubeconfig {where}"
    try:
        if endpoint.host:
            cfg.host = endpoint.host.rstrip("/")
            if endpoint.token:
                cfg.api_key = {"BearerToken": endpoint.token}
                cfg.api_key_prefix = {"BearerToken": "Bearer"}
        elif in_cluster:
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
