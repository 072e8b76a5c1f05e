"""`/metrics` scrape time against the number of incidents: the maintained histograms
(`figure_buckets`) next to the from-scratch computation they replaced, in the same run.

For each size (100, 10,000 and 100,000 incidents by default) a fresh SQLite file is filled with
bulk INSERTs of realistic incidents (8 runbooks, 6 layers or none, 2 severities; most resolved,
some acknowledged, mitigated, failed or still open, fired_at up to an hour before detection),
then `figures.rebuild` computes the buckets once (timed: what `gpu-oncall db upgrade` costs on
such a database). Then, in this process, on the bot's own code:

- **new**: `bot.serving.exposition.scrape`, what `GET /metrics` runs (the buckets' version row;
  when it moved, the bucket rows and the families that changed), p50/p99 over `--scrapes`
  scrapes with nothing changed between them; the by-state and bucket-row reads timed apart;
  "after one family changed": one bucket row of one histogram changed (untimed) before each
  scrape; "after a change": every histogram rendered again from the rows, as with no cache;
- **old**: the handler before the buckets (`count_by_state`, `list_incidents(limit=100_000)`,
  views, `figure_histograms`, rendering), over `--old-scrapes` scrapes;
- the two expositions are compared: the bench stops if they differ;
- **write overhead**: opening then resolving `--writes` incidents (a transaction each), with
  the Session listeners of bot/incidents/figures.py and with them removed (what the
  maintenance costs an incident change).

HTTP is left out: it adds the same constant to both.

    python bench/metrics_scrape.py --sizes 100 10000 100000
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import percentile, run_sizes
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.incidents import figures, lifecycle
from bot.incidents.states import IncidentState
from bot.incidents.views import incident_view
from bot.intake.counters import IntakeCounters
from bot.serving.exposition import counted_histograms, figure_histograms, render_metrics, scrape
from storage import figures as figure_store
from storage import incidents as incident_store
from storage.db import create_schema, make_engine, session_scope
from storage.tables import Incident

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUNBOOKS = [f"runbook-{n}" for n in range(8)]
LAYERS = [None, "gpu_hardware", "fabric", "storage", "software", "scheduler", "none"]


def incident_row(i: int, rng: random.Random) -> dict[str, Any]:
    detected = T0 + timedelta(minutes=i)
    fired = detected - timedelta(seconds=rng.randint(0, 3600))
    state = rng.choices(["resolved", "failed", "open", "monitoring"], [85, 5, 5, 5])[0]
    layer = rng.choice(LAYERS)
    diagnosed = detected + timedelta(seconds=rng.uniform(0.02, 90)) if layer else None
    acknowledged = None
    if rng.random() < 0.6:
        acknowledged = detected + timedelta(seconds=rng.randint(10, 1800))
    mitigated = detected + timedelta(seconds=rng.randint(60, 7200)) if state != "open" else None
    resolved = None
    if state == "resolved":
        resolved = (mitigated or detected) + timedelta(seconds=rng.randint(0, 14400))
    runbook, target = rng.choice(RUNBOOKS), f"gpu-node-{i:06d}"
    return {
        "runbook": runbook,
        "target": target,
        "target_kind": "node",
        "severity": rng.choice(["critical", "warning"]),
        "title": f"{runbook} on {target}",
        "state": state,
        "group_key": f"{runbook}:{target}",
        "layer": layer,
        "confidence": 0.9 if layer else None,
        "culprits": [target] if layer else [],
        "fired_at": fired,
        "detected_at": detected,
        "diagnosed_at": diagnosed,
        "acknowledged_at": acknowledged,
        "acknowledged_by": "U-alice" if acknowledged else None,
        "mitigated_at": mitigated,
        "resolved_at": resolved,
        "created_at": detected,
    }


def fill(db: Engine, size: int) -> None:
    """`size` incidents in bulk INSERTs (Core: no hook), 5,000 rows a statement."""
    rng = random.Random(size)
    table: Any = Incident.__table__  # type: ignore[attr-defined]
    with db.begin() as connection:
        for start in range(0, size, 5000):
            rows = [incident_row(i, rng) for i in range(start, min(size, start + 5000))]
            connection.execute(table.insert(), rows)


def old_scrape(db: Engine, counters: IntakeCounters) -> str:
    """`GET /metrics` before the buckets: every incident loaded and measured."""
    with session_scope(db) as session:
        by_state = incident_store.count_by_state(session)
        rows = incident_store.list_incidents(session, limit=100_000)
        views = [incident_view(row) for row in rows]
    return render_metrics(counters, by_state=by_state, histograms=figure_histograms(views))


def timed(
    call: Callable[[], object], runs: int, clock: Callable[[], float] = time.perf_counter
) -> list[float]:
    """ms per call by `clock` (wall time; `time.process_time`: this process's CPU time, steadier
    on a shared machine)."""
    times = []
    for _ in range(runs):
        start = clock()
        call()
        times.append((clock() - start) * 1000)
    return times


def timed_after(setup: Callable[[], object], call: Callable[[], object], runs: int) -> list[float]:
    """`call` timed alone, `setup` run (untimed) before each run."""
    times = []
    for _ in range(runs):
        setup()
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def stats(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(times, 0.5), 2), "p99_ms": round(percentile(times, 0.99), 2)}


def write_overhead(db: Engine, writes: int) -> dict[str, float]:
    """Open then resolve `writes` new incidents per mode (two transactions each, as the bot
    does them); ms per incident, with the hook and with it removed."""
    result: dict[str, float] = {}
    for mode in ("warm-up", "with_hook", "without_hook"):
        if mode == "without_hook":
            for name, listener in figures.SESSION_LISTENERS:
                event.remove(Session, name, listener)
        try:
            start = time.perf_counter()
            for n in range(writes if mode != "warm-up" else 10):
                at = T0 + timedelta(days=400, minutes=n)
                with session_scope(db) as session:
                    incident = lifecycle.open_incident(
                        session,
                        runbook="runbook-0",
                        target=f"{mode}-{n}",
                        target_kind="node",
                        severity="critical",
                        title="bench",
                        fired_at=at - timedelta(minutes=5),
                        detected_at=at,
                        actor="alertmanager",
                    )
                with session_scope(db) as session:
                    lifecycle.transition(
                        session, incident, to=IncidentState.RESOLVED, at=at, actor="bot"
                    )
            elapsed = (time.perf_counter() - start) * 1000
            if mode != "warm-up":  # the first statements of each kind compile: not counted
                result[f"{mode}_ms"] = round(elapsed / max(1, writes), 2)
        finally:
            if mode == "without_hook":
                for name, listener in figures.SESSION_LISTENERS:
                    event.listen(Session, name, listener)
    return result


def run(size: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = make_engine(f"sqlite:///{Path(tmp) / 'oncall.db'}")
        create_schema(db)
        start = time.perf_counter()
        fill(db, size)
        load_s = time.perf_counter() - start
        start = time.perf_counter()
        with session_scope(db) as session:
            figures.rebuild(session)
        rebuild_s = time.perf_counter() - start
        counters = IntakeCounters()
        new_text, old_text = scrape(db, counters), old_scrape(db, counters)
        if new_text != old_text:
            raise SystemExit(f"{size} incidents: the two expositions differ")
        with session_scope(db) as session:
            buckets = len(figure_store.read_counts(session))

        def by_state() -> None:
            with session_scope(db) as session:
                incident_store.count_by_state(session)

        def changed() -> None:  # a scrape after incidents changed: the histograms re-rendered
            with session_scope(db) as session:
                counts = figures.read_counts(session)
            by_state = figures.state_counts(counts)
            render_metrics(counters, by_state=by_state, histograms=counted_histograms(counts))

        def one_change() -> None:  # an incident's time to detect observed: one family changes
            key = ("mttd", RUNBOOKS[0], "gpu_hardware", "critical", 0)
            with session_scope(db) as session:
                figure_store.add_counts(session, {key: (1, 1000)})

        def bucket_rows() -> None:
            with session_scope(db) as session:
                figures.read_counts(session)

        result = {
            "incidents": size,
            "bucket_rows": buckets,
            "exposition_lines": new_text.count("\n"),
            "load_s": round(load_s, 2),
            "rebuild_s": round(rebuild_s, 3),
            "new": stats(timed(lambda: scrape(db, counters), args.scrapes)),
            "new_cpu": stats(timed(lambda: scrape(db, counters), args.scrapes, time.process_time)),
            "new_changed": stats(timed(changed, args.scrapes)),
            "new_one_family": stats(
                timed_after(one_change, lambda: scrape(db, counters), args.scrapes)
            ),
            "new_count_by_state": stats(timed(by_state, args.scrapes)),
            "new_bucket_rows": stats(timed(bucket_rows, args.scrapes)),
            "old": stats(timed(lambda: old_scrape(db, counters), args.old_scrapes)),
            "write": write_overhead(db, args.writes),
        }
        db.dispose()
        return result


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| incidents | bucket rows | new p50 / p99 ms | new CPU p50 ms "
        "| new after a change p50 / p99 ms "
        "| (by state, buckets) p50 ms "
        "| new after one family changed p50 / p99 ms "
        "| old p50 / p99 ms | rebuild s | open+resolve ms with / without hook |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['incidents']:,} | {r['bucket_rows']} "
            f"| {r['new']['p50_ms']} / {r['new']['p99_ms']} "
            f"| {r['new_cpu']['p50_ms']} "
            f"| {r['new_changed']['p50_ms']} / {r['new_changed']['p99_ms']} "
            f"| {r['new_count_by_state']['p50_ms']}, {r['new_bucket_rows']['p50_ms']} "
            f"| {r['new_one_family']['p50_ms']} / {r['new_one_family']['p99_ms']} "
            f"| {r['old']['p50_ms']} / {r['old']['p99_ms']} | {r['rebuild_s']} "
            f"| {r['write']['with_hook_ms']} / {r['write']['without_hook_ms']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--scrapes", type=int, default=200, help="new scrapes per size")
    parser.add_argument("--old-scrapes", type=int, default=5, help="old scrapes per size")
    parser.add_argument("--writes", type=int, default=100, help="incidents per hook mode")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = run_sizes(args, run)
    print(table(results))


if __name__ == "__main__":
    main()
