"""Request attributes and RBAC for the fake Kubernetes API server, as kube-apiserver derives them.

`request_info` turns a method and path into the (verb, group, resource, subresource, namespace,
name) an authorizer sees; `Rules` answers whether the bot's service account may do it and
words a refusal exactly as the real API does. No HTTP and no object state here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

USER = "system:serviceaccount:gpu-oncall:gpu-oncall"
VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update"}


@dataclass(frozen=True)
class RequestInfo:
    """What kube-apiserver's RequestInfoFactory would make of a request."""

    verb: str
    group: str
    version: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    rest: str = ""  # the path after a `proxy` subresource

    @property
    def permission(self) -> tuple[str, str, str, str]:
        """(verb, group, resource, subresource): what RBAC is asked."""
        return (self.verb, self.group, self.resource, self.subresource)


def request_info(method: str, path: str, query: dict[str, str]) -> RequestInfo | None:
    """None for a path that is not a resource path (e.g. `/version`)."""
    parts = [p for p in path.split("/") if p != ""]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    tail = "/".join(rest[3:]) + ("/" if path.endswith("/") and len(rest) > 3 else "")
    if method == "GET":
        verb = ("watch" if query.get("watch") == "true" else "list") if not name else "get"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = VERBS.get(method, method.lower())
    return RequestInfo(
        verb=verb,
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        rest=tail,
    )


@dataclass
class Rules:
    """The bot's RBAC: everything is granted unless `granted` is set (then only those), minus
    `denied`. Keys are (verb, group, resource, subresource)."""

    granted: set[tuple[str, str, str, str]] | None = None
    denied: set[tuple[str, str, str, str]] = field(default_factory=set)

    def allows(self, key: tuple[str, str, str, str]) -> bool:
        if key in self.denied:
            return False
        return self.granted is None or key in self.granted

    def forbidden_message(self, info: RequestInfo) -> str:
        """`nodes "x" is forbidden: User "..." cannot patch resource "nodes" in API group ""
        at the cluster scope`, as kube-apiserver words an RBAC refusal."""
        what = info.resource + (f"/{info.subresource}" if info.subresource else "")
        subject = f'{info.resource} "{info.name}"' if info.name else info.resource
        scope = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
        return (
            f'{subject} is forbidden: User "{USER}" cannot {info.verb} resource "{what}" '
            f'in API group "{info.group}" {scope}'
        )

    def review(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """A SelfSubjectAccessReview's status for `spec.resourceAttributes`."""
        key = (
            str(attributes.get("verb", "")),
            str(attributes.get("group", "")),
            str(attributes.get("resource", "")),
            str(attributes.get("subresource", "")),
        )
        if self.allows(key):
            return {
                "allowed": True,
                "reason": 'RBAC: allowed by ClusterRoleBinding "gpu-oncall" of ClusterRole '
                '"gpu-oncall" to ServiceAccount "gpu-oncall/gpu-oncall"',
            }
        return {"allowed": False}
