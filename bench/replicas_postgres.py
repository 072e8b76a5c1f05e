"""Intake alerts/s and triage p50/p99 on PostgreSQL with two `serve` replicas next to SQLite with
one, in the same run, with real processes and webhooks over HTTP.

Each setup starts `gpu-oncall serve` (tests/servers/replicas.py) on a simulated fleet of
`--nodes` nodes (double-bit ECC errors on one of them), storms off so every node opens its own
incident and its own ecc-storm run. The alerts (one GPUEccStorm per node) go out in webhooks of
`--batch` alerts from 4 concurrent senders; every webhook is delivered twice, in shuffled order:
on PostgreSQL once to each replica, on SQLite twice to the one replica. Intake alerts/s counts
every delivery, duplicates included, while the runs triage in the same processes (as in
production: intake and triage share the replicas' CPU). Triage latency is each incident's
`detected_at` -> `diagnosed_at` (webhook received -> diagnosis stored) read from the database
once every run has left `running`; it includes the time a run waited in its replica's queue.
The PostgreSQL server is Debian's, started for the run (fsync off, as in the tests).

Where the CPU went, per triage, from the first webhook sent to the last run done (Linux /proc):
the replicas (every `serve` process), the database server (PostgreSQL's postmaster and
backends; SQLite runs inside the replica) and this process (the senders and the waiting). On a
machine of C cores the runs per second of a setup are at most C / (their sum); one replica is
also held to about one core by its interpreter lock.

    python bench/replicas_postgres.py --nodes 512 --batch 32
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from common import cpu_seconds, machine, percentile  # noqa: E402
from sqlalchemy import text  # noqa: E402
from sqlmodel import select  # noqa: E402

from storage.db import make_engine, session_scope  # noqa: E402
from storage.tables import Incident  # noqa: E402
from tests.servers.fleet_storm import node_name, storm_scenario  # noqa: E402
from tests.servers.oncall import alert, webhook  # noqa: E402
from tests.servers.postgres import start_postgres  # noqa: E402
from tests.servers.replicas import ServeReplica, start_serve, stop_all  # noqa: E402

TOKEN = "bench-webhook-token"
WAIT_SECONDS = 1800.0


def replica_env(scenario: Path, worker: str) -> dict[str, str]:
    return {
        "GPU_ONCALL_SERVER__TOKEN": TOKEN,
        "GPU_ONCALL_STORAGE__MIGRATE": "true",
        "GPU_ONCALL_SIM__SCENARIO": str(scenario),
        "GPU_ONCALL_INTAKE__STORM_THRESHOLD": "0",
        "GPU_ONCALL_WORK__WORKER_ID": worker,
    }


def bodies_for(nodes: int, batch: int) -> list[dict[str, Any]]:
    starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    alerts = [
        alert("GPUEccStorm", {"Hostname": node_name(i, nodes)}, starts_at=starts)
        for i in range(nodes)
    ]
    return [webhook(alerts[i : i + batch]) for i in range(0, nodes, batch)]


@contextmanager
def serving(url: str, scenario: Path, count: int) -> Iterator[list[ServeReplica]]:
    try:
        yield [start_serve(url, env=replica_env(scenario, f"bench-{i}")) for i in range(count)]
    finally:
        stop_all()


def server_cpu_seconds(postmaster: int | None) -> float:
    """CPU of a PostgreSQL server so far: its postmaster with the backends that exited, and
    every live backend (the postmaster's children); 0 without one."""
    if postmaster is None:
        return 0.0
    total = cpu_seconds(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == postmaster:
            with contextlib.suppress(OSError):  # a backend that exited meanwhile
                total += cpu_seconds(int(entry.name))
    return total


def measure(
    label: str,
    url: str,
    replicas: int,
    *,
    nodes: int,
    batch: int,
    postmaster: int | None = None,
) -> dict[str, Any]:
    """`postmaster`: the PostgreSQL server's pid, whose CPU is counted with the replicas'."""
    with tempfile.TemporaryDirectory() as tmp:
        scenario = storm_scenario(Path(tmp) / "fleet.yaml", nodes=nodes, per_rack=16, faulty=[3])
        with serving(url, scenario, replicas) as running:
            bodies = bodies_for(nodes, batch)
            targets = [running[i % replicas].url for i in range(2)]
            deliveries = [(body, target) for body in bodies for target in targets]
            random.Random(7).shuffle(deliveries)
            load_before = os.getloadavg()[0]
            cpu_before = (
                sum(cpu_seconds(r.pid) for r in running),
                server_cpu_seconds(postmaster),
                time.process_time(),
            )
            with ExitStack() as stack:
                http = stack.enter_context(
                    httpx.Client(timeout=120.0, headers={"Authorization": f"Bearer {TOKEN}"})
                )

                def send(item: tuple[dict[str, Any], str]) -> int:
                    return http.post(f"{item[1]}/alerts", json=item[0]).status_code

                started = time.perf_counter()
                with ThreadPoolExecutor(4) as pool:
                    codes = Counter(pool.map(send, deliveries))
                intake = time.perf_counter() - started
            triaged = wait_triaged(url, nodes)
            load_after = os.getloadavg()[0]
            cpu_after = (
                sum(cpu_seconds(r.pid) for r in running),
                server_cpu_seconds(postmaster),
                time.process_time(),
            )
    replicas_cpu, server_cpu, sender_cpu = (
        after - before for before, after in zip(cpu_before, cpu_after, strict=True)
    )
    delivered = sum(len(b["alerts"]) for b, _t in deliveries)
    return {
        "setup": label,
        "replicas": replicas,
        "nodes": nodes,
        "batch": batch,
        "alerts_delivered": delivered,
        "http_codes": {str(k): v for k, v in codes.items()},
        "intake_seconds": round(intake, 2),
        "alerts_per_second": round(delivered / intake),
        **triaged,
        "load_1m_before": round(load_before, 2),
        "load_1m_after": round(load_after, 2),
        "cpu_ms_per_triage": {  # from the first webhook sent to the last run done
            "replicas": round(replicas_cpu / nodes * 1000, 2),
            "database_server": round(server_cpu / nodes * 1000, 2),
            "sender": round(sender_cpu / nodes * 1000, 2),
        },
        "cores": os.cpu_count(),
    }


def wait_triaged(url: str, nodes: int) -> dict[str, Any]:
    """Wait until every incident's run left `running`; the triage figures."""
    engine = make_engine(url)
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while True:
            with engine.connect() as db:
                incidents = db.execute(text("SELECT COUNT(*) FROM incidents")).scalar_one()
                running = db.execute(
                    text("SELECT COUNT(*) FROM runbook_runs WHERE status = 'running'")
                ).scalar_one()
                runs = db.execute(text("SELECT COUNT(*) FROM runbook_runs")).scalar_one()
                if incidents == nodes and runs == nodes and running == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{running} of {runs} runs still running after {WAIT_SECONDS}s")
            time.sleep(0.5)
        with session_scope(engine) as session:  # typed columns: datetimes on SQLite too
            spans = list(session.exec(select(Incident.detected_at, Incident.diagnosed_at)))
    finally:
        engine.dispose()
    seconds = [(d - s).total_seconds() for s, d in spans if s is not None and d is not None]
    if not seconds:
        raise RuntimeError("no incident has a diagnosis")
    first = min(s for s, _d in spans)
    last = max(d for _s, d in spans if d is not None)
    return {
        "incidents": incidents,
        "runs": runs,
        "diagnosed": len(seconds),
        "triage_p50_s": round(percentile(seconds, 0.5), 2),
        "triage_p99_s": round(percentile(seconds, 0.99), 2),
        "triage_wall_s": round((last - first).total_seconds(), 1),
        "runs_per_second": round(len(seconds) / max((last - first).total_seconds(), 1e-9), 1),
    }


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| setup | replicas | nodes | alerts per webhook | deliveries (alerts) | intake alerts/s"
        " | runs | triage p50 | triage p99 | all runs done in | load 1m before → after"
        " | CPU ms per triage: replicas / database server / sender |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    )
    rows = [
        f"| {r['setup']} | {r['replicas']} | {r['nodes']:,} | {r['batch']} |"
        f" {r['alerts_delivered']:,} | **{r['alerts_per_second']:,}** | {r['runs']:,} |"
        f" {r['triage_p50_s']} s | {r['triage_p99_s']} s | {r['triage_wall_s']} s |"
        f" {r['load_1m_before']} → {r['load_1m_after']} |"
        f" {r['cpu_ms_per_triage']['replicas']} / {r['cpu_ms_per_triage']['database_server']}"
        f" / {r['cpu_ms_per_triage']['sender']} |"
        for r in results
    ]
    return "\n".join([head, *rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = f"sqlite:///{Path(tmp) / 'oncall.db'}"
        results.append(measure("SQLite", sqlite, 1, nodes=args.nodes, batch=args.batch))
    with start_postgres() as server:
        url = server.url(server.create_database())
        postmaster = int((server.data_dir / "postmaster.pid").read_text().split()[0])
        results.append(
            measure("PostgreSQL", url, 2, nodes=args.nodes, batch=args.batch, postmaster=postmaster)
        )
    for r in results:
        print(json.dumps(r))
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
