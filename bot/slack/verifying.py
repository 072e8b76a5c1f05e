"""The trust boundary of Slack over HTTP: a request reaches bolt only when its `X-Slack-Signature`
verifies against the signing secret with a fresh, well-formed `X-Slack-Request-Timestamp`. The
headers' form and freshness are checked before the body is read (`fresh_signature_headers`, a
401 otherwise); the signature is then bolt's one check (its RequestVerification middleware), so
nothing the request names (a `response_url`, a channel) is ever acted on unless Slack signed it.

Bolt raises on a non-numeric timestamp and then hands the *unverified* request to the error
handler; checking the form before bolt closes that path. A middleware marks verified requests
(`TRUSTED`) so the error handler can tell them apart whatever the route taken.
"""

from __future__ import annotations

import re

from slack_sdk.signature import SignatureVerifier

TRUSTED = "gpu_oncall_trusted"
"""BoltContext key set once a request has passed bolt's verification (or came over Socket
Mode, whose connection Slack authenticated with the app token)."""

MAX_AGE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def fresh_signature_headers(*, timestamp: str | None, signature: str | None, now: float) -> bool:
    """True when Slack's signature headers are present, well formed and fresh: checked before
    the body is read (the signature itself needs the body; bolt checks it). Never raises."""
    if timestamp is None or signature is None:
        return False
    if _TIMESTAMP.fullmatch(timestamp) is None or _SIGNATURE.fullmatch(signature) is None:
        return False
    return abs(now - int(timestamp)) <= MAX_AGE_SECONDS


def is_signed(
    body: bytes, *, timestamp: str | None, signature: str | None, secret: str, now: float
) -> bool:
    """True only for a well-formed, fresh timestamp and a matching v0 signature; never raises."""
    if not fresh_signature_headers(timestamp=timestamp, signature=signature, now=now):
        return False
    assert timestamp is not None and signature is not None
    return SignatureVerifier(secret).is_valid(body, timestamp, signature)
