"""Alertmanager webhook (version 4) models and the alert identity used for deduplication.

Validated with pydantic at the edge; a malformed body is refused with the field that was wrong.
Alerts are deduplicated on (fingerprint, status, startsAt), enforced by a database unique
constraint (DESIGN §7).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from bot.errors import UserInputError

#: Alertmanager's zero time, used for endsAt of firing alerts.
ZERO_TIME_PREFIX = "0001-01-01"


class Alert(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: AwareDatetime
    endsAt: datetime | None = None
    generatorURL: str = ""
    fingerprint: str = ""

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def identity(self) -> str:
        """The fingerprint, or a stable hash of the labels when a sender omitted it."""
        if self.fingerprint:
            return self.fingerprint
        canonical = json.dumps(sorted(self.labels.items()))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def ended_at(self) -> datetime | None:
        if self.endsAt is None or self.endsAt.year <= 1:
            return None
        return self.endsAt


class AlertmanagerWebhook(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    version: Literal["4"]
    groupKey: str
    truncatedAlerts: int = 0
    status: Literal["firing", "resolved"]
    receiver: str
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    alerts: list[Alert]


class InvalidWebhookError(UserInputError):
    """A webhook body that is not Alertmanager's version 4 JSON; `field` is the dotted path
    of the first bad field (`alerts.0.startsAt`), or `body` when it is not JSON at all."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"invalid Alertmanager webhook: field '{field}': {problem}")
        self.field, self.problem = field, problem


def parse_webhook(body: bytes | str | dict[str, object]) -> AlertmanagerWebhook:
    """Validate a webhook body. Raises InvalidWebhookError naming the first bad field."""
    try:
        if isinstance(body, dict):
            return AlertmanagerWebhook.model_validate(body)
        return AlertmanagerWebhook.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidWebhookError(where, first["msg"]) from exc
