"""Signed, short-lived links to one incident page, for the people in a Slack channel.

The pages ask who is reading (`pages.auth`); with the default `token` auth a browser has no
bearer token, so a link posted in Slack would answer 401. A signed link carries its own proof
instead: `?exp=<unix seconds>&sig=<hex>`, an HMAC-SHA256 over the incident ref and the expiry,
keyed from `pages.token`. It opens that one incident's page until it expires, and nothing else
(not the list, not another incident); whoever holds the token can mint one, as they could read
the page anyway. Pure: the caller passes the key and the time.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlencode

_CONTEXT = b"gpu-oncall incident page link v1"
_MAX_QUERY = 200


def signed_query(ref: str, *, key: str, expires: datetime) -> str:
    """The query string that opens `ref`'s page until `expires`."""
    exp = int(expires.astimezone(UTC).timestamp())
    return urlencode({"exp": exp, "sig": _sign(ref, exp, key)})


def link_allows(ref: str, query: str, *, key: str, now: datetime) -> bool:
    """True when `query` carries a signature for `ref` that has not expired at `now`."""
    if not query or len(query) > _MAX_QUERY:
        return False
    params = parse_qs(query, keep_blank_values=True)
    exp_values, sig_values = params.get("exp", []), params.get("sig", [])
    if len(exp_values) != 1 or len(sig_values) != 1 or not exp_values[0].isdigit():
        return False
    if not exp_values[0].isascii() or len(exp_values[0]) > 12:
        return False
    exp = int(exp_values[0])
    if now.astimezone(UTC).timestamp() >= exp:
        return False
    return hmac.compare_digest(sig_values[0].encode(), _sign(ref, exp, key).encode())


def _sign(ref: str, exp: int, key: str) -> str:
    derived = hmac.new(key.encode(), _CONTEXT, hashlib.sha256).digest()
    return hmac.new(derived, f"{ref}\n{exp}".encode(), hashlib.sha256).hexdigest()
