"""Alertmanager webhook (version 4) models and the alert identity used for deduplication.

Validated with pydantic at the edge; a malformed body is refused with the field that was wrong.
Alerts are deduplicated on (fingerprint, status, startsAt), enforced by a database unique
constraint (DESIGN §7).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
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
from bot.limits import ALERT_MAX_AGE, ALERT_MAX_SKEW, REJECTED_STARTS_AT_EPOCH

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


REJECTED = "gpu_oncall_rejected"
"""Annotation set on an alert stored as rejected: why it was not taken (`alerts --unrouted`)."""
_NUL = "\x00"


@dataclass(frozen=True)
class RejectedAlert:
    """An alert of a webhook refused on its own (its batch-mates are taken): `stored` is what
    is kept of it (NUL characters replaced, an unusable `startsAt` set to the epoch)."""

    index: int
    stored: Alert
    reason: str


def screen_alerts(
    webhook: AlertmanagerWebhook, *, at: datetime
) -> tuple[list[tuple[int, Alert]], list[RejectedAlert]]:
    """Split a webhook's alerts into the ones taken and the ones refused, each with its reason.
    The text and time rules are the same whatever database stores them."""
    taken: list[tuple[int, Alert]] = []
    rejected: list[RejectedAlert] = []
    for index, alert in enumerate(webhook.alerts):
        reason = alert_problem(alert, at=at)
        if reason is None:
            taken.append((index, alert))
        else:
            rejected.append(RejectedAlert(index, _kept(alert, reason, at=at), reason))
    return taken, rejected


def alert_problem(alert: Alert, *, at: datetime) -> str | None:
    """Why this alert cannot be taken (a NUL character, a time outside the window), or None."""
    for what, pairs in (("label", alert.labels), ("annotation", alert.annotations)):
        for key, value in pairs.items():
            if _NUL in key or _NUL in value:
                return f"{what} '{_clean(key)[:40]}' holds a NUL character"
    if _NUL in alert.fingerprint or _NUL in alert.generatorURL:
        return "fingerprint or generatorURL holds a NUL character"
    if not in_window(alert.startsAt, at=at):
        return f"startsAt {alert.startsAt.isoformat()} is outside {window_text(at)}"
    ended = alert.ended_at
    if alert.status == "resolved" and ended is not None and not in_window(ended, at=at):
        return f"endsAt {ended.isoformat()} is outside {window_text(at)}"
    return None


def in_window(when: datetime, *, at: datetime) -> bool:
    """Whether an alert's time is one this bot accepts (see bot.limits)."""
    try:
        return at - ALERT_MAX_AGE <= when <= at + ALERT_MAX_SKEW
    except OverflowError:
        return False


def window_text(at: datetime) -> str:
    return (
        f"the accepted window ({ALERT_MAX_AGE.days} days before to {ALERT_MAX_SKEW.days} day "
        "after the time it was received)"
    )


def _clean(text: str) -> str:
    return text.replace(_NUL, "\uFFFD")


def _kept(alert: Alert, reason: str, *, at: datetime) -> Alert:
    labels = {_clean(k): _clean(v) for k, v in alert.labels.items()}
    annotations = {_clean(k): _clean(v) for k, v in alert.annotations.items()}
    annotations[REJECTED] = reason
    starts = alert.startsAt
    if not in_window(starts, at=at):
        starts = datetime.fromisoformat(REJECTED_STARTS_AT_EPOCH)
    ends = alert.endsAt if alert.ended_at is None or in_window(alert.ended_at, at=at) else None
    return alert.model_copy(
        update={
            "labels": labels,
            "annotations": annotations,
            "startsAt": starts,
            "endsAt": ends,
            "fingerprint": _clean(alert.fingerprint),
            "generatorURL": _clean(alert.generatorURL),
        }
    )
