"""The ASGI app uvicorn serves: reads each request's body on the event loop, then runs the
bot's synchronous handler on a bounded thread pool.

On the loop, nothing blocks: `admit` (cheap checks on the head: token, Content-Length) may
refuse a request before its body is read; a declared or actual body above the limit is a 413;
a body that has not fully arrived within the read timeout is a 408 (the connection is closed,
so a stalled upload holds no thread and no worker). Requests beyond the pool's size wait in
its queue; none is refused for being one too many.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from bot.serving.exchange import Head, Reply, Request

Handler = Callable[[Request], Reply]
Admit = Callable[[Head], Reply | None]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    """Largest body read (413 above it)."""
    read_timeout_seconds: float
    """Longest a body may take to arrive once its headers have (408 after it)."""


class Front:
    """ASGI 3 application over a synchronous `handle(request) -> Reply`."""

    def __init__(self, *, handle: Handler, admit: Admit, limits: Limits, pool: Executor) -> None:
        self.handle = handle
        self.admit = admit
        self.limits = limits
        self.pool = pool

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            return
        head = _head(scope)
        reply = self.admit(head) or _declared_too_large(head, self.limits.max_body_bytes)
        if reply is None:
            body = await self._read(receive)
            if body is None:  # the client went away before its body arrived
                return
            if isinstance(body, Reply):
                reply = body
            else:
                request = Request(head, body, client=_client(scope), server=_server(scope))
                loop = asyncio.get_running_loop()
                reply = await loop.run_in_executor(self.pool, self.handle, request)
        await _send(send, reply)

    async def _read(self, receive: Receive) -> bytes | Reply | None:
        limit, chunks, size = self.limits.max_body_bytes, [], 0
        try:
            async with asyncio.timeout(self.limits.read_timeout_seconds):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk: bytes = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        return too_large(size, limit)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            seconds = self.limits.read_timeout_seconds
            return Reply.json(
                408, {"error": f"request body not received within {seconds:g} s"}, close=True
            )


def too_large(size: int, limit: int) -> Reply:
    """413, closing the connection (the rest of the body is not read)."""
    return Reply.json(
        413, {"error": f"body of {size} bytes exceeds the limit of {limit} bytes"}, close=True
    )


def _declared_too_large(head: Head, limit: int) -> Reply | None:
    declared = head.header("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_large(int(declared), limit)
    return None


def _head(scope: dict[str, Any]) -> Head:
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


def _client(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def _server(scope: dict[str, Any]) -> tuple[str, int]:
    server = scope.get("server") or ("127.0.0.1", 0)
    return str(server[0]), int(server[1] or 0)


async def _send(send: Send, reply: Reply) -> None:
    headers: list[tuple[str, str]] = [
        ("content-type", reply.content_type),
        ("content-length", str(len(reply.body))),
        *reply.headers,
    ]
    if reply.close:
        headers.append(("connection", "close"))
    await send(
        {"type": "http.response.start", "status": reply.status, "headers": _encode(headers)}
    )
    await send({"type": "http.response.body", "body": reply.body})


def _encode(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
