"""uvicorn serving the ASGI app (the `Guard` over Starlette) on a socket this module binds (so the
URL is known before the first request, and `port=0` picks a free port): HTTP/1.1 with keep-
alive, a real listen backlog, and a graceful stop that stops accepting, lets in-flight requests
finish within the grace period, and only then returns.

Request headers are timed too (`HeadTimedProtocol`): a connection that does not finish a
request's headers within the read timeout is closed, so a slow-headers client holds nothing.

`serve()` blocks on the calling (main) thread, where uvicorn turns SIGTERM/SIGINT into that
graceful stop and re-raises the signal once it is done; `start()`/`stop()` serve on a background
thread instead (tests, benchmarks).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bot.errors import UserInputError
from bot.serving.front import ASGIApp

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tuning:
    """The connection-level settings (ServerSettings carries them; see docs/configuration.md)."""

    backlog: int = 2048
    keepalive_seconds: float = 5.0
    shutdown_grace_seconds: float = 30.0
    head_timeout_seconds: float = 30.0
    max_connections: int = 1000
    """Connections (and requests in progress) at once; past it uvicorn answers 503."""


class HttpServer:
    """One uvicorn server over `front`, listening from construction on."""

    def __init__(self, front: ASGIApp, *, host: str, port: int, tuning: Tuning) -> None:
        self.socket = _listen(host, port, backlog=tuning.backlog)
        bound = self.socket.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.url = f"http://{shown}:{bound[1]}"
        config = uvicorn.Config(
            front,
            http=head_timed(tuning.head_timeout_seconds),
            lifespan="off",
            interface="asgi3",
            backlog=tuning.backlog,
            limit_concurrency=tuning.max_connections,
            timeout_keep_alive=max(1, round(tuning.keepalive_seconds)),
            timeout_graceful_shutdown=max(1, round(tuning.shutdown_grace_seconds)),
            access_log=False,
            log_config=None,
            server_header=False,
            proxy_headers=False,
        )
        self.uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def serve(self) -> None:
        """Serve on this thread until SIGTERM/SIGINT (main thread) or `request_stop()`."""
        self.uvicorn.run(sockets=[self.socket])

    def start(self) -> HttpServer:
        """Serve on a background thread. Connections made before the loop runs wait in the
        listen backlog and are answered once it does."""
        self._thread = threading.Thread(target=self.serve, name="http-server", daemon=True)
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Begin the graceful stop (from any thread)."""
        self.uvicorn.should_exit = True

    def stop(self) -> None:
        """Stop gracefully and wait for the serving thread (after `start()`)."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.socket.close()


class HeadTimedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus a deadline for each request's headers: armed when a
    connection opens and when a request's first byte arrives, cleared once its headers are
    complete. uvicorn itself times only idle keep-alive connections."""

    head_timeout_seconds = 30.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._clear_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._clear_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._clear_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_seconds, self._head_timed_out)

    def _clear_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            logger.info("closing a connection whose request headers did not arrive in time")
            self.transport.close()


def head_timed(seconds: float) -> type[HeadTimedProtocol]:
    """HeadTimedProtocol with its deadline set (uvicorn builds one per connection)."""
    attributes: dict[str, Any] = {"head_timeout_seconds": seconds}
    return type("HeadTimedProtocol", (HeadTimedProtocol,), attributes)


def _listen(host: str, port: int, *, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets that say so, and
    # without it a keep-alive answer written in two parts waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)  # connections queue here from now on, before uvicorn runs
    except OSError as exc:
        sock.close()
        raise UserInputError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --host/--port "
            "(GPU_ONCALL_SERVER__HOST / GPU_ONCALL_SERVER__PORT)"
        ) from exc
    sock.set_inheritable(True)
    return sock
