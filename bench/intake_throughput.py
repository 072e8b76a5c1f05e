"""Alert intake throughput: alerts/s through POST /alerts, every webhook delivered twice, and
zero duplicate incidents.

`--replicas` bot replicas (processes over one SQLite database, as pods would share one
PostgreSQL; two by default) receive webhooks from concurrent senders in another process; each
webhook holds `--batch` alerts and is delivered twice, in shuffled order (with two replicas or
more, the redelivery goes to another replica than the first delivery). Each node fires
GPUEccStorm and GPUXidBurst, which both route to (ecc-storm, node): one incident per node is
expected. Triage runs are counted but not executed (measured separately by
triage_latency.py), so the figure is intake alone: validate, store, dedup, group, answer.
`server_cpu_seconds` is the replicas' CPU during the load (steadier than alerts/s on a shared
machine).

    python bench/intake_throughput.py --nodes 1024 --batch 32 --senders 4
    python bench/intake_throughput.py --nodes 1024 --batch 32 --replicas 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
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

import httpx
from common import ecc_fleet, machine, node, relax_sqlite_sync
from servers.prometheus import free_port
from sqlmodel import select

from bot.config import IntakeSettings, ServerSettings, Settings, StorageSettings
from bot.intake.receiving import Received
from bot.serving.app import RunningServer, create_app
from bot.wiring.runtime import open_runtime
from bot.work.dispatching import TriageWorkers
from storage.db import make_engine, session_scope
from storage.tables import Incident, ReceivedAlert


class CountingWorkers(TriageWorkers):
    """Counts the runs intake asks for instead of running them (intake measured alone)."""

    def submit_run(self, received: Received) -> bool:
        self.counters.triage("queued")
        return True


def alerts_for(nodes: int, starts: Any) -> list[dict[str, Any]]:
    out = []
    for index in range(nodes):
        for alertname in ("GPUEccStorm", "GPUXidBurst"):
            labels = {
                "alertname": alertname,
                "severity": "critical",
                "Hostname": node(index, nodes),
            }
            out.append(
                {
                    "status": "firing",
                    "labels": labels,
                    "startsAt": starts.isoformat(),
                    "endsAt": "0001-01-01T00:00:00Z",
                    "fingerprint": f"{alertname}-{index}",
                }
            )
    return out


def serve_replica(port: int, db_url: str, nodes: int, storms: int, sync: str) -> None:
    """Child process: one replica, its triage runs counted, not executed."""
    settings = Settings(
        storage=StorageSettings(url=db_url),
        server=ServerSettings(workers=1),
        intake=IntakeSettings(storm_threshold=storms),
    )
    with open_runtime(settings, scenario=ecc_fleet(nodes), fresh=True) as rt:
        if sync == "normal":
            relax_sqlite_sync(rt.db, rt.engine.checkpointer)
        app = create_app(settings, rt)
        app.workers.shutdown()  # never started: the webhooks hand their runs to the counter
        # The intake queues on `webhooks.queue`: replacing only `app.workers` (as this bench
        # did until issue 21) left the real workers running every triage during the load.
        app.workers = app.webhooks.queue = CountingWorkers(
            rt.engine,
            db=rt.db,
            catalog=rt.catalog,
            clock=rt.clock,
            silences=rt.deps.silences,
            workers=1,
            queue_limit=1,
            counters=app.counters,
        )
        RunningServer(app, port=port).serve()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU a process has used (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def replicas(count: int, db_url: str, args: list[str]) -> Iterator[list[str]]:
    ports = [free_port() for _ in range(count)]
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve-replica", str(port), "--db", db_url, *args]
        )
        for port in ports
    ]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    _pids.clear()
    _pids.extend(child.pid for child in children)
    try:
        for url in urls:
            deadline = time.monotonic() + 60
            while not _healthy(url):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replica {url} did not start")
                time.sleep(0.1)
        yield urls
    finally:
        for child in children:
            child.terminate()
            child.wait(timeout=30)


_pids: list[int] = []
"""The running replicas' process ids (for their CPU time)."""


def _server_cpu() -> float | None:
    spent = [cpu_seconds(pid) for pid in _pids]
    return None if None in spent else sum(s for s in spent if s is not None)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def run(
    nodes: int, batch: int, senders: int, *, storms: int, sync: str, replica_count: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'oncall.db'}"
        args = ["--nodes", str(nodes), "--storm-threshold", str(storms), "--sqlite-sync", sync]
        starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        alerts = alerts_for(nodes, starts)
        bodies = [
            {"version": "4", "groupKey": f"g{i}", "status": "firing", "receiver": "gpu-oncall",
             "alerts": alerts[i : i + batch]}
            for i in range(0, len(alerts), batch)
        ]  # fmt: skip
        spread = 0 if replica_count <= 2 else 1  # two replicas: 0 then 1, as always
        deliveries = [
            (b, (copy + spread * i) % replica_count)
            for i, b in enumerate(bodies)
            for copy in (0, 1)
        ]
        random.Random(7).shuffle(deliveries)
        with replicas(replica_count, db_url, args) as urls, ExitStack() as stack:
            clients = [stack.enter_context(httpx.Client(base_url=u, timeout=60)) for u in urls]

            def send(item: tuple[dict[str, Any], int]) -> int:
                return clients[item[1]].post("/alerts", json=item[0]).status_code

            cpu_before = _server_cpu()
            started = time.perf_counter()
            with ThreadPoolExecutor(senders) as pool:
                codes = Counter(pool.map(send, deliveries))
            elapsed = time.perf_counter() - started
            cpu_after = _server_cpu()
            queued = sum(_queued(c) for c in clients)
        db = make_engine(db_url)
        with session_scope(db) as session:
            incidents = list(session.exec(select(Incident)))
            stored = len(list(session.exec(select(ReceivedAlert))))
        db.dispose()
    keys = Counter(i.group_key for i in incidents if i.state != "resolved")
    delivered = sum(len(b["alerts"]) for b, _r in deliveries)
    return {
        "nodes": nodes,
        "batch": batch,
        "senders": senders,
        "replicas": replica_count,
        "storm_threshold": storms,
        "sqlite_synchronous": sync,
        "alerts_delivered": delivered,
        "http_codes": dict(codes),
        "seconds": round(elapsed, 2),
        "alerts_per_second": round(delivered / elapsed),
        "server_cpu_seconds": None
        if cpu_before is None or cpu_after is None
        else round(cpu_after - cpu_before, 2),
        "alerts_stored": stored,
        "incidents": len(incidents),
        "duplicate_incidents": sum(n - 1 for n in keys.values() if n > 1),
        "runs_requested": queued,
    }


def _queued(client: httpx.Client) -> int:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith('gpu_oncall_triage_runs_total{outcome="queued"}'):
            return int(float(line.split()[-1]))
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--replicas", type=int, default=2, help="bot processes (default 2)")
    parser.add_argument("--storm-threshold", type=int, default=0, help="0: storms off")
    parser.add_argument("--sqlite-sync", choices=["full", "normal"], default="full")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--serve-replica", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_replica:
        serve_replica(
            args.serve_replica, args.db, args.nodes, args.storm_threshold, args.sqlite_sync
        )
        return
    if args.replicas < 1:
        parser.error(f"--replicas must be 1 or more, got {args.replicas}")
    results = [
        run(
            args.nodes,
            b,
            args.senders,
            storms=args.storm_threshold,
            sync=args.sqlite_sync,
            replica_count=args.replicas,
        )
        for b in args.batch
    ]
    for r in results:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
