"""One HTTP exchange as plain data: the `Request` a handler gets (body already read) and the
`Reply` it returns. No I/O here; the front end (`front.py`) moves bytes in and out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = "application/json"
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 411: "Length Required",
           413: "Payload Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}  # fmt: skip


@dataclass(frozen=True)
class Head:
    """What is known before the body is read: method, path, query and headers (names in
    lower case; repeated headers joined with `, `)."""

    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass(frozen=True)
class Request:
    """A request whose body has arrived in full."""

    head: Head
    body: bytes
    client: str = ""
    server: tuple[str, int] = ("127.0.0.1", 0)

    @property
    def method(self) -> str:
        return self.head.method

    @property
    def path(self) -> str:
        return self.head.path


@dataclass(frozen=True)
class Reply:
    """A whole response. `close` asks the server to close the connection after it (the body
    was not read, so the connection cannot carry another request)."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False

    @classmethod
    def json(cls, status: int, data: Any, *headers: tuple[str, str], close: bool = False) -> Reply:
        return cls(status, json.dumps(data, default=str).encode(), JSON, tuple(headers), close)

    @property
    def status_line(self) -> str:
        return f"{self.status} {REASONS.get(self.status, '')}".rstrip()
