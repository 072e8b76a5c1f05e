"""PostgreSQL stopped and started again under `gpu-oncall serve` while webhooks keep arriving.

A real `serve` process (tests/servers/replicas.py) on a database of the session's PostgreSQL; a
client thread posts webhooks one after another, each with three alerts of its own. While the
server is down every webhook is answered 503 and `/readyz` answers 503 naming the database; the
log says so in one line for the whole outage, never a traceback. Afterwards every webhook
answered 200 is stored exactly once (all three alerts) and none answered 503 is partly stored;
once PostgreSQL is back the same process (never restarted) stores webhooks again.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlmodel import select

from storage.db import make_engine, session_scope
from storage.tables import ReceivedAlert
from tests.servers.oncall import alert, webhook
from tests.servers.postgres import PostgresServer
from tests.servers.prometheus import poll
from tests.servers.replicas import ServeReplica, start_serve, stop_all

ALERTS_PER_WEBHOOK = 3
OUTAGE_LINE = "webhooks answered 503 until it is back"


@dataclass
class Poster:
    """Posts webhook after webhook (numbered) to one replica until stopped; records answers."""

    url: str
    answers: dict[int, int] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        with httpx.Client(base_url=self.url, timeout=60.0) as client:
            number = 0
            while not self.stop.is_set():
                labels = [{"instance": f"w{number}-a{i}"} for i in range(ALERTS_PER_WEBHOOK)]
                body = webhook([alert("DiskAlmostFull", one, starts_at=starts) for one in labels])
                status = client.post("/alerts", json=body).status_code
                with self.lock:
                    self.answers[number] = status
                number += 1

    def count(self, status: int) -> int:
        with self.lock:
            return sum(1 for s in self.answers.values() if s == status)

    def statuses(self) -> Counter[int]:
        with self.lock:
            return Counter(self.answers.values())


@pytest.fixture
def replica(postgres_url: str, tmp_path: Path) -> Iterator[ServeReplica]:
    yield start_serve(postgres_url, workdir=tmp_path)
    stop_all()


def stored_per_webhook(url: str) -> Counter[int]:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            rows = session.exec(select(ReceivedAlert)).all()
    finally:
        engine.dispose()
    return Counter(int(row.labels["instance"].split("-")[0][1:]) for row in rows)


def readyz(replica: ServeReplica) -> httpx.Response:
    return httpx.get(f"{replica.url}/readyz", timeout=60.0)


def test_postgres_restarted_under_load_loses_nothing_and_recovers_by_itself(
    postgres_server: PostgresServer, postgres_url: str, replica: ServeReplica
) -> None:
    poster = Poster(replica.url)
    thread = threading.Thread(target=poster.run, daemon=True)
    thread.start()
    try:
        poll(lambda: poster.count(200) >= 20, what="webhooks stored before the outage")
        postgres_server.stop()
        try:
            poll(lambda: poster.count(503) >= 20, what="webhooks refused during the outage")
            down = readyz(replica)
            assert down.status_code == 503
            assert "database" in down.json()["problems"]
            before_restart = poster.count(200)
        finally:
            postgres_server.start()
        poll(lambda: poster.count(200) >= before_restart + 20, what="webhooks stored again")
        poll(lambda: readyz(replica).status_code == 200, what="/readyz 200 again")
    finally:
        poster.stop.set()
        thread.join(60)

    statuses = poster.statuses()
    assert set(statuses) == {200, 503}, statuses
    stored = stored_per_webhook(postgres_url)
    answered_ok = {n for n, s in poster.answers.items() if s == 200}
    refused = {n for n, s in poster.answers.items() if s == 503}
    assert {n: stored[n] for n in answered_ok} == dict.fromkeys(answered_ok, ALERTS_PER_WEBHOOK)
    assert all(stored[n] in (0, ALERTS_PER_WEBHOOK) for n in refused), "half-written webhook"
    assert replica.alive()
    log = replica.log
    assert "Traceback" not in log, log[-3000:]
    assert log.count(OUTAGE_LINE) == 1, log[-3000:]
