"""Triage latency: Alertmanager webhook received -> diagnosis stored, for simulated fleets.

For each fleet size the bot is served on loopback (bot.serving.app) and a GPUEccStorm webhook for
the faulty node is POSTed; the ecc-storm run goes to its verdict and stops at the approval. The
latency is the incident's own time to diagnosis, `diagnosed_at - detected_at` on the bot's
clock: from the webhook's arrival to the verdict (stamped when the localize step's output reaches
the engine and committed with it when that super-step ends, a millisecond or two later), so
queueing for a worker counts. Between runs the alert resolves, so the next webhook opens a new
incident. Two telemetry backends:

- `inprocess`: SimTelemetry reads the simulated fleet directly;
- `prometheus`: a real Prometheus (Debian's) scrapes the same fleet's series (only those the
  runbook reads, from a separate exporter process) every 5 s, and the run reads through
  PrometheusTelemetry on loopback.

Over the same window, per run:
- telemetry time: the time during which at least one read of the Telemetry port was in flight,
  i.e. the union of the reads' intervals (a runbook's reads run concurrently, so overlapping
  reads count once; with every read in one super-step, as in ecc-storm, this is their time on
  the critical path). It includes the client's own work and any wait for the interpreter or a
  core while other steps run;
- engine overhead: the rest of the window (intake, scheduling, the steps' own work, recording),
  its share of the window, and overhead / telemetry time, which DESIGN §12 bounds at 0.2;
- where the window goes: intake (received -> run started: alert stored, incident opened, handed
  to a worker), run setup (-> first read: inputs checked, run recorded, graph started), reads
  (first read started -> last read done) and after the reads (-> verdict: the end of the gather
  super-step and its recording, the checks and theirs, localizing).
Plus telemetry queries per run and the process's CPU time per run (every thread: webhook POSTed
-> run stopped at its approval, so the evidence snapshot and the proposal count too), the
steadier figure on a loaded machine.

    python bench/triage_latency.py --sizes 64 512 1024 --runs 50 --mode both
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
from common import FAULTY, TimedTelemetry, ecc_fleet, machine, node, percentile, relax_sqlite_sync
from servers.prometheus import PrometheusServer, ScrapeTarget, free_port

from bot.clock import SystemClock
from bot.config import PrometheusSettings, ServerSettings, Settings, StorageSettings
from bot.serving.app import RunningServer, create_app
from bot.wiring.runtime import Runtime, open_runtime
from simulator.exporter import CONTENT_TYPE, format_sample
from simulator.fleet import Fleet
from storage import incidents as incident_store
from storage import runs as run_store
from storage.db import session_scope

#: The series the ecc-storm runbook reads (its signals in runbooks/signals.yaml).
ECC_METRICS = (
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_ROW_REMAP_PENDING",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_XID_ERRORS",
    "up",
)


class EccSeriesApp:
    """WSGI: only the series the runbook reads, so a 1,024-node fleet scrapes in seconds (the
    full exposition is ~70 MB at that size)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        at = self.fleet.now()
        lines = [
            format_sample(s.metric, s.labels, s.value)
            for metric in ECC_METRICS
            for s in self.fleet.series(metric, at)
        ]
        body = ("\n".join(lines) + "\n").encode()
        start_response(
            "200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))]
        )
        return [body]


def webhook(rt: Runtime, nodes: int, *, status: str, index: int) -> dict[str, Any]:
    starts = rt.fleet.t0 - timedelta(minutes=10) + timedelta(seconds=index)
    ends = rt.clock.now().isoformat() if status == "resolved" else "0001-01-01T00:00:00Z"
    labels = {"alertname": "GPUEccStorm", "severity": "critical", "Hostname": node(FAULTY, nodes)}
    alert = {"status": status, "labels": labels, "startsAt": starts.isoformat(), "endsAt": ends}
    alert["fingerprint"] = f"bench-{nodes}"
    return {
        "version": "4",
        "groupKey": "bench",
        "status": status,
        "receiver": "gpu-oncall",
        "alerts": [alert],
    }


@contextmanager
def serving(
    nodes: int, mode: str, workdir: Path, *, sync: str
) -> Iterator[tuple[Runtime, RunningServer, TimedTelemetry]]:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{workdir / 'oncall.db'}"),
        server=ServerSettings(workers=2),
    )
    with ExitStack() as stack:
        if mode == "prometheus":
            exporter = stack.enter_context(exporter_process(nodes))
            target = ScrapeTarget(job="sim", url=exporter)
            prometheus = PrometheusServer(workdir, targets=[target], scrape_interval="5s")
            stack.callback(prometheus.stop)
            prometheus.start().wait_for_scrapes(3)
            settings = settings.model_copy(
                update={
                    "telemetry": "prometheus",
                    "prometheus": PrometheusSettings(url=prometheus.url),
                }
            )
        rt = stack.enter_context(open_runtime(settings, scenario=ecc_fleet(nodes), fresh=True))
        if sync == "normal":
            relax_sqlite_sync(rt.db, rt.engine.checkpointer)
        timed = TimedTelemetry(rt.deps.telemetry, now=rt.clock.now)
        rt.deps = rt.engine.deps = replace(rt.deps, telemetry=timed)
        server = RunningServer(create_app(settings, rt)).start()
        stack.callback(server.stop)
        yield rt, server, timed


@contextmanager
def exporter_process(nodes: int) -> Iterator[str]:
    """The same fleet's series from another process (as dcgm-exporter is), so rendering them
    for Prometheus never competes with the measured runs for the interpreter."""
    port = free_port()
    command = [sys.executable, __file__, "--serve-exporter", str(port), "--sizes", str(nodes)]
    child = subprocess.Popen(command)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while not _answers(url):
            if time.monotonic() > deadline or child.poll() is not None:
                raise RuntimeError(f"exporter for {nodes} nodes did not start")
            time.sleep(0.2)
        yield url
    finally:
        child.terminate()
        child.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=30).status_code == 200
    except httpx.TransportError:
        return False


def serve_exporter(port: int, nodes: int) -> None:
    """Child process: the benchmark fleet's ecc-storm series on /metrics."""
    fleet = Fleet.from_scenario(ecc_fleet(nodes), now=SystemClock().now)
    app = EccSeriesApp(fleet)
    make_server(
        "127.0.0.1", port, app, server_class=ThreadingWSGIServer, handler_class=QuietHandler
    ).serve_forever()


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """The exporter's scrape server: one thread per scrape."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every 5 s is not news."""


def measure(nodes: int, mode: str, runs: int, *, sync: str) -> dict[str, Any]:
    latencies, queries, telemetry, overhead, ratios, cpu = [], [], [], [], [], []
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    with (
        tempfile.TemporaryDirectory() as tmp,
        serving(nodes, mode, Path(tmp), sync=sync) as (rt, server, timed),
    ):
        http = httpx.Client(base_url=server.url, timeout=60.0)
        for index in range(runs + 1):  # the first run warms caches and is not counted
            posted, cpu_before = rt.clock.now(), time.process_time()
            reply = http.post("/alerts", json=webhook(rt, nodes, status="firing", index=index))
            incident_id = int(reply.json()["incidents"][0].removeprefix("INC-"))
            assert server.app.workers.wait_idle(120)
            stopped, cpu_after = rt.clock.now(), time.process_time()
            with session_scope(rt.db) as session:
                incident = incident_store.get_incident(session, incident_id)
                run = run_store.latest_run_for_incident(session, incident_id)
            assert incident is not None and incident.diagnosed_at and incident.detected_at, mode
            assert run is not None and run.status == "awaiting_approval", run
            http.post("/alerts", json=webhook(rt, nodes, status="resolved", index=index))
            if index == 0:
                continue
            received, diagnosed = incident.detected_at, incident.diagnosed_at
            latency = (diagnosed - received).total_seconds()
            reads = timed.busy_seconds(received, diagnosed)
            latencies.append(latency)
            cpu.append(cpu_after - cpu_before)
            queries.append(timed.queries(posted, stopped))
            telemetry.append(reads)
            overhead.append(latency - reads)
            ratios.append((latency - reads) / reads if reads else float("inf"))
            first, last = timed.span(received, diagnosed)
            marks = (received, run.started_at, first, last, diagnosed)
            for name, start, end in zip(PHASES, marks, marks[1:], strict=False):
                phases[name].append((end - start).total_seconds())
    return {
        "nodes": nodes,
        "mode": mode,
        "sqlite_synchronous": sync,
        "runs": runs,
        "p50_ms": _ms(percentile(latencies, 0.5)),
        "p99_ms": _ms(percentile(latencies, 0.99)),
        "max_ms": _ms(max(latencies)),
        "queries_per_run": sorted(set(queries)),
        "telemetry_p50_ms": _ms(percentile(telemetry, 0.5)),
        "overhead_p50_ms": _ms(percentile(overhead, 0.5)),
        "outside_telemetry_share": round(sum(overhead) / sum(latencies), 3),
        "overhead_per_telemetry_p50": round(percentile(ratios, 0.5), 2),
        "phases_p50_ms": {name: _ms(percentile(v, 0.5)) for name, v in phases.items()},
        "cpu_per_run_p50_ms": _ms(percentile(cpu, 0.5)),
    }


PHASES = ("intake", "run_setup", "reads", "after_reads")


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512, 1024])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--mode", choices=["inprocess", "prometheus", "both"], default="both")
    parser.add_argument(
        "--sqlite-sync",
        choices=["full", "normal"],
        default="full",
        help="SQLite synchronous pragma (the bot's default is full: every commit is fsynced)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--serve-exporter", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_exporter:
        serve_exporter(args.serve_exporter, args.sizes[0])
        return
    modes = ["inprocess", "prometheus"] if args.mode == "both" else [args.mode]
    results = [measure(n, m, args.runs, sync=args.sqlite_sync) for m in modes for n in args.sizes]
    header = ("mode", "nodes", "p50 ms", "p99 ms", "max ms", "queries", "telem ms", "ovh ms")
    print(
        f"{header[0]:<11} "
        + " ".join(f"{h:>8}" for h in header[1:])
        + "  outside telemetry  overhead/telemetry"
    )
    for r in results:
        print(
            f"{r['mode']:<11} {r['nodes']:>8} {r['p50_ms']:>8} {r['p99_ms']:>8} {r['max_ms']:>8} "
            f"{','.join(map(str, r['queries_per_run'])):>8} {r['telemetry_p50_ms']:>8} "
            f"{r['overhead_p50_ms']:>8}  {r['outside_telemetry_share']:>17.0%}  "
            f"{r['overhead_per_telemetry_p50']:>18}"
        )
    print("\nwhere the window goes (p50 ms): " + ", ".join(PHASES) + "; process CPU per run")
    for r in results:
        phases = " ".join(f"{v:>11}" for v in r["phases_p50_ms"].values())
        print(f"{r['mode']:<11} {r['nodes']:>8} {phases} {r['cpu_per_run_p50_ms']:>11}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
