"""The simulated fleet as Prometheus scrapes it: dcgm-exporter, node_exporter (infiniband),
kube-state-metrics (and any other family the fleet exposes) in the text exposition format.

Values are computed at scrape time from the fleet's clock, so series evolve as faults play out
and react to remediation (a drained node stops reporting the fault). `ExporterApp` is a WSGI
app and a framework-neutral `handle(path)`, so another server can mount it (e.g. at
`/sim/metrics`); `serve_exporter` runs it on a stdlib ThreadingHTTPServer (`gpu-oncall sim serve`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from integrations.promql import escape_label_value
from simulator.fleet import Fleet

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def format_value(value: float) -> str:
    """A sample value as the text format writes it (`NaN`, `+Inf`, integers without `.0`)."""
    value = float(value)  # series may hold ints
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def format_sample(name: str, labels: dict[str, str], value: float) -> str:
    """`name{a="x",b="y"} value`, label values escaped."""
    return f"{format_series(name, labels)} {format_value(value)}"


def format_series(name: str, labels: dict[str, str]) -> str:
    """`name{a="x",b="y"}` (just `name` without labels), label values escaped."""
    if not labels:
        return name
    body = ",".join([f'{k}="{escape_label_value(v)}"' for k, v in labels.items()])
    return f"{name}{{{body}}}"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def render_exposition(
    fleet: Fleet, *, at: datetime | None = None, families: Collection[str] | None = None
) -> str:
    """Every metric the fleet exposes at `at` (default: the fleet's now), optionally only some
    exporter families. A metric with no series at that moment still gets HELP and TYPE; a
    histogram's `_bucket`, `_sum` and `_count` series are one `histogram` family."""
    when = fleet.now() if at is None else at
    names = fleet.metric_names()
    histograms = _histograms(names)
    bodies = _Bodies()
    lines: list[str] = []
    for name in names:
        definition = fleet.metric(name)
        if definition is None or (families is not None and definition.family not in families):
            continue
        base = histograms.get(name)
        if base is not None and not name.endswith("_bucket"):
            continue  # written with its _bucket series
        family, kind = (base, "histogram") if base else (name, definition.kind)
        lines.append(f"# HELP {family} {_escape_help(definition.help)}")
        lines.append(f"# TYPE {family} {kind}")
        parts = [f"{base}_bucket", f"{base}_sum", f"{base}_count"] if base else [name]
        for part in parts:
            for s in fleet.series(part, when):
                lines.append(f"{s.metric}{bodies.get(s.labels)} {format_value(s.value)}")
    return "\n".join(lines) + "\n"


class _Bodies:
    """Rendered `{labels}` for one exposition. Series share label dicts (one per GPU, HCA or
    node across every metric), so each dict is escaped once, keyed by identity while the
    render holds it alive."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[dict[str, str], str]] = {}

    def get(self, labels: dict[str, str]) -> str:
        found = self._seen.get(id(labels))
        if found is None or found[0] is not labels:
            found = (labels, format_series("", labels))
            self._seen[id(labels)] = found
        return found[1]


def _histograms(names: Sequence[str]) -> dict[str, str]:
    """`<base>_bucket|_sum|_count` -> `<base>` where all three are exposed."""
    present = set(names)
    out: dict[str, str] = {}
    for name in names:
        base = name.removesuffix("_bucket")
        if base != name and {f"{base}_sum", f"{base}_count"} <= present:
            out.update({f"{base}_bucket": base, f"{base}_sum": base, f"{base}_count": base})
    return out


def exporter_families(fleet: Fleet) -> list[str]:
    """The exporter families the fleet exposes (`dcgm`, `node_exporter`, ...), in order."""
    seen: dict[str, None] = {}
    for name in fleet.metric_names():
        definition = fleet.metric(name)
        if definition is not None:
            seen.setdefault(definition.family)
    return list(seen)


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes

    @property
    def status_line(self) -> str:
        return {200: "200 OK", 404: "404 Not Found"}.get(self.status, str(self.status))


class ExporterApp:
    """Serves `<prefix>/metrics` (every family) and `<prefix>/metrics/<family>`.

    Thread-safe: each request only reads the fleet, which writes under its own lock.
    """

    def __init__(self, fleet: Fleet, *, prefix: str = "") -> None:
        self.fleet = fleet
        self.prefix = prefix.rstrip("/")
        self.scrapes = 0
        self._lock = threading.Lock()

    def handle(self, path: str) -> Response:
        """Answer a GET for `path` (query string ignored), with or without the prefix."""
        route = path.split("?", 1)[0].rstrip("/")
        if self.prefix and route.startswith(self.prefix + "/"):
            route = route[len(self.prefix) :]
        families: list[str] | None = None
        if route != "/metrics":
            family = route.removeprefix("/metrics/")
            if family == route or family not in exporter_families(self.fleet):
                return self._not_found(path)
            families = [family]
        with self._lock:
            self.scrapes += 1
        text = render_exposition(self.fleet, families=families)
        return Response(200, CONTENT_TYPE, text.encode())

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """WSGI entry point: routes on PATH_INFO (below wherever the host server mounted it)."""
        response = self.handle(str(environ.get("PATH_INFO") or "/"))
        start_response(
            response.status_line,
            [("Content-Type", response.content_type), ("Content-Length", str(len(response.body)))],
        )
        return [response.body]

    def _not_found(self, route: str) -> Response:
        paths = [f"{self.prefix}/metrics"] + [
            f"{self.prefix}/metrics/{f}" for f in exporter_families(self.fleet)
        ]
        body = f"no exporter at '{route.split('?', 1)[0]}'; paths: {', '.join(paths)}\n"
        return Response(404, "text/plain; charset=utf-8", body.encode())


class PathHandler(Protocol):
    """Anything that answers a GET by path: ExporterApp, or a test wrapper around it."""

    def handle(self, path: str) -> Response: ...


class _Handler(BaseHTTPRequestHandler):
    app: PathHandler

    def do_GET(self) -> None:
        response = self.app.handle(self.path)
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every second would flood stderr; stay quiet."""


class ExporterServer:
    """An ExporterApp (or any PathHandler) on a ThreadingHTTPServer; `port=0` picks a free
    port. `serve_forever` blocks (`gpu-oncall sim serve`); `start` serves on a daemon thread."""

    def __init__(self, app: PathHandler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        handler = type("ExporterHandler", (_Handler,), {"app": app})
        self.app = app
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = host, int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> ExporterServer:
        self._thread = threading.Thread(target=self.serve_forever, name="sim-exporter", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the serving thread (if `start`ed) and release the port."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
            self._thread = None
        self.httpd.server_close()


@contextmanager
def serve_exporter(
    fleet: Fleet, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[ExporterServer]:
    """Serve the fleet's exporters in a background thread for the duration of the block."""
    server = ExporterServer(ExporterApp(fleet), host=host, port=port).start()
    try:
        yield server
    finally:
        server.close()
