"""Alertmanager webhook (version 4) models and the alert identity used for deduplication.

Validated with pydantic at the edge; a malformed body is refused with the field that was wrong.
Alerts are deduplicated on (fingerprint, status, startsAt), enforced by a database unique
constraint (DESIGN §7).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from bot.errors import UserInputError

#: Alertmanager's zero time, used for endsAt of firing alerts.
ZERO_TIME_PREFIX = "0001-01-01"

MAX_ALERTS_PER_WEBHOOK = 10_000
"""Most alerts one webhook may carry (Alertmanager's `max_alerts` truncates a group below it)."""
MAX_KEYS = 128
"""Most labels, and most annotations, one alert may carry."""
MAX_KEY_CHARS = 256
"""Longest label or annotation name."""
MAX_LABEL_VALUE_CHARS = 4096
"""Longest label value (node, job and service names are far shorter)."""
MAX_ANNOTATION_VALUE_CHARS = 32_768
"""Longest annotation value (descriptions, runbook URLs)."""


def _bounded(value_chars: int, what: str) -> AfterValidator:
    """A validator refusing more than MAX_KEYS entries, or a name or value that is too long."""

    def check(pairs: Mapping[str, str]) -> Mapping[str, str]:
        if len(pairs) > MAX_KEYS:
            raise PydanticCustomError(
                "too_many", f"{len(pairs)} {what}s; at most {MAX_KEYS}"
            )
        for key, value in pairs.items():
            if len(key) > MAX_KEY_CHARS:
                raise PydanticCustomError(
                    "too_long",
                    f"{what} name '{key[:40]}...' has {len(key)} characters; "
                    f"at most {MAX_KEY_CHARS}",
                )
            if len(value) > value_chars:
                raise PydanticCustomError(
                    "too_long",
                    f"{what} '{key[:40]}' has a value of {len(value)} characters; "
                    f"at most {value_chars}",
                )
        return pairs

    return AfterValidator(check)


def _at_most_max_alerts(alerts: object) -> object:
    """Refuse an oversized webhook before validating any of its alerts."""
    if isinstance(alerts, list) and len(alerts) > MAX_ALERTS_PER_WEBHOOK:
        raise PydanticCustomError(
            "too_many",
            f"{len(alerts)} alerts in one webhook; at most {MAX_ALERTS_PER_WEBHOOK} "
            "(set max_alerts in the Alertmanager receiver)",
        )
    return alerts


Labels = Annotated[dict[str, str], _bounded(MAX_LABEL_VALUE_CHARS, "label")]
Annotations = Annotated[dict[str, str], _bounded(MAX_ANNOTATION_VALUE_CHARS, "annotation")]


class Alert(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    status: Literal["firing", "resolved"]
    labels: Labels
    annotations: Annotations = Field(default_factory=dict)
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
    groupLabels: Labels = Field(default_factory=dict)
    commonLabels: Labels = Field(default_factory=dict)
    commonAnnotations: Annotations = Field(default_factory=dict)
    externalURL: str = ""
    alerts: Annotated[list[Alert], BeforeValidator(_at_most_max_alerts)]


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
