"""The Silences port and its Alertmanager adapter (API v2, httpx): silence the alerts about a
node while it is being remediated, and expire the silence when the incident is over.

`AlertmanagerSilences` translates every httpx error into `AlertmanagerError` (`raise ... from`);
nothing above `integrations/` sees an httpx exception. `RecordedSilences` keeps silences in
memory when no Alertmanager is configured (the silence is then only recorded on the timeline).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import httpx

from integrations.cluster import Outcome
from integrations.errors import IntegrationError


class AlertmanagerError(IntegrationError):
    """Alertmanager could not be reached or refused the request."""

    retryable = True


class SilenceNotFound(AlertmanagerError):
    """No silence with this id exists."""

    retryable = False


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a silence (`name="value"`, or a regex with `is_regex`)."""

    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True

    def to_api(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "isRegex": self.is_regex,
            "isEqual": self.is_equal,
        }


@dataclass(frozen=True)
class Silence:
    id: str
    matchers: tuple[Matcher, ...]
    state: str  # active | pending | expired
    ends_at: str
    created_by: str = ""
    comment: str = ""


class Silences(Protocol):
    """Creates and expires alert silences. `node_labels` are the alert labels naming a node."""

    node_labels: tuple[str, ...]

    def create(
        self, *, matchers: Sequence[Matcher], duration: timedelta, created_by: str, comment: str
    ) -> tuple[str, Outcome]:
        """Silence alerts matching all `matchers` from now for `duration`. Returns the id and
        CHANGED, or the id of an identical active silence and ALREADY_DONE."""
        ...

    def expire(self, silence_id: str) -> Outcome:
        """End a silence now; ALREADY_DONE if it had ended. Raises SilenceNotFound."""
        ...

    def close(self) -> None:
        """Release connections (the runtime closes its adapters on exit)."""
        ...


class AlertmanagerSilences:
    """Silences in a real Alertmanager through `/api/v2/silences` and `/api/v2/silence/{id}`."""

    def __init__(
        self,
        base_url: str,
        *,
        client: httpx.Client,
        now: Callable[[], datetime],
        node_labels: Sequence[str],
        token: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.node_labels = tuple(node_labels)
        self._client, self._now = client, now
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def create(
        self, *, matchers: Sequence[Matcher], duration: timedelta, created_by: str, comment: str
    ) -> tuple[str, Outcome]:
        wanted = frozenset(matchers)
        for existing in self.list(matchers=matchers):
            if existing.state == "active" and frozenset(existing.matchers) == wanted:
                return existing.id, Outcome.ALREADY_DONE
        now = self._now()
        body = {
            "matchers": [m.to_api() for m in matchers],
            "startsAt": now.isoformat(),
            "endsAt": (now + duration).isoformat(),
            "createdBy": created_by,
            "comment": comment,
        }
        data = self._call("POST", "/api/v2/silences", json=body)
        return str(data["silenceID"]), Outcome.CHANGED

    def expire(self, silence_id: str) -> Outcome:
        if self.get(silence_id).state == "expired":
            return Outcome.ALREADY_DONE
        self._call("DELETE", f"/api/v2/silence/{silence_id}")
        return Outcome.CHANGED

    def close(self) -> None:
        self._client.close()

    def get(self, silence_id: str) -> Silence:
        """One silence by id; SilenceNotFound if Alertmanager has none."""
        return _parse_silence(self._call("GET", f"/api/v2/silence/{silence_id}"))

    def list(self, *, matchers: Sequence[Matcher] = ()) -> list[Silence]:
        """Silences whose matchers include all of `matchers` (Alertmanager's `filter`)."""
        params = [("filter", _filter_text(m)) for m in matchers]
        data = self._call("GET", "/api/v2/silences", params=params)
        return [_parse_silence(item) for item in data]

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = self.base_url + path
        try:
            response = self._client.request(method, url, headers=self._headers, **kwargs)
        except httpx.HTTPError as exc:
            raise AlertmanagerError(
                f"Alertmanager {self.base_url} unreachable ({method} {path}): {type(exc).__name__}"
            ) from exc
        if response.status_code == 404:
            raise SilenceNotFound(f"Alertmanager {self.base_url}: no silence at {path}")
        if response.is_error:
            raise AlertmanagerError(
                f"Alertmanager {self.base_url} refused {method} {path}: HTTP "
                f"{response.status_code}: {response.text.strip()[:200]}"
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise AlertmanagerError(
                f"Alertmanager {self.base_url} answered {method} {path} with invalid JSON"
            ) from exc


class RecordedSilences:
    """Silences kept in memory: the embedded default, when no Alertmanager is configured."""

    def __init__(self, *, node_labels: Sequence[str]) -> None:
        self.node_labels = tuple(node_labels)
        self.silences: dict[str, tuple[frozenset[Matcher], bool]] = {}

    def create(
        self, *, matchers: Sequence[Matcher], duration: timedelta, created_by: str, comment: str
    ) -> tuple[str, Outcome]:
        wanted = frozenset(matchers)
        for silence_id, (existing, active) in self.silences.items():
            if active and existing == wanted:
                return silence_id, Outcome.ALREADY_DONE
        raw = ",".join(sorted(f"{m.name}={m.value}" for m in wanted))
        silence_id = f"recorded-{hashlib.sha1(raw.encode()).hexdigest()[:12]}"
        self.silences[silence_id] = (wanted, True)
        return silence_id, Outcome.CHANGED

    def expire(self, silence_id: str) -> Outcome:
        if silence_id not in self.silences:
            raise SilenceNotFound(f"no recorded silence '{silence_id}'")
        matchers, active = self.silences[silence_id]
        self.silences[silence_id] = (matchers, False)
        return Outcome.CHANGED if active else Outcome.ALREADY_DONE

    def close(self) -> None:
        """Nothing to release."""


def _filter_text(matcher: Matcher) -> str:
    op = (
        ("=~" if matcher.is_regex else "=")
        if matcher.is_equal
        else "!~"
        if matcher.is_regex
        else "!="
    )
    escaped = matcher.value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{matcher.name}{op}"{escaped}"'


def _parse_silence(item: Any) -> Silence:
    try:
        return Silence(
            id=str(item["id"]),
            matchers=tuple(
                Matcher(
                    name=str(m["name"]),
                    value=str(m["value"]),
                    is_regex=bool(m.get("isRegex", False)),
                    is_equal=bool(m.get("isEqual", True)),
                )
                for m in item["matchers"]
            ),
            state=str(item["status"]["state"]),
            ends_at=str(item["endsAt"]),
            created_by=str(item.get("createdBy", "")),
            comment=str(item.get("comment", "")),
        )
    except (KeyError, TypeError) as exc:
        raise AlertmanagerError(f"unexpected silence from Alertmanager: {exc!r}") from exc
