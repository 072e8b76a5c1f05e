"""The trust boundary of Slack over HTTP: a request reaches bolt only when its
`X-Slack-Signature` verifies against the signing secret with a fresh, well-formed
`X-Slack-Request-Timestamp`. Anything else is a 401 before bolt parses the body, so nothing
the request names (a `response_url`, a channel) is ever acted on.

Bolt verifies again (its RequestVerification middleware), but raises on a non-numeric timestamp
and then hands the *unverified* request to the error handler; checking the form here first
closes that path. A middleware marks verified requests (`TRUSTED`) so the error handler can
tell them apart whatever the route taken.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from slack_sdk.signature import SignatureVerifier

TRUSTED = "gpu_oncall_trusted"
"""BoltContext key set once a request has passed bolt's verification (or came over Socket
Mode, whose connection Slack authenticated with the app token)."""

MAX_AGE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def is_signed(
    body: bytes, *, timestamp: str | None, signature: str | None, secret: str, now: float
) -> bool:
    """True only for a well-formed, fresh timestamp and a matching v0 signature; never raises."""
    if timestamp is None or signature is None:
        return False
    if _TIMESTAMP.fullmatch(timestamp) is None or _SIGNATURE.fullmatch(signature) is None:
        return False
    if abs(now - int(timestamp)) > MAX_AGE_SECONDS:
        return False
    return SignatureVerifier(secret).is_valid(body, timestamp, signature)


class SignedOnly:
    """WSGI middleware: a 401 for anything not signed by Slack; the rest goes to `app`."""

    def __init__(
        self, app: WSGIApp, *, secret: str, clock: Callable[[], float] = time.time
    ) -> None:
        self.app, self._secret, self._clock = app, secret, clock

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        raw_length = str(environ.get("CONTENT_LENGTH") or "0")
        length = int(raw_length) if raw_length.isdigit() else 0
        body: bytes = environ["wsgi.input"].read(length) if length else b""
        signed = is_signed(
            body,
            timestamp=environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP"),
            signature=environ.get("HTTP_X_SLACK_SIGNATURE"),
            secret=self._secret,
            now=self._clock(),
        )
        if not signed:
            answer = json.dumps({"error": "invalid request"}).encode()
            start_response(
                "401 Unauthorized",
                [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))],
            )
            return [answer]
        environ = {**environ, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
        return self.app(environ, start_response)
