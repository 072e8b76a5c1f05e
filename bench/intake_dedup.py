"""Dedup latency and intake throughput against a large table of stored alerts: does the cost of
a webhook grow with the number of alerts already received?

For each table size (10k, 100k and 1M stored alerts by default) a fresh SQLite file is filled
with bulk INSERTs, then, in this process, on the bot's own storage code:

- **dedup latency**: the redelivery lookup of one webhook of `--batch` already-stored alerts
  (`storage.alerts.existing_alerts`, what `record_alerts` runs for every alert the insert
  skipped), p50/p99 over `--lookups` webhooks; the same for the row-value `IN (VALUES ...)`
  query it replaced (`--old-lookups` of them: it scans the table, so fewer);
- **intake throughput**: `receive_webhook` (store, dedup, route, open or attach incidents, one
  commit per webhook, as the server does) for `--webhooks` webhooks of `--batch` new alerts,
  each delivered twice; alerts/s counts both deliveries. Once with the index-backed lookup and
  once with the old one swapped in;
- **storm check**: `recent_firing` (alerts of one name received in the last 5 minutes), with the
  storm-window index and, after dropping it from the bench's copy, without.

HTTP is left out (bench/intake_throughput.py measures the server end to end).

    python bench/intake_dedup.py --sizes 10000 100000 1000000
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import percentile, run_sizes
from sqlalchemy import select, tuple_
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.intake.alerts import parse_webhook
from bot.intake.receiving import receive_webhook
from bot.intake.routing import AlertRoute
from storage import alerts as alert_store
from storage.db import create_schema, make_engine, session_scope
from storage.tables import ReceivedAlert

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROUTES = {"GPUEccStorm": AlertRoute("ecc-storm", "Hostname", "node", "node")}
Identity = tuple[str, str, datetime]
Lookup = Callable[[Session, Sequence[Identity]], dict[Identity, tuple[int, int | None]]]


def old_lookup(session: Session, identities: Sequence[Identity]) -> dict[Identity, Any]:
    """The lookup before this change: a row-value IN, which SQLite answers by a full scan."""
    if not identities:
        return {}
    c = ReceivedAlert.__table__.c  # type: ignore[attr-defined]
    statement = select(c.id, c.incident_id, c.fingerprint, c.status, c.starts_at).where(
        tuple_(c.fingerprint, c.status, c.starts_at).in_(list(identities))
    )
    rows = session.connection().execute(statement)
    return {(fp, st, at): (int(i), inc) for i, inc, fp, st, at in rows}


def stored_identity(index: int) -> Identity:
    return (f"stored-{index:08d}", "firing", T0 - timedelta(seconds=index))


def fill(path: Path, rows: int) -> float:
    """Bulk-insert `rows` received alerts (sqlite3 executemany, no fsync); returns seconds."""
    engine = make_engine(f"sqlite:///{path}")
    create_schema(engine)
    engine.dispose()
    started = time.perf_counter()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA synchronous=OFF")
    labels = json.dumps({"alertname": "GPUEccStorm", "Hostname": "gpu-node-0001"})
    received = (T0 - timedelta(days=2)).strftime("%Y-%m-%d %H:%M:%S.%f")

    def values() -> Iterator[tuple[Any, ...]]:
        for index in range(rows):
            fingerprint, status, starts = stored_identity(index)
            at = starts.strftime("%Y-%m-%d %H:%M:%S.%f")
            yield (fingerprint, status, at, "GPUEccStorm", labels, "{}", received)

    with connection:
        connection.executemany(
            "INSERT INTO received_alerts (fingerprint, status, starts_at, alertname, labels, "
            "annotations, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            values(),
        )
    connection.close()
    return time.perf_counter() - started


def dedup_latency(
    engine: Engine, rows: int, *, lookup: Lookup, webhooks: int, batch: int
) -> dict[str, float]:
    """Milliseconds per webhook-sized redelivery lookup of already-stored identities."""
    rng = random.Random(rows)
    timings: list[float] = []
    for _ in range(webhooks):
        identities = [stored_identity(rng.randrange(rows)) for _ in range(batch)]
        with session_scope(engine) as session:
            started = time.perf_counter()
            found = lookup(session, identities)
            timings.append((time.perf_counter() - started) * 1000)
        assert len(found) == len(set(identities))
    p50, p99 = percentile(timings, 0.5), percentile(timings, 0.99)
    return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3)}


def webhook(index: int, batch: int, *, tag: str) -> dict[str, Any]:
    """A webhook of `batch` new GPUEccStorm alerts on 4,096 nodes of their own (`tag`)."""
    alerts = [
        {
            "status": "firing",
            "labels": {
                "alertname": "GPUEccStorm",
                "Hostname": f"{tag}-node-{(index * batch + i) % 4096:04d}",
            },
            "startsAt": (T0 + timedelta(seconds=index)).isoformat(),
            "fingerprint": f"{tag}-{index}-{i}",
        }
        for i in range(batch)
    ]
    return {"version": "4", "groupKey": f"{tag}-{index}", "status": "firing",
            "receiver": "gpu-oncall", "alerts": alerts}  # fmt: skip


def intake_throughput(engine: Engine, *, webhooks: int, batch: int, tag: str) -> float:
    """Alerts/s through receive_webhook, every webhook delivered twice (one commit each)."""
    bodies = [parse_webhook(webhook(i, batch, tag=tag)) for i in range(webhooks)]
    deliveries = [body for body in bodies for _ in (0, 1)]
    started = time.perf_counter()
    for body in deliveries:
        with session_scope(engine) as session:
            receive_webhook(session, body, routes=ROUTES, at=T0 + timedelta(days=1))
    return len(deliveries) * batch / (time.perf_counter() - started)


def storm_window_latency(engine: Engine, *, queries: int) -> dict[str, float]:
    """Milliseconds per storm check (`recent_firing`: alerts of one name in the last 5 min),
    with 8 GPUXidBurst alerts in the window among all the stored alerts."""
    now = T0 + timedelta(days=2)
    recent = [
        alert_store.NewAlert(f"xid-{i}", "firing", now - timedelta(minutes=1), None, "GPUXidBurst")
        for i in range(8)
    ]
    with session_scope(engine) as session:
        alert_store.record_alerts(session, recent, received_at=now)
    timings: list[float] = []
    for _ in range(queries):
        with session_scope(engine) as session:
            started = time.perf_counter()
            found = alert_store.recent_firing(
                session, alertname="GPUXidBurst", since=now - timedelta(minutes=5)
            )
            timings.append((time.perf_counter() - started) * 1000)
        assert len(found) == 8
    p50, p99 = percentile(timings, 0.5), percentile(timings, 0.99)
    return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3)}


@contextmanager
def swapped_lookup(lookup: Lookup) -> Iterator[None]:
    """Make record_alerts use `lookup` (the old query, for comparison in the same run)."""
    original = alert_store.existing_alerts
    alert_store.existing_alerts = lookup  # type: ignore[assignment]
    try:
        yield
    finally:
        alert_store.existing_alerts = original  # type: ignore[assignment]


def run(size: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "oncall.db"
        fill_seconds = fill(path, size)
        engine = make_engine(f"sqlite:///{path}")
        batch = args.batch
        result: dict[str, Any] = {
            "stored_alerts": size,
            "batch": batch,
            "fill_seconds": round(fill_seconds, 1),
            "dedup_indexed": dedup_latency(
                engine, size, lookup=alert_store.existing_alerts, webhooks=args.lookups, batch=batch
            ),
            "dedup_old": dedup_latency(
                engine, size, lookup=old_lookup, webhooks=args.old_lookups, batch=batch
            ),
            "intake_alerts_per_second_indexed": round(
                intake_throughput(engine, webhooks=args.webhooks, batch=batch, tag="new")
            ),
        }
        with swapped_lookup(old_lookup):
            old = intake_throughput(engine, webhooks=args.old_webhooks, batch=batch, tag="old")
        result["intake_alerts_per_second_old"] = round(old)
        result["storm_window_indexed"] = storm_window_latency(engine, queries=args.lookups)
        with engine.begin() as connection:  # the table as it was before the storm-window index
            connection.exec_driver_sql("DROP INDEX ix_received_alerts_storm_window")
        result["storm_window_old"] = storm_window_latency(engine, queries=args.old_lookups)
        engine.dispose()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--batch", type=int, default=32, help="alerts per webhook")
    parser.add_argument("--lookups", type=int, default=300, help="indexed lookups per size")
    parser.add_argument("--old-lookups", type=int, default=20, help="old-query lookups per size")
    parser.add_argument("--webhooks", type=int, default=100, help="webhooks per intake run")
    parser.add_argument("--old-webhooks", type=int, default=20, help="webhooks with the old query")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    run_sizes(args, run)


if __name__ == "__main__":
    main()
