"""The guard in front of the Starlette app: an ASGI middleware deciding, from the request line
and headers alone, whether a request may send a body, how large, and whether it may be read at
all; then reading it within the route's limit, the read timeout and the process-wide budget of
body bytes in flight, and handing the app the body in one piece.

Nothing is buffered before that decision: a GET or HEAD takes no body, `/slack/events` at most
Slack's own size, `POST /alerts` the webhook cap, and a request that authenticates with headers
(the webhook's bearer token, Slack's signature headers) is refused before its body is read.
Connections are capped by uvicorn (`limit_concurrency`, a 503 past it). A stalled body gets 408,
a body past its limit 413, a body that does not fit in the in-flight budget 503; each closes
the connection. After a burst the heap is trimmed, so the memory goes back to the system.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from bot.serving.exchange import Head

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON = b"application/json"
TRIM_AFTER_BYTES = 8 * 1024 * 1024
"""Trim the heap when the bytes in flight fall to zero after at least this many were read."""


@dataclass(frozen=True)
class Refusal:
    """An answer given without reading the body (the connection is closed after it)."""

    status: int
    error: str
    headers: tuple[tuple[str, str], ...] = ()
    details: tuple[tuple[str, Any], ...] = ()
    """More fields of the JSON answer (a 404 lists the routes)."""


@dataclass(frozen=True)
class Admission:
    """What a route allows before its body is read: at most `body_bytes` (0: no body), or a
    `refusal` already decided from the head."""

    body_bytes: int
    refusal: Refusal | None = None


Decide = Callable[[Head], Admission]


@dataclass(frozen=True)
class FrontLimits:
    read_timeout_seconds: float
    """Longest a body may take to arrive once its headers have (408 after it)."""
    max_bytes_in_flight: int
    """Body bytes held at once across every request (503 for a request that does not fit)."""


class InFlight:
    """Body bytes reserved by requests being read or handled (used on the event loop only)."""

    def __init__(self, limit: int, *, trim: Callable[[], None]) -> None:
        self.limit, self.held, self._since_trim, self._trim = limit, 0, 0, trim

    def reserve(self, count: int) -> bool:
        if self.held + count > self.limit:
            return False
        self.held += count
        self._since_trim += count
        return True

    def release(self, count: int) -> None:
        self.held -= count
        if self.held == 0 and self._since_trim >= TRIM_AFTER_BYTES:
            self._since_trim = 0
            self._trim()


class Guard:
    """ASGI middleware: admission and bounded body reading in front of `app`."""

    def __init__(self, app: ASGIApp, *, decide: Decide, limits: FrontLimits) -> None:
        self.app, self.decide, self.limits = app, decide, limits
        self.in_flight = InFlight(limits.max_bytes_in_flight, trim=trim_heap)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = head_of(scope)
        admission = self.decide(head)
        refusal = admission.refusal or body_refusal(head, admission.body_bytes)
        if refusal is not None:
            await answer(send, refusal)
            return
        declared = int(head.header("content-length") or 0)
        if not self.in_flight.reserve(declared):
            await answer(send, Refusal(503, "server busy reading other requests; retry",
                                       (("Retry-After", "1"),)))
            return
        try:
            body = await self._read(receive, declared)
            if isinstance(body, Refusal):
                await answer(send, body)
            elif body is not None:
                await self.app(scope, replay(body, receive), send)
        finally:
            self.in_flight.release(declared)

    async def _read(self, receive: Receive, declared: int) -> bytes | Refusal | None:
        if declared == 0:
            return b""
        body = bytearray()
        seconds = self.limits.read_timeout_seconds
        try:
            async with asyncio.timeout(seconds):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    body += message.get("body", b"")
                    if len(body) > declared:
                        return too_large(len(body), declared)
                    if not message.get("more_body", False):
                        return bytes(body)
        except TimeoutError:
            return Refusal(408, f"request body not received within {seconds:g} s")


def body_refusal(head: Head, limit: int) -> Refusal | None:
    """Refuse, from the headers, a body the route does not take or one past its limit; a
    route that takes a body needs its Content-Length (nothing unsized is read)."""
    declared = head.header("content-length")
    chunked = head.header("transfer-encoding") is not None
    if limit == 0:
        if chunked or (declared not in (None, "0")):
            return Refusal(413, f"{head.method} {head.path} takes no request body")
        return None
    if chunked or declared is None or not declared.isdigit():
        return Refusal(411, "Content-Length required (a chunked or unsized body is refused)")
    if int(declared) > limit:
        return too_large(int(declared), limit)
    return None


def too_large(size: int, limit: int) -> Refusal:
    return Refusal(413, f"body of {size} bytes exceeds the limit of {limit} bytes")


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` giving the app the whole body at once, then the client's own messages."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def answer(send: Send, refusal: Refusal) -> None:
    """Send the refusal as JSON and close the connection (the body, if any, stays unread)."""
    body = json.dumps({"error": refusal.error, **dict(refusal.details)}).encode()
    headers = [
        (b"content-type", JSON),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in refusal.headers),
    ]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def head_of(scope: Scope) -> Head:
    """The request line and headers (names in lower case; repeats joined with `, `)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return Head(
        method=scope["method"],
        path=scope["path"],
        query=scope["query_string"].decode("latin-1"),
        headers=headers,
    )


def _load_trim() -> Callable[[], None]:
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    malloc_trim = getattr(libc, "malloc_trim", None)
    if malloc_trim is None:  # not glibc: the allocator returns memory its own way
        return lambda: None
    return lambda: None if malloc_trim(0) is None else None


trim_heap = _load_trim()
"""Give freed heap pages back to the system (glibc keeps them for reuse otherwise)."""
