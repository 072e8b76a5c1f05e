"""The Tickets port: open an RMA / fabric / facility ticket pre-filled with evidence.

`WebhookTickets` POSTs JSON to a ticketing webhook with httpx (timeouts always set).
`RecordedTickets` keeps tickets in memory and returns an id: used when no webhook is
configured, the ticket body then lives on the incident timeline.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from integrations.errors import IntegrationError


class TicketError(IntegrationError):
    """The ticketing webhook failed."""

    retryable = True


@dataclass(frozen=True)
class Ticket:
    queue: str
    title: str
    body: str
    fields: dict[str, Any] = field(default_factory=dict)


class Tickets(Protocol):
    def open(self, ticket: Ticket, *, idempotency_key: str) -> str:
        """Open the ticket and return its id. The same key returns the same ticket."""
        ...


class RecordedTickets:
    """Tickets kept in memory (the body is recorded on the incident timeline by the caller)."""

    def __init__(self) -> None:
        self.opened: dict[str, tuple[str, Ticket]] = {}

    def open(self, ticket: Ticket, *, idempotency_key: str) -> str:
        if idempotency_key in self.opened:
            return self.opened[idempotency_key][0]
        digest = hashlib.sha1(idempotency_key.encode()).hexdigest()[:6].upper()
        ticket_id = f"{ticket.queue.upper()}-{digest}"
        self.opened[idempotency_key] = (ticket_id, ticket)
        return ticket_id


class WebhookTickets:
    """POST {queue, title, body, fields, idempotency_key} to a webhook; expects {"id": ...}."""

    def __init__(self, url: str, *, client: httpx.Client, token: str | None = None) -> None:
        self._url, self._client, self._token = url, client, token

    def open(self, ticket: Ticket, *, idempotency_key: str) -> str:
        headers = {"Idempotency-Key": idempotency_key}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        payload = {
            "queue": ticket.queue,
            "title": ticket.title,
            "body": ticket.body,
            "fields": ticket.fields,
            "idempotency_key": idempotency_key,
        }
        try:
            response = self._client.post(self._url, json=payload, headers=headers)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise TicketError(f"ticket webhook {self._url} failed: {type(exc).__name__}") from exc
        return str(data.get("id") or data.get("key") or "unknown")
