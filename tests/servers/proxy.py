"""A recording HTTP(S) proxy on 127.0.0.1 in front of a real server, for asserting what the
outside world received: every request's path, query and headers, in order.

It can also play failures we cannot get from a healthy Prometheus: answer the next N requests
with a status (503, 429, ...), demand credentials (401 without them), or hold a request open
until released (to trip a client timeout). Otherwise it forwards to `upstream` unchanged.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from servers.prometheus import require_binary


@dataclass(frozen=True)
class Received:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]

    @property
    def promql(self) -> str:
        return self.query.get("query", [""])[0]


@dataclass
class ProxyScript:
    """What the proxy does besides forwarding."""

    fail_next: list[int | tuple[int, bytes]] = field(default_factory=list)
    """Answers for the next requests, one each: a status (with an error body) or a status and
    a body. Then it forwards again."""
    require_headers: dict[str, str] = field(default_factory=dict)
    """Headers every request must carry exactly, else 401."""
    hold: threading.Event | None = None
    """While set to an unset Event, requests wait on it (up to 30 s) and get no answer."""
    barrier: threading.Barrier | None = None
    """Requests wait here until this many are in flight together; a broken barrier (they
    came one at a time) is answered 503."""


class RecordingProxy:
    def __init__(
        self, upstream: str | None, *, script: ProxyScript | None = None, tls: Path | None = None
    ) -> None:
        self.upstream = upstream
        self.script = script or ProxyScript()
        self.received: list[Received] = []
        self._lock = threading.Lock()
        handler = type("ProxyHandler", (_Handler,), {"proxy": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls / "cert.pem", tls / "key.pem")
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def queries(self) -> list[str]:
        """The PromQL of every /api/v1/query* request received, in order."""
        with self._lock:
            return [r.promql for r in self.received if r.path.startswith("/api/v1/query")]

    def record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    def next_failure(self) -> int | tuple[int, bytes] | None:
        with self._lock:
            return self.script.fail_next.pop(0) if self.script.fail_next else None


class _Handler(BaseHTTPRequestHandler):
    proxy: RecordingProxy

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.proxy.record(
            Received(parts.path, parse_qs(parts.query), {k: v for k, v in self.headers.items()})
        )
        script = self.proxy.script
        if script.hold is not None and not script.hold.is_set():
            script.hold.wait(timeout=30)
            return
        if script.barrier is not None:
            try:
                script.barrier.wait()
            except threading.BrokenBarrierError:
                return self._answer(503, b'{"status":"error","error":"requests were serial"}')
        wanted = script.require_headers
        if any(self.headers.get(k) != v for k, v in wanted.items()):
            return self._answer(401, b'{"status":"error","error":"unauthorized"}')
        failure = self.proxy.next_failure()
        if isinstance(failure, tuple):
            return self._answer(*failure)
        if failure is not None:
            return self._answer(failure, b'{"status":"error","error":"scripted failure"}')
        if self.proxy.upstream is None:
            return self._answer(502, b'{"status":"error","error":"no upstream"}')
        upstream = httpx.get(self.proxy.upstream + self.path, timeout=10)
        self._answer(upstream.status_code, upstream.content)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test asserts on `received` instead."""


@contextmanager
def running(proxy: RecordingProxy) -> Iterator[RecordingProxy]:
    proxy._thread.start()
    try:
        yield proxy
    finally:
        if proxy.script.hold is not None:
            proxy.script.hold.set()
        proxy.httpd.shutdown()
        proxy.httpd.server_close()
        proxy._thread.join()


def self_signed_cert(directory: Path) -> Path:
    """A certificate and key for 127.0.0.1 (openssl CLI), in `directory`."""
    openssl = require_binary("openssl", package="openssl")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(directory / "key.pem"), "-out", str(directory / "cert.pem"),
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return directory
