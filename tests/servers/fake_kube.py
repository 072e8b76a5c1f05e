"""A fake Kubernetes API server on 127.0.0.1 that answers like kube-apiserver and records
every request (kopf's kmock, bolt's mock Web API server).

`FakeKube` holds nodes, pods, core/v1 events, policy/v1 PodDisruptionBudgets and an RBAC rule
set, and serves the calls the bot's `KubernetesCluster` makes over real HTTP: lists with
`limit`/`continue`, field selectors (unsupported fields get 400), node PATCH in the three patch
content types with 409 on a stale `metadata.resourceVersion`, pod DELETE, the policy/v1
Eviction subresource (429 "Cannot evict pod as it would violate the pod's disruption budget."
from a PDB whose disruptionsAllowed, computed like the disruption controller, is 0), pod logs,
the kubelet node log query through `/api/v1/nodes/N/proxy/logs/`, SelfSubjectAccessReview,
batch/v1 Jobs with a planned outcome (`plan_jobs`, see `tests.servers.fake_kube_jobs`),
and 401 / 403 / 404 as Status bodies. Each request is kept in `requests` with its RBAC
attributes so tests assert on what the API received.

`stall(method, path_contains)` holds a request until the test releases it (applied, or
answered with an error), so a client can be killed in the middle of a write.
medik8s NodeHealthChecks (`add_health_check`; the list 404s, as without the CRD, until one is
added), an expiring `continue` token (`expire_continue`: 410 Gone as after etcd compaction),
and TLS with a given certificate (`tls=`, for the in-cluster service-account path).
`seed_from_fleet(fleet)` mirrors a simulated fleet; `write_kubeconfig(path)` points a client
at the fake; `start_fake_kube()` is the context manager tests use.
"""

from __future__ import annotations

import base64
import itertools
import json
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlsplit

import yaml

from tests.servers import kube_objects as ko
from tests.servers.kube_routes import RequestInfo, Rules, request_info

if TYPE_CHECKING:
    from simulator.fleet import Fleet
    from tests.servers.fake_kube_jobs import JobPlan

TOKEN = "fake-kube-token"
JSON = dict[str, Any]
PATCH_TYPES = (
    "application/strategic-merge-patch+json",
    "application/merge-patch+json",
    "application/json-patch+json",
)
KERNEL_LOG_FILE = "kern.log"
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
STALL_SECONDS = 120.0
"""The longest a stalled request is held if the test never releases it."""


@dataclass(frozen=True)
class KubeRequest:
    """One request the fake received, with the attributes RBAC saw (None for non-resource
    paths) and the status it answered."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    info: RequestInfo | None
    status: int = 0

    @property
    def permission(self) -> tuple[str, str, str, str] | None:
        return None if self.info is None else self.info.permission


class LiveSource(Protocol):
    """Time-dependent parts of a mirrored world, read at request time."""

    def node_status(self, node: str) -> JSON | None: ...

    def kernel_log(self, node: str) -> list[str] | None: ...

    def pod_log(self, namespace: str, pod: str) -> list[str] | None: ...

    def events(self) -> list[JSON]: ...


@dataclass
class _Failure:
    status: int
    times: int
    method: str | None
    path_contains: str | None


@dataclass
class Stall:
    """One request held by the fake (`FakeKube.stall`): `arrived` is set when it reaches the
    server, `request` says what it was; it waits until `release()`, then is applied as usual,
    or answered with `status` (nothing applied) when given. A test kills the client in between
    to crash it in the middle of a write."""

    method: str
    path_contains: str
    where: Callable[[Any], bool] | None = None
    """Hold only a request whose parsed body this accepts."""
    arrived: threading.Event = field(default_factory=threading.Event)
    request: tuple[str, str, Any] | None = None
    """(method, path, body) of the held request, once it arrived."""
    status: int | None = None
    _released: threading.Event = field(default_factory=threading.Event)

    def release(self, *, status: int | None = None) -> None:
        """Let the held request go on: applied, or answered with `status` and not applied."""
        self.status = status
        self._released.set()

    def wait_released(self, seconds: float) -> bool:
        return self._released.wait(seconds)


class _Answer(Exception):
    """Raised inside a route to answer with a Status (or a text body)."""

    def __init__(self, code: int, body: JSON | str, headers: Mapping[str, str] | None = None):
        super().__init__(code)
        self.code, self.body, self.headers = code, body, dict(headers or {})


def _fail(code: int, reason: str, message: str, **details: Any) -> _Answer:
    return _Answer(code, ko.status_body(code, reason, message, details=details or None))


@dataclass
class FakeKube:
    """Start with `start()` (or `start_fake_kube()`), point a client at `url` with `TOKEN`."""

    nodes: dict[str, JSON] = field(default_factory=dict)
    pods: dict[tuple[str, str], JSON] = field(default_factory=dict)
    events: list[JSON] = field(default_factory=list)
    pdbs: dict[tuple[str, str], JSON] = field(default_factory=dict)
    health_checks: dict[str, JSON] = field(default_factory=dict)
    """NodeHealthChecks by name; while empty the CRD counts as not installed (404)."""
    jobs: dict[tuple[str, str], JSON] = field(default_factory=dict)
    """batch/v1 Jobs by (namespace, name); see `tests.servers.fake_kube_jobs`."""
    job_reads: dict[tuple[str, str], int] = field(default_factory=dict)
    job_plan: JobPlan | None = None
    """What created Jobs do (`plan_jobs`); None: they run forever."""
    tls: tuple[Path, Path] | None = None
    """(certificate chain, key): serve HTTPS with them."""
    rules: Rules = field(default_factory=Rules)
    requests: list[KubeRequest] = field(default_factory=list)
    source: LiveSource | None = None
    node_log_query: bool = True
    """Whether kubelets answer the node log query (NodeLogQuery feature gate + kubelet config)."""
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    pod_logs: dict[tuple[str, str, str], list[tuple[datetime | None, str]]] = field(
        default_factory=dict
    )
    kernel_logs: dict[str, list[str]] = field(default_factory=dict)
    _rv: Iterator[int] = field(default_factory=lambda: itertools.count(1000))
    _failures: list[_Failure] = field(default_factory=list)
    _expire_continue: int = 0
    _stalls: list[Stall] = field(default_factory=list)
    _interference: dict[str, list[JSON | None]] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeKube is not started")
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"

    def start(self) -> FakeKube:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release_stalls()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def write_kubeconfig(self, path: Path, *, context: str = "fake") -> Path:
        """A kubeconfig whose `context` (also current) reaches the fake with a bearer token."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "gpu-oncall", "user": {"token": TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "gpu-oncall"}}],
            "current-context": context,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        return path

    # --- world ---------------------------------------------------------------------------

    def add_node(self, name: str, **fields: Any) -> JSON:
        """A node (see `kube_objects.node_object` for the fields); returns the stored object."""
        node = ko.node_object(name, **fields)
        with self._lock:
            self._store(node)
            ko.reconcile_taints(node)
            self.nodes[name] = node
        return node

    def add_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        logs: Mapping[str, list[str]] | None = None,
        **fields: Any,
    ) -> JSON:
        """A pod (see `kube_objects.pod_object`); `logs` maps container -> lines."""
        if logs:
            fields.setdefault("containers", tuple(logs))
        pod = ko.pod_object(name, namespace, **fields)
        with self._lock:
            self._store(pod)
            self.pods[(namespace, name)] = pod
            for container, lines in (logs or {}).items():
                self.pod_logs[(namespace, name, container)] = [(None, line) for line in lines]
        return pod

    def add_pod_log(
        self, pod: str, namespace: str, container: str, line: str, *, at: datetime
    ) -> None:
        """One log line with its container-runtime timestamp (sinceSeconds filters on it)."""
        self.pod_logs.setdefault((namespace, pod, container), []).append((at, line))

    def add_pdb(self, name: str, namespace: str = "default", **fields: Any) -> JSON:
        """A PodDisruptionBudget (`match_labels`, `min_available` | `max_unavailable`)."""
        pdb = ko.pdb_object(name, namespace, **fields)
        with self._lock:
            self._store(pdb)
            self.pdbs[(namespace, name)] = pdb
            selector = pdb["spec"]["selector"]["matchLabels"]
            covered = [
                p
                for (ns, _), p in self.pods.items()
                if ns == namespace and ko.matches_labels(selector, p["metadata"]["labels"])
            ]
            ko.budget(pdb, covered)  # the controller's first count of expected pods
        return pdb

    def add_health_check(
        self, name: str, *, selector: JSON | None = None, pause_requests: list[str] | None = None
    ) -> JSON:
        """A medik8s NodeHealthCheck (cluster-scoped, remediation.medik8s.io/v1alpha1)
        selecting nodes by `selector` (a LabelSelector), paused by `pause_requests`."""
        check = ko.health_check_object(name, selector=selector, pause_requests=pause_requests)
        with self._lock:
            self._store(check)
            self.health_checks[name] = check
        return check

    def plan_jobs(self, plan: JobPlan | None) -> None:
        """Jobs created from now on finish as `plan` says (None: they never finish)."""
        with self._lock:
            self.job_plan = plan

    def expire_continue(self, *, times: int = 1) -> None:
        """The next `times` list requests that carry a `continue` token get 410 Gone
        (reason Expired), as when etcd compacted past the token's revision."""
        self._expire_continue += times

    def add_event(
        self,
        *,
        kind: str,
        name: str,
        reason: str,
        message: str,
        at: datetime,
        namespace: str = "",
        type: str = "Normal",
    ) -> JSON:
        """An event about a Node (`namespace` "") or a Pod; node events live in `default`."""
        with self._lock:
            event = ko.event_object(
                name=f"{name}.{next(self._rv):x}",
                namespace=namespace or "default",
                kind=kind,
                object_name=name,
                object_namespace=namespace,
                reason=reason,
                message=message,
                at=at,
                type=type,
            )
            self._store(event)
            self.events.append(event)
        return event

    def deny(self, verb: str, resource: str, *, group: str = "", subresource: str = "") -> None:
        """RBAC: refuse `verb` on `resource[/subresource]` from now on (403)."""
        self.rules.denied.add((verb, group, resource, subresource))

    def grant_only(self, permissions: set[tuple[str, str, str, str]]) -> None:
        """RBAC: grant exactly these (verb, group, resource, subresource) and nothing else."""
        self.rules.granted = set(permissions)

    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Answer the next `times` matching requests with `status` (503, 500, 429 throttle)."""
        self._failures.append(_Failure(status, times, method, path_contains))

    def stall(
        self, method: str, path_contains: str, *, where: Callable[[Any], bool] | None = None
    ) -> Stall:
        """Hold the next request of `method` whose path contains `path_contains` (and whose
        body `where` accepts) until the returned handle is released (see `Stall`); later
        matching requests pass."""
        held = Stall(method, path_contains, where)
        with self._lock:
            self._stalls.append(held)
        return held

    def interfere(self, node: str, *, times: int = 1, taint: str | None = None) -> None:
        """Another writer changes the node right after each of the next `times` reads of it
        (new resourceVersion; adds `taint` if given), so a read-modify-write meets a 409."""
        self._interference.setdefault(node, []).extend(
            [ko.parse_taint(taint) if taint else None] * times
        )

    def seed_from_fleet(self, fleet: Fleet) -> None:
        """Mirror a simulated fleet (see `tests.servers.fake_kube_fleet`)."""
        from tests.servers.fake_kube_fleet import seed

        seed(self, fleet)

    # --- reading the record --------------------------------------------------------------

    def sent(self, method: str | None = None, *, path: str | None = None) -> list[KubeRequest]:
        """Recorded requests, optionally only one method and/or those whose path contains
        `path`."""
        return [
            r
            for r in list(self.requests)
            if (method is None or r.method == method) and (path is None or path in r.path)
        ]

    def node(self, name: str) -> JSON:
        with self._lock:
            return self._node_view(name)

    # --- internals -----------------------------------------------------------------------

    def _store(self, obj: JSON) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")

    def _node_view(self, name: str) -> JSON:
        node = self.nodes[name]
        live = self.source.node_status(name) if self.source else None
        if live is not None:
            node["status"] = live
        ko.reconcile_taints(node)
        return node

    def _take_failure(self, method: str, path: str) -> _Failure | None:
        with self._lock:
            for failure in self._failures:
                if (failure.method in (None, method)) and (
                    failure.path_contains is None or failure.path_contains in path
                ):
                    failure.times -= 1
                    if failure.times <= 0:
                        self._failures.remove(failure)
                    return failure
        return None

    def _take_stall(self, method: str, path: str, body: Any) -> Stall | None:
        with self._lock:
            for held in self._stalls:
                matches = held.method == method and held.path_contains in path
                if matches and held.request is None and (held.where is None or held.where(body)):
                    held.request = (method, path, body)
                    return held
        return None

    def release_stalls(self) -> None:
        """Let every held request go on (applied): for a test's teardown."""
        with self._lock:
            for held in self._stalls:
                if not held.wait_released(0):
                    held.release()

    def _interfere_after_read(self, name: str) -> None:
        pending = self._interference.get(name)
        if not pending:
            return
        taint = pending.pop(0)
        node = self.nodes[name]
        if taint is not None:
            node["spec"]["taints"] = list(node["spec"].get("taints") or []) + [taint]
        node["metadata"]["resourceVersion"] = str(next(self._rv))

    def handle(
        self, method: str, path: str, info: RequestInfo | None, **request: Any
    ) -> tuple[int, Any]:
        """Route one authenticated, authorized request (called by the HTTP handler);
        `request` holds its query, parsed body and content type."""
        from tests.servers.fake_kube_api import Req, route

        with self._lock:
            return route(self, method, path, None if info is None else Req(info, **request))

    def list_page(self, kind: str, items: list[JSON], query: dict[str, str]) -> JSON:
        """A `<kind>List` honouring `limit` and `continue` (an opaque offset token)."""
        start = 0
        if query.get("continue") and self._expire_continue > 0:
            self._expire_continue -= 1
            raise _fail(410, "Expired", ko.EXPIRED_CONTINUE)
        if query.get("continue"):
            start = json.loads(base64.urlsafe_b64decode(query["continue"]))["offset"]
        limit = int(query.get("limit") or 0)
        page = items[start : start + limit] if limit else items[start:]
        meta: JSON = {"resourceVersion": str(next(self._rv))}
        end = start + len(page)
        if end < len(items):
            token = json.dumps({"offset": end}).encode()
            meta["continue"] = base64.urlsafe_b64encode(token).decode()
            meta["remainingItemCount"] = len(items) - end
        return {"kind": kind, "apiVersion": "v1", "metadata": meta, "items": page}


def _handler(fake: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out without a delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the record is `fake.requests`."""

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            split = urlsplit(self.path)
            query = dict(parse_qsl(split.query, keep_blank_values=True))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            body: Any = raw.decode() if raw else None
            # kube-apiserver reads a body without Content-Type as its first media type, JSON.
            if raw and ("json" in content_type or not content_type):
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
            info = request_info(method, split.path, query)
            code, answer, headers = self._answer(
                method, split.path, query, body, info, content_type
            )
            fake.requests.append(
                KubeRequest(method, split.path, query, content_type, body, info, code)
            )
            try:
                self._reply(code, answer, headers)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client died while its request was held

        def _answer(
            self,
            method: str,
            path: str,
            query: dict[str, str],
            body: Any,
            info: RequestInfo | None,
            content_type: str,
        ) -> tuple[int, Any, dict[str, str]]:
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() != "bearer" or token != TOKEN:  # the scheme is case-insensitive
                return 401, ko.status_body(401, "Unauthorized", "Unauthorized"), {}
            held = fake._take_stall(method, path, body)
            if held is not None:
                held.arrived.set()
                held.wait_released(STALL_SECONDS)  # the fake's lock is not held meanwhile
                if held.status is not None:
                    return _injected(held.status)
            failure = fake._take_failure(method, path)
            if failure is not None:
                return _injected(failure.status)
            if info is not None and not fake.rules.allows(info.permission):
                message = fake.rules.forbidden_message(info)
                details = {"name": info.name, "kind": info.resource} if info.name else None
                return 403, ko.status_body(403, "Forbidden", message, details=details), {}
            try:
                code, answer = fake.handle(
                    method, path, info, query=query, body=body, content_type=content_type
                )
            except _Answer as answer_:
                return answer_.code, answer_.body, answer_.headers
            return code, answer, {}

        def _reply(self, code: int, answer: Any, headers: dict[str, str]) -> None:
            if isinstance(answer, str):
                data, kind = answer.encode(), "text/plain; charset=utf-8"
            else:
                data, kind = json.dumps(answer).encode(), "application/json"
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _injected(status: int) -> tuple[int, JSON, dict[str, str]]:
    reasons = {
        404: "NotFound", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"
    }
    message = {429: "Too many requests, please try again later."}.get(
        status, "the server is currently unable to handle the request"
    )
    headers = {"Retry-After": "1"} if status == 429 else {}
    return status, ko.status_body(status, reasons.get(status, "InternalError"), message), headers


@contextmanager
def start_fake_kube(
    *, now: Callable[[], datetime] | None = None, tls: tuple[Path, Path] | None = None
) -> Iterator[FakeKube]:
    """A started FakeKube (HTTPS when `tls` gives a certificate chain and key), stopped on
    exit."""
    fake = FakeKube(tls=tls) if now is None else FakeKube(now=now, tls=tls)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def since_cutoff(fake: FakeKube, seconds: str | None) -> datetime | None:
    return None if not seconds else fake.now() - timedelta(seconds=int(seconds))


__all__ = [
    "FakeKube",
    "KubeRequest",
    "LiveSource",
    "PDB_MESSAGE",
    "Stall",
    "TOKEN",
    "start_fake_kube",
]
