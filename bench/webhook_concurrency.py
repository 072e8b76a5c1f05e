"""Webhook latency and throughput under many concurrent connections: the production server
(uvicorn, `bot.serving.app.RunningServer`) and, in the same run, the old stdlib server (wsgiref,
one thread per request, listen backlog 5, HTTP/1.0) over the very same routes.

The bot runs in a child process over a fresh SQLite database; this process opens
`--connections` connections at once (asyncio + httpx) and posts `--requests` webhooks through
them (each connection is opened with a `GET /healthz` before the clock starts, as
Alertmanager's keep-alive client holds its connections), each webhook carrying one new alert
that no runbook takes (stored, deduplicated, answered; no triage run competes for the CPU).
The old server speaks HTTP/1.0 and closes every connection, so its clients reconnect each time.
Reported per server: p50/p99 webhook latency, webhooks/s, and transport errors (connection
resets, refused connections) by kind.

    python bench/webhook_concurrency.py --connections 200 --requests 4000 --servers new old
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
from common import ecc_fleet, machine, percentile
from servers.prometheus import free_port

from bot.config import ServerSettings, Settings, StorageSettings
from bot.serving.app import OncallApp, RunningServer, create_app
from bot.serving.exchange import Head, Reply, Request
from bot.wiring.runtime import open_runtime


# -- the child process: one server over a fresh database ---------------------------------------
class OldThreadingServer(ThreadingMixIn, WSGIServer):
    """The stdlib server the bot used before (request_queue_size stays at its default, 5)."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Thousands of requests are not news."""


def wsgi_over(app: OncallApp) -> Any:
    """The bot's routes as the WSGI app the old server ran."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        headers = {
            k[5:].replace("_", "-").lower(): str(v)
            for k, v in environ.items()
            if k.startswith("HTTP_")
        }
        headers["content-length"] = str(environ.get("CONTENT_LENGTH") or "")
        head = Head(str(environ["REQUEST_METHOD"]), str(environ["PATH_INFO"]), "", headers)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        if head.path == "/alerts":
            reply = app.alerts(Request(head, body))
        else:  # the warm-up GET /healthz
            reply = Reply.json(200, {"status": "ok"})
        start_response(
            reply.status_line,
            [("Content-Type", reply.content_type), ("Content-Length", str(len(reply.body)))],
        )
        return [reply.body]

    return wsgi


def serve_child(server: str, port: int, db_url: str, concurrency: int, keepalive: float) -> None:
    settings = Settings(
        storage=StorageSettings(url=db_url),
        server=ServerSettings(workers=1, max_concurrency=concurrency, keepalive_seconds=keepalive),
    )
    with open_runtime(settings, scenario=ecc_fleet(16), fresh=True) as rt:
        app = create_app(settings, rt)
        if server == "new":
            RunningServer(app, port=port).serve()
        else:
            make_server(
                "127.0.0.1", port, wsgi_over(app),
                server_class=OldThreadingServer, handler_class=QuietHandler,
            ).serve_forever()  # fmt: skip


@contextmanager
def child(server: str, concurrency: int, keepalive: float) -> Iterator[str]:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'oncall.db'}"
        process = subprocess.Popen(
            [sys.executable, __file__, "--serve-child", server, str(port), db_url,
             str(concurrency), str(keepalive)]  # fmt: skip
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while not _healthy(url):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"the {server} server did not start")
                time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=60)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


# -- the load ------------------------------------------------------------------------------------
def webhook(index: int, starts: datetime) -> bytes:
    labels = {"alertname": "BenchWebhook", "severity": "warning", "instance": f"host-{index}"}
    alert = {
        "status": "firing",
        "labels": labels,
        "annotations": {"summary": "webhook benchmark"},
        "startsAt": starts.isoformat(),
        "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": f"{index:016x}",
    }
    body = {"version": "4", "groupKey": f"g{index}", "status": "firing",
            "receiver": "gpu-oncall", "alerts": [alert]}  # fmt: skip
    return json.dumps(body).encode()


async def load(url: str, *, connections: int, requests: int) -> dict[str, Any]:
    starts = datetime.now(UTC) - timedelta(minutes=5)
    bodies = [webhook(i, starts) for i in range(requests)]
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    warmup_errors: Counter[str] = Counter()
    next_index = iter(range(requests))
    headers = {"Content-Type": "application/json"}
    # One client of one connection per sender: httpx's shared pool costs grow with its size
    # and would measure the client, not the server.
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)

    warm = 0
    go = asyncio.Event()

    async def sender() -> None:
        nonlocal warm
        async with httpx.AsyncClient(base_url=url, limits=one, timeout=120) as client:
            try:  # the connection is open before the clock starts
                await client.get("/healthz")
            except httpx.TransportError as exc:  # not counted: the clock has not started
                warmup_errors[type(exc).__name__] += 1
            warm += 1
            if warm == connections:
                go.set()
            await go.wait()
            for index in next_index:
                began = time.perf_counter()
                try:
                    response = await client.post("/alerts", content=bodies[index], headers=headers)
                except httpx.TransportError as exc:
                    errors[type(exc).__name__] += 1
                    continue
                latencies.append(time.perf_counter() - began)
                statuses[response.status_code] += 1

    senders = [asyncio.create_task(sender()) for _ in range(connections)]
    await go.wait()
    began = time.perf_counter()
    await asyncio.gather(*senders)
    wall = time.perf_counter() - began
    ok = statuses.get(200, 0)
    return {
        "requests": requests,
        "connections": connections,
        "ok": ok,
        "statuses": dict(statuses),
        "transport_errors": dict(errors),
        "warmup_transport_errors": dict(warmup_errors),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 1) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1) if latencies else None,
        "max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        "webhooks_per_s": round(ok / wall, 1),
        "wall_s": round(wall, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--servers", nargs="+", choices=["new", "old"], default=["new", "old"])
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--max-concurrency", type=int, default=ServerSettings().max_concurrency,
        help="the new server's handler pool (GPU_ONCALL_SERVER__MAX_CONCURRENCY)",
    )  # fmt: skip
    parser.add_argument(
        "--keepalive", type=float, default=ServerSettings().keepalive_seconds,
        help="the new server's idle keep-alive (GPU_ONCALL_SERVER__KEEPALIVE_SECONDS)",
    )  # fmt: skip
    parser.add_argument("--serve-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_child:
        server, port, db_url, concurrency, keepalive = args.serve_child
        serve_child(server, int(port), db_url, int(concurrency), float(keepalive))
        return
    results: dict[str, Any] = {"machine": machine()}
    for server in args.servers:
        with child(server, args.max_concurrency, args.keepalive) as url:
            results[server] = asyncio.run(
                load(url, connections=args.connections, requests=args.requests)
            )
        print(server, json.dumps(results[server]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
