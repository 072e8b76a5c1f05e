"""The incident pages `serve` publishes: `GET /incidents` (open and recent, filterable by state,
runbook and layer) and `GET /incidents/INC-N` (the HTML postmortem, live while the incident is
open), behind the `pages` auth (bearer token, trusted proxy header, or explicitly none). Under
`token` a signed, short-lived link to one incident page (`bot.incidents.page_links`, as Slack
posts it) opens that page alone.

Pages are rendered by `bot.incidents.html_page`; this module only authorizes, validates the
query and reads the database. Bad input is a 400 naming the parameter and its valid values.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import parse_qs

from sqlalchemy.engine import Engine

from bot.config import PagesSettings
from bot.diagnosis.layers import Layer
from bot.errors import NotFound
from bot.incidents.html_page import ListFilters, render_incident_list
from bot.incidents.page_links import link_allows
from bot.incidents.postmortem import render_postmortem
from bot.incidents.reporting import read_story, read_views
from bot.incidents.states import IncidentState
from bot.incidents.views import incident_view
from bot.serving.exchange import Head, Reply, Request
from storage import incidents as incident_store
from storage.db import read_scope

PREFIX = "/incidents"
HTML = "text/html; charset=utf-8"
_REF = re.compile(r"^INC-(\d{1,12})$")
_CLOSED = (IncidentState.RESOLVED.value, IncidentState.FAILED.value)
_HEADERS = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:"),
)


class BadQuery(ValueError):
    """A query parameter the list page does not accept; the message says what is valid."""


def is_page(path: str) -> bool:
    """True for `/incidents` and everything below it."""
    return path == PREFIX or path.startswith(PREFIX + "/")


@dataclass
class IncidentPages:
    """Serves the pages from `db`; `runbooks` lists the runbook names the filter accepts."""

    db: Engine
    settings: PagesSettings
    runbooks: Callable[[], Sequence[str]]
    now: Callable[[], datetime]
    """The bot's clock: how long an open incident has cost so far (its GPU-hours)."""

    def handle(self, request: Request) -> Reply:
        """Authorize, then answer a GET (or HEAD) for the list or one incident."""
        refused = self.authorize(request.head)
        if refused is not None:
            return refused
        if request.method not in ("GET", "HEAD"):
            return _text(405, f"{request.path} takes GET", ("Allow", "GET"))
        path = request.path.rstrip("/") or "/"
        if path == PREFIX:
            return self._list(request.head.query)
        return self._incident(path[len(PREFIX) + 1 :])

    def authorize(self, head: Head) -> Reply | None:
        """None when the request may see the pages, else the 401 to send."""
        mode = self.settings.auth
        if mode == "none":
            return None
        if mode == "proxy":
            user = (head.header(self.settings.proxy_header) or "").strip()
            if user:
                return None
            return _text(401, f"sign in through the auth proxy (no {self.settings.proxy_header})")
        token = self.settings.token
        if token is not None and self._signed_link(head, token.get_secret_value()):
            return None
        scheme, _, given = (head.header("authorization") or "").strip().partition(" ")
        if (
            token is not None
            and scheme.lower() == "bearer"
            and hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode())
        ):
            return None
        challenge = ("WWW-Authenticate", 'Bearer realm="gpu-oncall incidents"')
        return _text(401, "missing or wrong bearer token for the incident pages", challenge)

    def _signed_link(self, head: Head, key: str) -> bool:
        """A Slack-posted link to one incident page, signed and not expired (page_links)."""
        path = head.path.rstrip("/")
        ref = path[len(PREFIX) + 1 :] if path.startswith(PREFIX + "/") else ""
        if _REF.match(ref) is None:
            return False
        return link_allows(ref, head.query, key=key, now=self.now())

    def _list(self, query: str) -> Reply:
        try:
            chosen = self.parse_filters(query)
        except BadQuery as exc:
            return _text(400, str(exc))
        with read_scope(self.db) as session:
            rows = incident_store.filter_incidents(
                session,
                states=chosen.states,
                runbook=chosen.runbook,
                layer=chosen.layer,
                limit=self.settings.recent_limit,
            )
            views = [incident_view(r) for r in rows]
        page = render_incident_list(
            views,
            chosen=chosen,
            states=[s.value for s in IncidentState],
            runbooks=sorted(self.runbooks()),
            layers=[layer.value for layer in Layer],
            refresh_seconds=self.settings.refresh_seconds,
        )
        return _html(page)

    def parse_filters(self, query: str) -> ListFilters:
        """`state` (repeatable; `open` means every state but resolved and failed), `runbook`,
        `layer`; empty values mean any."""
        params = parse_qs(query, keep_blank_values=True)
        unknown = sorted(set(params) - {"state", "runbook", "layer"})
        if unknown:
            raise BadQuery(f"unknown query parameter '{unknown[0]}' (valid: state, runbook, layer)")
        states: list[str] = []
        for value in (v for v in params.get("state", []) if v):
            states += _states(value)
        return ListFilters(
            states=tuple(dict.fromkeys(states)),
            runbook=_one(params, "runbook", sorted(self.runbooks())),
            layer=_one(params, "layer", [layer.value for layer in Layer]),
        )

    def _incident(self, ref: str) -> Reply:
        if _REF.match(ref) is None:
            return _text(404, f"no incident page '{ref}' (pages are /incidents/INC-<number>)")
        try:  # read under a read-only transaction, render after it: no lock while rendering
            with read_scope(self.db) as session:
                incident, events = read_views(session, ref)
                story = read_story(session, incident.id, now=self.now())
        except NotFound as exc:
            return _text(404, str(exc))
        live = incident.state not in _CLOSED
        page = render_postmortem(
            incident,
            events,
            fmt="html",
            story=story,
            page_url=self.settings.incident_url(ref),
            refresh_seconds=self.settings.refresh_seconds if live else None,
        )
        return _html(page)


def _states(value: str) -> list[str]:
    if value == "open":
        return [s.value for s in IncidentState if s.value not in _CLOSED]
    valid = [s.value for s in IncidentState]
    if value not in valid:
        others = ", ".join(v for v in valid if v != "open")
        raise BadQuery(f"unknown state '{value}' (valid: open (any but resolved/failed), {others})")
    return [value]


def _one(params: dict[str, list[str]], name: str, valid: Sequence[str]) -> str | None:
    values = [v for v in params.get(name, []) if v]
    if len(values) > 1:
        raise BadQuery(f"'{name}' given {len(values)} times; give it once")
    if not values:
        return None
    if values[0] not in valid:
        raise BadQuery(f"unknown {name} '{values[0]}' (valid: {', '.join(valid)})")
    return values[0]


def _html(page: str) -> Reply:
    return Reply(200, page.encode(), HTML, _HEADERS)


def _text(status: int, message: str, *headers: tuple[str, str]) -> Reply:
    return Reply(status, (message + "\n").encode(), "text/plain; charset=utf-8", headers)
