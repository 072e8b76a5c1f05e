"""One received alert as the plain row `gpu-oncall alerts` prints or gives as JSON. Pure: the
row may be an ORM `ReceivedAlert` (bot/intake/listing.py) or a driver row (the CLI's
light read, storage/glance.py), so the two paths print the same."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol


class StoredAlert(Protocol):
    """What a listed alert shows (`storage.tables.ReceivedAlert`)."""

    @property
    def received_at(self) -> datetime: ...
    @property
    def status(self) -> str: ...
    @property
    def alertname(self) -> str: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def starts_at(self) -> datetime: ...
    @property
    def ends_at(self) -> datetime | None: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...
    @property
    def incident_id(self) -> int | None: ...
    @property
    def runbook(self) -> str | None: ...


def alert_row(stored: StoredAlert, reason: str | None) -> dict[str, Any]:
    """The listing's row: what arrived, the incident it went to, and why no runbook took it."""
    return {
        "received_at": stored.received_at,
        "status": stored.status,
        "alertname": stored.alertname,
        "fingerprint": stored.fingerprint,
        "starts_at": stored.starts_at,
        "ends_at": stored.ends_at,
        "labels": dict(stored.labels),
        "annotations": dict(stored.annotations),
        "incident": f"INC-{stored.incident_id}" if stored.incident_id else None,
        "runbook": stored.runbook,
        "reason": reason,
    }
