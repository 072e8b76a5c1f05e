"""Hostile load against `serve` (issue 20): slow connections plus a steady webhook stream, on
loopback, bounded in time. Reports the server's peak RSS, its RSS after the burst, webhook
p50/p99 latency, the error rate, and whether every webhook answered 200 was stored.

The bot runs in a child process over a fresh SQLite database (a simulated 16-node fleet; the
webhooks carry alerts no runbook takes, so no triage run competes for the CPU). This process
opens `--slow` connections that each declare a 9.9 MB body on a route that takes none or
needs authentication (`/healthz`, `/slack/events`, `/incidents`, `POST /alerts` without the
token) and drip it 16 KiB a second, reconnecting when cut off, while `--rate` webhooks/s are
posted with the token for `--seconds`, over 100 keep-alive connections, each its own
single-connection client (one httpx pool of 100 made the generator, not the server, set the
latency: see docs/performance.md). The slow connections come from a second load process, the
webhooks and the RSS sampling from this one. The report includes the generator's own event-loop
lag and CPU time, the server's CPU time, and the machine's TCP counters (listen-queue overflows,
retransmissions) during the webhooks. RSS is sampled every 0.5 s from /proc; after the burst,
the time until RSS is back to 1.2x idle is reported, and the load average before and after
(the load generator shares the machine's cores with `serve`: its own scheduling delay is in
the latencies).

    python bench/serve_load.py --slow 500 --rate 200 --seconds 60 --settle 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from common import cpu_seconds, ecc_fleet, machine, percentile
from servers.prometheus import free_port

TOKEN = "bench-token"
DECLARED = 9_900_000
ROUTES = ("GET /healthz", "POST /slack/events", "GET /incidents", "POST /alerts")
GOAL_AFTER_OVER_IDLE = 1.2
"""Goal: RSS back to at most this times the idle figure within `--settle` seconds."""


def serve_child(port: int, db_url: str) -> None:
    from pydantic import SecretStr

    from bot.config import ServerSettings, Settings, StorageSettings
    from bot.serving.app import RunningServer, create_app
    from bot.wiring.runtime import open_runtime

    settings = Settings(
        storage=StorageSettings(url=db_url),
        server=ServerSettings(token=SecretStr(TOKEN), workers=1),
    )
    with open_runtime(settings, scenario=ecc_fleet(16), fresh=True) as rt:
        RunningServer(create_app(settings, rt), port=port).serve()


@contextmanager
def child() -> Iterator[tuple[str, int, Path]]:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "oncall.db"
        process = subprocess.Popen(
            [sys.executable, __file__, "--serve-child", str(port), f"sqlite:///{db}"]
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while not _healthy(url):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the server did not start")
                time.sleep(0.2)
            yield url, process.pid, db
        finally:
            process.terminate()
            process.wait(timeout=60)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def webhook(index: int, starts: datetime) -> bytes:
    labels = {"alertname": "BenchLoad", "severity": "warning", "instance": f"host-{index}"}
    alert = {"status": "firing", "labels": labels, "startsAt": starts.isoformat(),
             "fingerprint": f"{index:016x}"}  # fmt: skip
    body = {"version": "4", "groupKey": f"g{index}", "status": "firing",
            "receiver": "gpu-oncall", "alerts": [alert]}  # fmt: skip
    return json.dumps(body).encode()


CONNECTIONS = 100
"""Webhook connections the generator keeps open (Alertmanager keeps a few per receiver)."""
args_pause = 5.0
"""Seconds a slow client waits before it reconnects (one load-generating process must keep up)."""


async def slow_client(port: int, stop: asyncio.Event, cut: Counter[str]) -> None:
    """Declare a 9.9 MB body, drip it 16 KiB a second, reconnect a few seconds after the
    server answers or closes."""
    chunk = b" " * 16384
    while not stop.is_set():
        method, path = random.choice(ROUTES).split()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            cut[f"connect {type(exc).__name__}"] += 1
            await asyncio.sleep(0.5)
            continue
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {DECLARED}\r\n\r\n"
        try:
            writer.write(head.encode())
            sent = 0
            while sent < DECLARED and not stop.is_set():
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), 5)
                sent += len(chunk)
                if reader.at_eof() or len(reader._buffer):  # type: ignore[attr-defined]
                    break  # answered before the body: refused unread
                await asyncio.sleep(1.0)
            status = (await asyncio.wait_for(reader.read(64), 5)).split(b" ", 2)[1:2]
            cut[status[0].decode() if status else "closed"] += 1
        except (OSError, TimeoutError, IndexError):
            cut["closed"] += 1
        finally:
            writer.close()
        await asyncio.sleep(args_pause)


def slow_child(port: int, count: int, seconds: float) -> None:
    """The slow connections for `seconds`, then their answers as JSON on stdout."""

    async def drive() -> dict[str, int]:
        stop, cut = asyncio.Event(), Counter[str]()
        clients = [asyncio.create_task(slow_client(port, stop, cut)) for _ in range(count)]
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.wait(clients, timeout=15)
        return dict(cut)

    print(json.dumps(asyncio.run(drive())), flush=True)


async def webhooks(url: str, *, rate: int, seconds: float, one_pool: bool) -> dict[str, Any]:
    """Post `rate` webhooks/s for `seconds` over CONNECTIONS keep-alive connections. A request
    due while every connection is busy waits for one (`waited_for_a_connection`, not in the
    latency). Each connection is its own single-connection httpx client (`one_pool`: one
    client with a pool of CONNECTIONS, the generator before 2026-11-26 20:55 UTC)."""
    starts = datetime.now(UTC) - timedelta(minutes=5)
    latencies: list[float] = []
    waits: list[float] = []
    statuses: Counter[str] = Counter()
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    due: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
    tls = ssl.create_default_context()  # once: httpx would load the CA bundle per client
    shared = httpx.AsyncClient(base_url=url, limits=_pool(CONNECTIONS), timeout=30, verify=tls)

    async def sender() -> None:
        own = shared if one_pool else httpx.AsyncClient(
            base_url=url, limits=_pool(1), timeout=30, verify=tls)  # fmt: skip
        while (item := await due.get()) is not None:
            index, at = item
            began = time.perf_counter()
            waits.append(began - at)
            try:
                response = await own.post("/alerts", content=webhook(index, starts),
                                           headers=headers)  # fmt: skip
                statuses[str(response.status_code)] += 1
            except httpx.TransportError as exc:
                statuses[type(exc).__name__] += 1
                continue
            latencies.append(time.perf_counter() - began)
        if own is not shared:
            await own.aclose()

    lag = LoopLag()
    watch = asyncio.create_task(lag.watch())
    senders = [asyncio.create_task(sender()) for _ in range(CONNECTIONS)]
    began = time.perf_counter()
    for index in range(int(rate * seconds)):
        delay = began + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        due.put_nowait((index, time.perf_counter()))
    for _ in senders:
        due.put_nowait(None)
    await asyncio.gather(*senders)
    await shared.aclose()
    watch.cancel()
    sent = int(rate * seconds)
    return {
        "sent": sent,
        "statuses": dict(statuses),
        "error_rate": round(1 - statuses.get("200", 0) / sent, 4),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "waited_for_a_connection_p99_ms": round(percentile(waits, 0.99) * 1000, 1),
        "generator_loop_lag_p99_ms": round(percentile(lag.samples, 0.99) * 1000, 1),
    }


def _pool(connections: int) -> httpx.Limits:
    return httpx.Limits(max_connections=connections, max_keepalive_connections=connections)


class LoopLag:
    """How late the generator's own event loop wakes a 10 ms sleep: when it is hundreds of
    ms, the generator (not the server) sets the latency."""

    TICK = 0.01

    def __init__(self) -> None:
        self.samples: list[float] = [0.0]

    async def watch(self) -> None:
        while True:
            began = time.perf_counter()
            await asyncio.sleep(self.TICK)
            self.samples.append(time.perf_counter() - began - self.TICK)


TCP_COUNTERS = ("ListenOverflows", "ListenDrops", "TCPBacklogDrop", "RetransSegs")


def tcp_counters() -> dict[str, int]:
    """Machine-wide TCP counters (/proc/net/netstat and snmp): a full accept queue shows as
    ListenOverflows/ListenDrops, lost segments as RetransSegs."""
    found: dict[str, int] = {}
    for table in ("/proc/net/netstat", "/proc/net/snmp"):
        lines = Path(table).read_text().splitlines()
        for names, values in zip(lines[::2], lines[1::2], strict=False):
            for name, value in zip(names.split()[1:], values.split()[1:], strict=False):
                if name in TCP_COUNTERS:
                    found[name] = int(value)
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = Path("/proc/loadavg").read_text().split()[:3]  # the machine is shared
    with child() as (url, pid, db):
        port = int(url.rsplit(":", 1)[1])
        await asyncio.sleep(2)
        idle = rss_mb(pid)
        samples: list[float] = []
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                samples.append(rss_mb(pid))
                if len(samples) % 10 == 0:  # progress on stderr every 5 s
                    print(f"{len(samples) / 2:.0f}s rss={samples[-1]:.0f}MB",
                          file=sys.stderr, flush=True)
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        slow = subprocess.Popen(
            [sys.executable, __file__, "--slow-child", str(port), str(args.slow),
             str(args.seconds)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        await asyncio.sleep(min(5.0, args.seconds / 4))  # the slow connections open first
        tcp_before, cpu_before = tcp_counters(), (cpu_seconds(), cpu_seconds(pid))
        hooks = await webhooks(url, rate=args.rate, seconds=args.seconds, one_pool=args.one_pool)
        tcp = {name: count - tcp_before.get(name, 0) for name, count in tcp_counters().items()}
        cpu = {"generator": round(cpu_seconds() - cpu_before[0], 1),
               "server": round(cpu_seconds(pid) - cpu_before[1], 1)}  # fmt: skip
        out, _ = await asyncio.to_thread(slow.communicate, timeout=120)
        cut = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"no report": 1}
        stop.set()
        await asyncio.wait([sampler], timeout=5)
        burst_end = time.monotonic()
        after = [rss_mb(pid)]
        settled_at: float | None = None
        for _ in range(int(args.settle * 2)):
            await asyncio.sleep(0.5)
            after.append(rss_mb(pid))
            if settled_at is None and after[-1] <= GOAL_AFTER_OVER_IDLE * idle:
                settled_at = time.monotonic() - burst_end
        stored = sqlite3.connect(db).execute("SELECT count(*) FROM received_alerts").fetchone()[0]
    return {
        "machine": machine(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "slow_connections": args.slow,
        "rate": args.rate,
        "seconds": args.seconds,
        "idle_rss_mb": round(idle, 1),
        "peak_rss_mb": round(max(samples + after), 1),
        "rss_after_settle_mb": round(after[-1], 1),
        "after_over_idle": round(after[-1] / idle, 2),
        "back_to_goal_within_s": None if settled_at is None else round(settled_at, 1),
        "load_before": load_before,
        "load_after": Path("/proc/loadavg").read_text().split()[:3],
        "slow_requests_answered": cut,
        "webhooks": hooks,
        "cpu_seconds_during_webhooks": cpu,
        "tcp_counters_during_webhooks": tcp,
        "stored_alerts": stored,
        "lost": hooks["statuses"].get("200", 0) - stored,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-child":
        serve_child(int(sys.argv[2]), sys.argv[3])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--slow-child":
        slow_child(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, default=500)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=30.0)
    parser.add_argument(
        "--one-pool", action="store_true", help="the old generator: one httpx pool for all"
    )
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
