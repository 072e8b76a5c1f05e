"""Shared pieces of the benchmarks: fleets of any size, a timing Telemetry wrapper, statistics,
the machine description, and the real-server helpers of tests/servers (Debian's prometheus).

Benchmarks are scripts, not tests: `python bench/<name>.py --help`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The real-server fixtures (servers.prometheus), after the tree itself: `tests/simulator` (the
# simulator's tests, no __init__) must not shadow the `simulator` package as a namespace, and a
# tree given in PYTHONPATH (a "before" measured with this bench) still comes first.
sys.path += [str(ROOT), str(ROOT / "tests")]

from integrations.telemetry import SeriesPoints, SignalQuery, SignalResult, Telemetry  # noqa: E402
from simulator.scenarios import Scenario, parse_scenario  # noqa: E402
from simulator.topology import NODE_PREFIX, node_name_width  # noqa: E402

FAULTY = 3
"""Index of the node with the ECC storm in every benchmark fleet."""


def node(index: int, nodes: int) -> str:
    return f"{NODE_PREFIX}{index:0{node_name_width(nodes)}d}"


def ecc_fleet(nodes: int) -> Scenario:
    """An H100 fleet of `nodes` nodes: a training job on the first 8, inference on two more,
    double-bit ECC errors on GPU 5 of node 3 since 10 minutes ago (the demo's fault)."""
    return parse_scenario(
        {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Scenario",
            "metadata": {"name": f"bench-ecc-{nodes}"},
            "fleet": {
                "nodes": nodes,
                "gpus_per_node": 8,
                "hcas_per_node": 8,
                "dcgm_counters": "all",
                "workloads": [
                    {"kind": "training", "name": "llm-pretrain", "nodes": _range(0, 7, nodes)},
                    {"kind": "inference", "name": "vllm-chat", "nodes": _range(12, 13, nodes)},
                ],
            },
            "faults": [
                {"kind": "ecc_dbe_storm", "node": node(FAULTY, nodes), "gpu": 5, "start": "-10m"}
            ],
            "trigger": {
                "alert": {"alertname": "GPUEccStorm", "labels": {"Hostname": node(FAULTY, nodes)}}
            },
        },
        source=f"bench fleet of {nodes} nodes",
    )


def _range(lo: int, hi: int, nodes: int) -> str:
    width = node_name_width(nodes)
    return f"{NODE_PREFIX}[{lo:0{width}d}-{hi:0{width}d}]"


@dataclass
class TimedTelemetry:
    """Wraps a Telemetry adapter and records when each read ran, on the bot's clock (`now`), so
    reads can be set against the incident's own timestamps. Runs are measured one at a time, so
    every read recorded during a run belongs to it."""

    inner: Telemetry
    now: Callable[[], datetime]
    intervals: list[tuple[datetime, datetime, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, query: SignalQuery) -> SignalResult:
        start = self.now()
        queries = 0
        try:
            result = self.inner.read(query)
            queries = result.queries
            return result
        finally:
            with self._lock:
                self.intervals.append((start, self.now(), queries))

    def read_range(
        self, query: SignalQuery, *, start: datetime, end: datetime, step: timedelta
    ) -> list[SeriesPoints]:
        """Range reads (the postmortem's evidence snapshot) pass through unmeasured."""
        return self.inner.read_range(query, start=start, end=end, step=step)

    def queries(self, since: datetime, until: datetime) -> int:
        """Backend queries of the reads that started in [since, until]."""
        with self._lock:
            return sum(q for a, _b, q in self.intervals if since <= a <= until)

    def span(self, since: datetime, until: datetime) -> tuple[datetime, datetime]:
        """The first read's start and the last read's end among the reads within [since, until]
        (a window with no read gives (until, until))."""
        with self._lock:
            inside = [(a, b) for a, b, _q in self.intervals if since <= a and b <= until]
        if not inside:
            return until, until
        return min(a for a, _b in inside), max(b for _a, b in inside)

    def busy_seconds(self, since: datetime, until: datetime) -> float:
        """Time within [since, until] when at least one read was in flight: the union of the
        reads' intervals (a runbook's reads run concurrently; overlapping reads count once)."""
        with self._lock:
            spans = sorted(
                (max(a, since), min(b, until))
                for a, b, _q in self.intervals
                if b > since and a < until
            )
        total, end = 0.0, since
        for a, b in spans:
            if b <= end:
                continue
            total += (b - max(a, end)).total_seconds()
            end = b
        return total


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(sorted(values), n=1000, method="inclusive")[round(q * 1000) - 1]


def time_calls(
    call: Callable[[int], Any], runs: int, counters: dict[str, Callable[[], int]]
) -> dict[str, float]:
    """p50/p99 milliseconds of `call(i)` over `runs` runs after two untimed warm-up calls (which
    also make an idempotent repeat idempotent from the start), and per counter (e.g. HTTP
    requests, processes started) the mean it grew per run."""
    call(0)
    call(1)
    latencies, before = [], {name: count() for name, count in counters.items()}
    for i in range(runs):
        start = time.perf_counter()
        call(i)
        latencies.append((time.perf_counter() - start) * 1000)
    return {
        "p50_ms": round(percentile(latencies, 0.50), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
    } | {name: round((count() - before[name]) / runs, 2) for name, count in counters.items()}


def print_calls(rows: dict[str, dict[str, float]], counters: dict[str, str]) -> None:
    """The table of `time_calls` rows: call, p50, p99, then one column per counter (key ->
    heading)."""
    width = max([24, *(len(name) for name in rows)])
    print(f"{'call':<{width}} {'p50 ms':>8} {'p99 ms':>8} "
          + " ".join(f"{h:>{max(6, len(h))}}" for h in counters.values()))  # fmt: skip
    for name, row in rows.items():
        counts = " ".join(f"{row[k]:>{max(6, len(h))}.2f}" for k, h in counters.items())
        print(f"{name:<{width}} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {counts}")


def cpu_seconds(pid: int | str = "self", *, children: bool = False) -> float:
    """User plus system CPU time of a process, from /proc; with `children`, that of its
    waited-for children too (a PostgreSQL server's backends that exited)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    mem = 0.0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        first = meminfo.read_text().splitlines()[0].split()
        mem = round(int(first[1]) / (1024 * 1024), 1)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "memory_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def relax_sqlite_sync(db: Any, checkpointer: Any) -> None:
    """`PRAGMA synchronous=NORMAL` on the bot's SQLite database and checkpoint file (WAL stays
    consistent; the last commits may be lost on power failure, not on a crash). Benchmark
    option only, to show how much of a run is fsync."""
    from sqlalchemy import event

    event.listen(db, "connect", lambda conn, _record: conn.execute("PRAGMA synchronous=NORMAL"))
    db.dispose()
    checkpointer.conn.execute("PRAGMA synchronous=NORMAL")


def run_sizes(
    args: argparse.Namespace, run: Callable[[int, argparse.Namespace], dict[str, Any]]
) -> list[dict[str, Any]]:
    """`run(size, args)` for each of `args.sizes`, printing each result as a JSON line as it
    comes; with `args.json`, the machine and all results are also written there."""
    results = []
    for size in args.sizes:
        results.append(run(size, args))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))
    return results


def wait_serving(url: str, child: subprocess.Popen[bytes], *, what: str, seconds: float) -> None:
    """Wait (bounded) until a bot started as `child` answers `/healthz` at `url`; RuntimeError
    naming `what` when it exits or does not answer within `seconds`."""
    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or child.poll() is not None:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.2)
