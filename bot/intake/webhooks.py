"""The webhook use case: an Alertmanager body in, an answer out. Parse it, screen each alert
(an alert that can never be stored is kept as rejected with its reason, its batch-mates are
taken), store and group in one transaction together with the triage work it creates, count,
then queue the runs and the silence expiries. Called by `POST /alerts`; it opens its own
storage session, so no HTTP code does.

A webhook whose every alert is stored already (a redelivery) is answered from one read, with
no write transaction and no writer's turn; any other is stored under `turn` (on SQLite the
webhooks' writes take turns, bot/serving/app.py WriterTurns).

The answer says whether Alertmanager should retry: 200 once stored, 400 for a body that can
never be taken, 503 only when the database could not store it (a retry helps).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.intake.alerts import InvalidWebhookError, parse_webhook, screen_alerts
from bot.intake.counters import IntakeCounters
from bot.intake.grouping import Received
from bot.intake.receiving import (
    receive_alerts,
    receive_redelivered,
    receive_rejected,
    stored_already,
)
from bot.intake.routing import AlertRoute
from bot.intake.storms import StormPolicy
from storage.alerts import Found
from storage.db import read_scope, session_scope
from storage.errors import StorageError

logger = logging.getLogger(__name__)


class TriageQueue(Protocol):
    """Where triage work goes (bot.work.dispatching.TriageWorkers)."""

    def record_triage(self, session: Any, received: Sequence[Received]) -> int: ...

    def submit_run(self, received: Received) -> bool: ...

    def submit_expiry(self, incident_id: int) -> bool: ...


@dataclass(frozen=True)
class Answer:
    """The HTTP status and JSON body of a webhook's answer."""

    status: int
    body: dict[str, Any]


class OutageNotice:
    """One log line when the database goes away (webhooks answered 503 from then on) and one
    when it is back, however many requests fail in between: never a line per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down = False

    def failed(self, exc: StorageError) -> None:
        with self._lock:
            if self._down:
                return
            self._down = True
        logger.error("%s; webhooks answered 503 until it is back", one_line(exc))

    def stored(self) -> None:
        with self._lock:
            if not self._down:
                return
            self._down = False
        logger.warning("database is back: webhooks are stored again")


def one_line(exc: BaseException) -> str:
    """An error's message on one line (libpq's messages span several)."""
    return " ".join(str(exc).split())


@dataclass
class WebhookIntake:
    """Receives Alertmanager webhooks into `db` (see the module docstring)."""

    db: Engine
    now: Callable[[], datetime]
    routes: Mapping[str, AlertRoute]
    storms: StormPolicy | None
    queue: TriageQueue
    counters: IntakeCounters
    turn: Callable[[], AbstractContextManager[object]] = field(default=nullcontext)
    """Held while a webhook writes (not while it is parsed, screened or answered)."""

    def __post_init__(self) -> None:
        self.outage = OutageNotice()

    def receive(self, body: bytes) -> Answer:
        """Answer one webhook body (and count the answer's code)."""
        answer = self._receive(body)
        self.counters.webhook(answer.status)
        return answer

    def _receive(self, body: bytes) -> Answer:
        try:
            webhook = parse_webhook(body)
        except InvalidWebhookError as exc:
            return Answer(400, {"error": str(exc), "field": exc.field})
        at = self.now()
        taken, rejected = screen_alerts(webhook, at=at)
        try:
            with read_scope(self.db) as session:
                found = stored_already(session, [a for _, a in taken], rejected)
            received = self._redelivered(taken, rejected, found)
            if received is None:
                with self.turn(), session_scope(self.db) as session:
                    received = self._store(session, taken, rejected, at=at, found=found)
        except StorageError as exc:
            if exc.retryable:  # the database is away: one line per outage, not per webhook
                self.outage.failed(exc)
            else:
                logger.error("webhook not stored: %s", one_line(exc))
            return Answer(503, {"error": f"not stored, retry: {one_line(exc)}"})
        self.outage.stored()
        return Answer(200, self._after_stored(received, rejected=len(rejected)))

    @staticmethod
    def _redelivered(
        taken: Sequence[tuple[int, Any]], rejected: Sequence[Any], found: Found
    ) -> list[Received] | None:
        """The results of a webhook all of whose alerts are stored already; else None."""
        known = receive_redelivered([a for _, a in taken], rejected, found)
        if known is None:
            return None
        by_index = dict(zip((i for i, _ in taken), known[0], strict=True))
        by_index.update(zip((r.index for r in rejected), known[1], strict=True))
        return [by_index[i] for i in sorted(by_index)]

    def _store(
        self,
        session: Session,
        taken: Sequence[tuple[int, Any]],
        rejected: Sequence[Any],
        *,
        at: datetime,
        found: Found,
    ) -> list[Received]:
        alerts = [alert for _, alert in taken]
        received = receive_alerts(
            session, alerts, routes=self.routes, at=at, storms=self.storms, found=found
        )
        self.queue.record_triage(session, received)  # durable before the answer
        by_index = dict(zip((i for i, _ in taken), received, strict=True))
        if rejected:
            kept = receive_rejected(session, rejected, at=at, found=found)
            by_index.update(zip((r.index for r in rejected), kept, strict=True))
        return [by_index[i] for i in sorted(by_index)]

    def _after_stored(self, received: list[Received], *, rejected: int) -> dict[str, Any]:
        count = self.counters
        count.add("alerts_received_total", len(received))
        count.add("alerts_deduplicated_total", sum(r.duplicate for r in received))
        count.add("alerts_unroutable_total", sum(r.unroutable is not None for r in received))
        count.add("alert_storms_total", sum(r.target_kind == "storm" for r in received))
        runs = [r for r in received if r.start_run or r.extends_run]
        queued = [f"INC-{r.incident_id}" for r in runs if self.queue.submit_run(r)]
        for r in received:
            if r.resolved_incident and r.incident_id is not None:
                self.queue.submit_expiry(r.incident_id)
        answer: dict[str, Any] = {
            "received": len(received),
            "duplicates": sum(r.duplicate for r in received),
            "unroutable": [r.fingerprint for r in received if r.unroutable],
            "incidents": sorted({f"INC-{r.incident_id}" for r in received if r.incident_id}),
            "triage_queued": queued,
        }
        if rejected:
            answer["rejected"] = rejected
        return answer
