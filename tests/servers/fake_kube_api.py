"""The routes of the fake Kubernetes API server: what each call does to the fake's objects.

Called by `FakeKube.handle` with the fake's lock held, after authentication and RBAC. Answers
like kube-apiserver: Status bodies with reason and code for 400/404/409/415/422/429.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.servers import fake_kube_jobs as jobs
from tests.servers import kube_objects as ko
from tests.servers.fake_kube import KERNEL_LOG_FILE, PATCH_TYPES, PDB_MESSAGE, _Answer, _fail
from tests.servers.kube_routes import RequestInfo

if TYPE_CHECKING:
    from tests.servers.fake_kube import FakeKube

JSON = dict[str, Any]
GO_PATCH = "Go value of type jsonpatch.Patch"
GO_MAP = "Go value of type map[string]interface {}"


@dataclass(frozen=True)
class Req:
    """One routed request: its RBAC attributes, query, parsed body and content type."""

    info: RequestInfo
    query: dict[str, str]
    body: Any
    content_type: str

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def namespace(self) -> str:
        return self.info.namespace


def route(fake: FakeKube, method: str, path: str, req: Req | None) -> tuple[int, Any]:
    if req is None:
        if path == "/version":
            return 200, {"major": "1", "minor": "36", "gitVersion": "v1.36.0-fake"}
        raise _fail(404, "NotFound", "the server could not find the requested resource")
    info = req.info
    handler = ROUTES.get((info.group, info.resource, info.subresource, method, bool(info.name)))
    if handler is None:
        raise _fail(405, "MethodNotAllowed", f"the server does not allow {method} {path}")
    return handler(fake, req)


# --- nodes -----------------------------------------------------------------------------------


def _node(fake: FakeKube, name: str) -> JSON:
    if name not in fake.nodes:
        raise _fail(404, "NotFound", f'nodes "{name}" not found', name=name, kind="nodes")
    return fake._node_view(name)


def list_nodes(fake: FakeKube, req: Req) -> tuple[int, Any]:
    terms = _selector(req.query, ko.NODE_SELECTOR_FIELDS)
    labels = ko.parse_label_selector(req.query.get("labelSelector", ""))
    items = [
        copy.deepcopy(fake._node_view(n))
        for n in sorted(fake.nodes)
        if ko.selected(fake.nodes[n], terms)
        and ko.matches_labels(labels, fake.nodes[n]["metadata"]["labels"])
    ]
    return 200, fake.list_page("NodeList", items, req.query)


def get_node(fake: FakeKube, req: Req) -> tuple[int, Any]:
    node = copy.deepcopy(_node(fake, req.name))
    fake._interfere_after_read(req.name)
    return 200, node


def patch_node(fake: FakeKube, req: Req) -> tuple[int, Any]:
    name, body, content_type = req.name, req.body, req.content_type
    node = _node(fake, name)
    if content_type not in PATCH_TYPES:
        raise _fail(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(PATCH_TYPES),
        )
    if content_type == "application/json-patch+json":
        if not isinstance(body, list):
            raise _fail(400, "BadRequest", f"json: cannot unmarshal object into {GO_PATCH}")
        try:
            patched = ko.json_patch(node, body)
        except (ko.PatchError, KeyError, IndexError, ValueError) as exc:
            message = f"the server rejected our request due to an error in our request: {exc}"
            raise _fail(422, "Invalid", message) from exc
    else:
        if not isinstance(body, dict):
            raise _fail(400, "BadRequest", f"json: cannot unmarshal array into {GO_MAP}")
        patched = ko.merge_patch(node, body)
    wanted_rv = patched["metadata"].get("resourceVersion")
    if wanted_rv != node["metadata"]["resourceVersion"]:
        raise _fail(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            name=name,
            kind="nodes",
        )
    _validate_node(patched)
    if patched != node:
        patched["metadata"]["resourceVersion"] = str(next(fake._rv))
        ko.reconcile_taints(patched)
        fake.nodes[name] = patched
    return 200, copy.deepcopy(fake.nodes[name])


def _validate_node(node: JSON) -> None:
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(node["spec"].get("taints") or []):
        if taint.get("effect") not in ko.EFFECTS:
            raise _fail(
                422,
                "Invalid",
                f'Node "{node["metadata"]["name"]}" is invalid: spec.taints[{index}].effect: '
                f'Unsupported value: "{taint.get("effect")}": supported values: '
                '"NoSchedule", "PreferNoSchedule", "NoExecute"',
            )
        pair = (taint.get("key", ""), taint["effect"])
        if pair in seen:
            raise _fail(
                422,
                "Invalid",
                f'Node "{node["metadata"]["name"]}" is invalid: spec.taints[{index}]: '
                "Duplicate value: "
                f'"{pair[0]}:{pair[1]}": taints must be unique by key and effect pair',
            )
        seen.add(pair)


def node_proxy(fake: FakeKube, req: Req) -> tuple[int, Any]:
    """The kubelet's `/logs/` behind the API server proxy (KEP-2258 node log query)."""
    name, query = req.name, req.query
    _node(fake, name)
    if req.info.rest.rstrip("/") != "logs":
        raise _Answer(404, "404 page not found\n")
    if not fake.node_log_query:
        # Without NodeLogQuery the kubelet's /logs/ is a file server over /var/log.
        listing = f'<pre>\n<a href="{KERNEL_LOG_FILE}">{KERNEL_LOG_FILE}</a>\n</pre>\n'
        head = '<!doctype html>\n<meta name="viewport" content="width=device-width">\n'
        return 200, head + listing
    target = query.get("query", "")
    options = {k for k in ("sinceTime", "untilTime", "tailLines", "boot", "pattern") if k in query}
    is_file = "/" in target or "\\" in target
    if is_file and options:
        raise _Answer(400, f'query: Invalid value: ["{target}"]: cannot specify file with options')
    if target.strip("/") not in (KERNEL_LOG_FILE, KERNEL_LOG_FILE.removesuffix(".log")):
        if is_file:
            missing = f"stat /var/log/{target.strip('/')}: no such file or directory"
            raise _Answer(400, f'query: Invalid value: ["{target}"]: {missing}')
        return 200, f"\nlog not found for {target}\n"
    lines = fake.source.kernel_log(name) if fake.source else None
    lines = fake.kernel_logs.get(name, []) if lines is None else lines
    return 200, "".join(line + "\n" for line in lines)


# --- pods ------------------------------------------------------------------------------------


def _pod(fake: FakeKube, namespace: str, name: str) -> JSON:
    pod = fake.pods.get((namespace, name))
    if pod is None:
        raise _fail(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
    return pod


def list_pods(fake: FakeKube, req: Req) -> tuple[int, Any]:
    namespace, terms = req.namespace, _selector(req.query, ko.POD_SELECTOR_FIELDS)
    labels = ko.parse_label_selector(req.query.get("labelSelector", ""))
    items = [
        copy.deepcopy(pod)
        for (ns, _), pod in sorted(fake.pods.items())
        if (not namespace or ns == namespace)
        and ko.selected(pod, terms)
        and ko.matches_labels(labels, pod["metadata"]["labels"])
    ]
    return 200, fake.list_page("PodList", items, req.query)


def get_pod(fake: FakeKube, req: Req) -> tuple[int, Any]:
    return 200, copy.deepcopy(_pod(fake, req.namespace, req.name))


def delete_pod(fake: FakeKube, req: Req) -> tuple[int, Any]:
    namespace, name, body = req.namespace, req.name, req.body
    options = body if isinstance(body, dict) else {}
    if body is not None and options.get("kind", "DeleteOptions") != "DeleteOptions":
        raise _fail(400, "BadRequest", "the body of a DELETE must be DeleteOptions")
    pod = _pod(fake, namespace, name)
    del fake.pods[(namespace, name)]
    return 200, copy.deepcopy(pod)


def evict_pod(fake: FakeKube, req: Req) -> tuple[int, Any]:
    """policy/v1 Eviction: honours PodDisruptionBudgets like the eviction REST handler."""
    namespace, name, body = req.namespace, req.name, req.body
    shape = (body.get("apiVersion"), body.get("kind")) if isinstance(body, dict) else None
    if shape != ("policy/v1", "Eviction"):
        raise _fail(400, "BadRequest", "the body must be an Eviction of apiVersion policy/v1")
    meta = body.get("metadata") or {}
    if meta.get("name") != name:
        raise _fail(400, "BadRequest", "name in URL does not match name in Eviction object")
    if meta.get("namespace", namespace) != namespace:
        message = "namespace in URL does not match namespace in Eviction object"
        raise _fail(400, "BadRequest", message)
    pod = _pod(fake, namespace, name)
    if pod["status"].get("phase") not in ("Pending", "Succeeded", "Failed"):
        _check_budget(fake, pod)
    del fake.pods[(namespace, name)]
    return 201, ko.status_body(201, "", "", success=True)


def _check_budget(fake: FakeKube, pod: JSON) -> None:
    namespace, labels = pod["metadata"]["namespace"], pod["metadata"]["labels"]
    matching = [
        pdb
        for (ns, _), pdb in sorted(fake.pdbs.items())
        if ns == namespace and ko.matches_labels(pdb["spec"]["selector"]["matchLabels"], labels)
    ]
    if len(matching) > 1:
        message = (
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support."
        )
        raise _fail(500, "InternalError", message)
    if not matching:
        return
    pdb = matching[0]
    selector = pdb["spec"]["selector"]["matchLabels"]
    covered = [
        p
        for (ns, _), p in fake.pods.items()
        if ns == namespace and ko.matches_labels(selector, p["metadata"]["labels"])
    ]
    allowed, desired, healthy = ko.budget(pdb, covered)
    if allowed > 0 or (not ko.pod_healthy(pod) and healthy >= desired):
        return
    cause = {
        "reason": "DisruptionBudget",
        "message": f"The disruption budget {pdb['metadata']['name']} needs {desired} healthy "
        f"pods and has {healthy} currently",
    }
    raise _fail(429, "TooManyRequests", PDB_MESSAGE, causes=[cause])


def pod_log(fake: FakeKube, req: Req) -> tuple[int, Any]:
    from tests.servers.fake_kube import since_cutoff

    namespace, name, query = req.namespace, req.name, req.query
    pod = _pod(fake, namespace, name)
    containers = [c["name"] for c in pod["spec"]["containers"]]
    container = query.get("container")
    if container is None:
        if len(containers) > 1:
            choices = " ".join(containers)
            message = f"a container name must be specified for pod {name}, choose one of: "
            raise _fail(400, "BadRequest", f"{message}[{choices}]")
        container = containers[0]
    if container not in containers:
        raise _fail(400, "BadRequest", f"container {container} is not valid for pod {name}")
    live = fake.source.pod_log(namespace, name) if fake.source else None
    stored = fake.pod_logs.get((namespace, name, container), [])
    entries = [(None, line) for line in live] if live is not None else stored
    cutoff = since_cutoff(fake, query.get("sinceSeconds"))
    lines = [text for at, text in entries if cutoff is None or at is None or at >= cutoff]
    if "tailLines" in query:
        tail = int(query["tailLines"])
        lines = lines[-tail:] if tail > 0 else []
    return 200, "".join(line + "\n" for line in lines)


# --- events and access reviews ---------------------------------------------------------------


def list_events(fake: FakeKube, req: Req) -> tuple[int, Any]:
    namespace, terms = req.namespace, _selector(req.query, ko.EVENT_SELECTOR_FIELDS)
    live = fake.source.events() if fake.source else []
    items = [
        copy.deepcopy(e)
        for e in fake.events + live
        if (not namespace or e["metadata"]["namespace"] == namespace) and ko.selected(e, terms)
    ]
    return 200, fake.list_page("EventList", items, req.query)


def list_health_checks(fake: FakeKube, req: Req) -> tuple[int, Any]:
    """medik8s NodeHealthChecks (v1alpha1, the served version); 404 as for a CRD that is not
    installed while none was added."""
    if req.info.version != "v1alpha1" or not fake.health_checks:
        raise _fail(404, "NotFound", "the server could not find the requested resource")
    items = [copy.deepcopy(c) for _, c in sorted(fake.health_checks.items())]
    page = fake.list_page("NodeHealthCheckList", items, req.query)
    return 200, page | {"apiVersion": ko.NHC_API_VERSION}


def access_review(fake: FakeKube, req: Req) -> tuple[int, Any]:
    body = req.body
    if not isinstance(body, dict) or body.get("kind") != "SelfSubjectAccessReview":
        raise _fail(400, "BadRequest", "the body must be a SelfSubjectAccessReview")
    attributes = (body.get("spec") or {}).get("resourceAttributes") or {}
    answer = dict(body) | {"metadata": {}, "status": fake.rules.review(attributes)}
    return 201, answer


def _selector(query: dict[str, str], supported: tuple[str, ...]) -> list[tuple[str, str, bool]]:
    try:
        return ko.parse_selector(query.get("fieldSelector", ""), supported=supported)
    except ValueError as exc:
        raise _fail(400, "BadRequest", str(exc)) from exc


ROUTES: dict[tuple[str, str, str, str, bool], Callable[[FakeKube, Req], tuple[int, Any]]] = {
    ("", "nodes", "", "GET", False): list_nodes,
    ("", "nodes", "", "GET", True): get_node,
    ("", "nodes", "", "PATCH", True): patch_node,
    ("", "nodes", "proxy", "GET", True): node_proxy,
    ("", "pods", "", "GET", False): list_pods,
    ("", "pods", "", "GET", True): get_pod,
    ("", "pods", "", "DELETE", True): delete_pod,
    ("", "pods", "eviction", "POST", True): evict_pod,
    ("", "pods", "log", "GET", True): pod_log,
    ("", "events", "", "GET", False): list_events,
    ("remediation.medik8s.io", "nodehealthchecks", "", "GET", False): list_health_checks,
    ("authorization.k8s.io", "selfsubjectaccessreviews", "", "POST", False): access_review,
    ("batch", "jobs", "", "POST", False): jobs.create_job,
    ("batch", "jobs", "", "GET", True): jobs.get_job,
}
