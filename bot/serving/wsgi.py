"""Run a WSGI app (slack-bolt's `SlackRequestHandler`, the simulated exporters) on a `Request`
whose body has already been read, and collect its answer as a `Reply`. Called on a pool thread,
never on the event loop.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable
from typing import Any

from bot.serving.exchange import Reply, Request

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def call_wsgi(app: WSGIApp, request: Request) -> Reply:
    """The app's whole answer to `request` (the app sees the full path in PATH_INFO)."""
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        answer["status"], answer["headers"] = status, headers

    chunks = app(_environ(request), start_response)
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    headers = [(k, v) for k, v in answer["headers"] if k.lower() != "content-length"]
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "text/plain")
    others = tuple((k, v) for k, v in headers if k.lower() != "content-type")
    return Reply(int(answer["status"].split(" ", 1)[0]), body, content_type, others)


def _environ(request: Request) -> dict[str, Any]:
    head = request.head
    environ: dict[str, Any] = {
        "REQUEST_METHOD": head.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": head.path,
        "QUERY_STRING": head.query,
        "CONTENT_TYPE": head.header("content-type") or "",
        "CONTENT_LENGTH": str(len(request.body)),
        "SERVER_NAME": request.server[0],
        "SERVER_PORT": str(request.server[1]),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": request.client,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in head.headers.items():
        if name not in ("content-type", "content-length"):
            environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ
