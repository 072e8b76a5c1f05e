"""A fake Slack Socket Mode endpoint on 127.0.0.1 (a `websockets` server), for `serve
--socket-mode` tests.

The fake Web API (`FakeSlack.socket_url`) hands its `ws://` URL out from apps.connections.open;
the bot's Socket Mode client connects, gets `hello`, and is sent envelopes (slash commands,
block actions) as Slack sends them; every acknowledgement it returns is recorded.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

WAIT_SECONDS = 30.0


class FakeSocketMode:
    def __init__(self) -> None:
        self._server = serve(self._handle, "127.0.0.1", 0, compression=None)
        self.url = f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}/link"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._connected = threading.Event()
        self._connection: ServerConnection | None = None
        self._lock = threading.Lock()
        self.acks: list[dict[str, Any]] = []

    def start(self) -> FakeSocketMode:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()

    def send(self, kind: str, payload: dict[str, Any]) -> str:
        """Send an envelope to the connected bot; returns its envelope id."""
        assert self._connected.wait(WAIT_SECONDS), "the bot never connected over Socket Mode"
        assert self._connection is not None
        envelope_id = uuid.uuid4().hex
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind == "slash_commands",
        }
        self._connection.send(json.dumps(envelope))
        return envelope_id

    def wait_for_ack(self, envelope_id: str) -> dict[str, Any]:
        """The bot's acknowledgement of an envelope (bounded polling)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            with self._lock:
                for ack in self.acks:
                    if ack.get("envelope_id") == envelope_id:
                        return ack
            time.sleep(0.01)
        raise AssertionError(f"envelope {envelope_id} was never acknowledged")

    def _handle(self, connection: ServerConnection) -> None:
        self._connection = connection
        connection.send(json.dumps({"type": "hello", "num_connections": 1}))
        self._connected.set()
        try:
            for message in connection:
                with self._lock:
                    self.acks.append(json.loads(message))
        except ConnectionClosed:
            return
