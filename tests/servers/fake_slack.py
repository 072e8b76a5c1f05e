"""A fake Slack Web API on 127.0.0.1 that records every call (bolt's `mock_web_api_server`).

`FakeSlack` answers the methods the bot uses as Slack does (auth.test, chat.postMessage,
chat.update, chat.postEphemeral, files.getUploadURLExternal + the upload URL,
files.completeUploadExternal, files.info, usergroups.users.list) and the `response_url`s it
hands out, serves files shared with `share_file` at their `url_private` (bot token only, like
Slack), checks the bot token, and keeps each call with its decoded form or JSON body so tests
assert on what Slack received. `wait_for` polls the record (bounded) for calls made by
background threads.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
BOT_USER = "UBOT0001"
WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Call:
    """One request Slack received: the API method (or `response_url` / `upload`) and its body."""

    method: str
    body: dict[str, Any]
    path: str

    @property
    def blocks(self) -> list[dict[str, Any]]:
        blocks = self.body.get("blocks") or []
        return json.loads(blocks) if isinstance(blocks, str) else list(blocks)

    @property
    def text(self) -> str:
        """The message text plus every text in its blocks, for `in` assertions."""
        parts = [str(self.body.get("text", ""))]
        parts += _texts(self.blocks)
        return "\n".join(parts)


@dataclass
class FakeSlack:
    """Start with `start()`, point `WebClient(base_url=fake.api_url)` at it, `stop()` at the end."""

    groups: dict[str, list[str]] = field(default_factory=dict)
    """User-group id -> member user ids, for usergroups.users.list."""
    not_member: set[str] = field(default_factory=set)
    """Channels where chat.postMessage answers `not_in_channel`."""
    calls: list[Call] = field(default_factory=list)
    uploads: dict[str, bytes] = field(default_factory=dict)
    socket_url: str | None = None
    """What apps.connections.open hands out (a `FakeSocketMode` URL)."""
    shared: dict[str, bytes] = field(default_factory=dict)
    """url_private path -> content of the files `share_file` made."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._files = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.api_url = self.url + "/api/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> FakeSlack:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()

    def response_url(self, name: str) -> str:
        return f"{self.url}/response/{name}"

    def share_file(self, name: str, content: bytes) -> dict[str, Any]:
        """A Slack file object for `content`, downloadable from its url_private."""
        file_id = f"F{next(self._files):04d}"
        path = f"/files-pri/T0001-{file_id}/{name}"
        self.shared[path] = content
        return {
            "id": file_id,
            "name": name,
            "size": len(content),
            "mimetype": "text/plain",
            "url_private": self.url + path,
            "url_private_download": self.url + path.replace("/files-pri/", "/files-pri/dl/", 1),
        }

    # -- the record ------------------------------------------------------------------------------
    def record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(
        self, method: str, where: Callable[[Call], bool] = lambda c: True, *, count: int = 1
    ) -> list[Call]:
        """Calls of `method` matching `where`, polling until there are `count` (bounded)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            found = [c for c in self.of(method) if where(c)]
            if len(found) >= count or time.monotonic() > deadline:
                assert len(found) >= count, f"{method}: {len(found)} of {count} calls arrived"
                return found
            time.sleep(0.01)

    # -- answers -----------------------------------------------------------------------------------
    def answer(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "user_id": BOT_USER,
                "bot_id": "B0001",
                "team_id": "T0001",
                "user": "gpu-oncall",
                "url": "https://test.slack.com/",
            }
        if method == "chat.postMessage":
            channel = str(body.get("channel"))
            if channel in self.not_member:
                return {"ok": False, "error": "not_in_channel"}
            ts = f"1700000000.{next(self._ts):06d}"
            return {"ok": True, "channel": channel, "ts": ts, "message": {"ts": ts}}
        if method == "chat.update":
            return {"ok": True, "channel": body.get("channel"), "ts": body.get("ts")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"1700000000.{next(self._ts):06d}"}
        if method == "files.getUploadURLExternal":
            file_id = f"F{next(self._files):04d}"
            return {"ok": True, "file_id": file_id, "upload_url": f"{self.url}/upload/{file_id}"}
        if method == "files.completeUploadExternal":
            files = json.loads(body["files"]) if isinstance(body["files"], str) else body["files"]
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in files]}
        if method == "files.info":
            return {"ok": True, "file": {"id": body.get("file"), "name": "postmortem.md"}}
        if method == "apps.connections.open" and self.socket_url:
            return {"ok": True, "url": self.socket_url}
        if method == "usergroups.users.list":
            group = str(body.get("usergroup"))
            if group not in self.groups:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": self.groups[group]}
        return {"ok": False, "error": "unknown_method"}


def _handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            path = self.path.replace("/files-pri/dl/", "/files-pri/", 1)
            authorized = self.headers.get("Authorization") == f"Bearer {TOKEN}"
            fake.record(Call("file_download", {"authorized": authorized}, self.path))
            if path not in fake.shared:
                return self._send(404, b"not found", "text/plain")
            if not authorized:  # Slack answers a sign-in page, never the file
                return self._send(302, b"", "text/html")
            return self._send(200, fake.shared[path], "application/octet-stream")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.startswith("/upload/"):
                file_id = self.path.rsplit("/", 1)[1]
                fake.uploads[file_id] = raw
                fake.record(Call("upload", {"file_id": file_id, "size": len(raw)}, self.path))
                return self._send(200, b"OK - " + str(len(raw)).encode(), "text/plain")
            body = _decode(raw, self.headers.get("Content-Type", ""))
            if self.path.startswith("/response/"):
                fake.record(Call("response_url", body, self.path))
                return self._send(200, b"ok", "text/plain")
            method = self.path.removeprefix("/api/")
            fake.record(Call(method, body, self.path))
            token = APP_TOKEN if method == "apps.connections.open" else TOKEN
            if self.headers.get("Authorization") != f"Bearer {token}":
                answer: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
            else:
                answer = fake.answer(method, body)
            self._send(200, json.dumps(answer).encode(), "application/json; charset=utf-8")

        def _send(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _decode(raw: bytes, content_type: str) -> dict[str, Any]:
    if "json" in content_type:
        return dict(json.loads(raw or b"{}"))
    return dict(parse_qsl(raw.decode()))


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [str(node["text"])] if isinstance(node.get("text"), str) else []
        return found + [t for value in node.values() for t in _texts(value)]
    if isinstance(node, list):
        return [t for item in node for t in _texts(item)]
    return []
