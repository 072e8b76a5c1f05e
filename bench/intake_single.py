"""A single alert's intake: the bot's CPU per firing and per resolved one-alert webhook, and the
p50 latency of the 200, for this tree and another (`--before`), interleaved in one run.

Each round starts one bot per tree together (child processes, each over a fresh SQLite database
and the benchmark fleet, `--nodes` nodes) and POSTs `--cycles` times one `GPUEccStorm` alert
firing for the faulty node, then the same alert resolved (triage_latency.py's webhooks), to
each bot in turn: the trees share the machine's load webhook by webhook. The triage
runs the firing webhooks record are counted, not executed, so the figures are intake alone:
parse, screen, store, group or open, record the triage work, commit, answer (and, for the
resolved one, resolve the incident). Between webhooks the bot's clock moves `--spacing`
seconds (an alert that flaps every minute: the storm window holds its last few firings, not
every one the bench sent).

Figures per webhook kind, medians over the cycles after `--warmup`:
- `handler_cpu_ms`: CPU of the thread that handles the webhook, from the body to the answer
  (`WebhookIntake.receive`, measured in the bot with `time.thread_time`);
- `process_cpu_ms`: CPU of the whole bot process over the request (every thread, from
  /proc/<pid>/task/*/schedstat in nanoseconds: the HTTP server's, and what the webhook queues);
- `latency_ms`: wall time of the POST to its 200, seen by the sender (the machine's load shows
  here first; compare CPU).

    git archive main bot storage integrations simulator runbooks | tar -x -C /tmp/before
    python bench/intake_single.py --before /tmp/before --cycles 200 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from common import FAULTY, ecc_fleet, machine, node, wait_serving
from servers.prometheus import free_port

KINDS = ("firing", "resolved")


def webhook(status: str, *, starts: datetime, ends: datetime | None, nodes: int) -> bytes:
    """One GPUEccStorm alert for the faulty node, as Alertmanager sends it."""
    labels = {"alertname": "GPUEccStorm", "severity": "critical", "Hostname": node(FAULTY, nodes)}
    alert = {
        "status": status,
        "labels": labels,
        "startsAt": starts.isoformat(),
        "endsAt": ends.isoformat() if ends else "0001-01-01T00:00:00Z",
        "fingerprint": f"bench-{nodes}",
    }
    body = {"version": "4", "groupKey": "bench", "status": status, "receiver": "gpu-oncall",
            "alerts": [alert]}  # fmt: skip
    return json.dumps(body).encode()


# -- the bot (child process) -----------------------------------------------------------------


def serve(port: int, nodes: int, spacing: float) -> None:
    """Child process: one bot on `port`, its triage runs counted, its handler's CPU per webhook
    kind served at /bench/cpu (JSON lists of milliseconds)."""
    from bot.config import ServerSettings, Settings, StorageSettings
    from bot.serving.app import RunningServer, create_app
    from bot.wiring.runtime import open_runtime
    from bot.work.dispatching import TriageWorkers

    class CountingWorkers(TriageWorkers):
        def submit_run(self, received: Any) -> bool:
            return True  # recorded in the webhook's transaction; not run (intake alone)

    handled: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            storage=StorageSettings(url=f"sqlite:///{Path(tmp) / 'oncall.db'}"),
            server=ServerSettings(workers=1),
        )
        with open_runtime(settings, scenario=ecc_fleet(nodes), fresh=True) as rt:
            app = create_app(settings, rt)
            app.workers.shutdown()
            app.workers = app.webhooks.queue = CountingWorkers(
                rt.engine, db=rt.db, catalog=rt.catalog, clock=rt.clock,
                silences=rt.deps.silences, workers=1, queue_limit=1, counters=app.counters,
            )  # fmt: skip
            intake = app.webhooks
            receive = intake.receive
            clock: Any = rt.clock

            def timed(body: bytes) -> Any:
                clock.advance(timedelta(seconds=spacing))
                started = time.thread_time()
                answer = receive(body)
                spent = (time.thread_time() - started) * 1000
                handled["resolved" if b'"status": "resolved"' in body else "firing"].append(spent)
                return answer

            intake.receive = timed  # type: ignore[method-assign]
            app.mount("/bench/cpu", lambda _env, start: _json_wsgi(start, handled))
            RunningServer(app, port=port).serve()


def _json_wsgi(start_response: Any, value: Any) -> list[bytes]:
    body = json.dumps(value).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


# -- the sender (parent) ---------------------------------------------------------------------


def process_cpu_ns(pid: int) -> int:
    """CPU of every thread of a process so far, in nanoseconds (Linux schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total


@contextmanager
def bot(tree: Path | None, nodes: int, spacing: float) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    command = [sys.executable, __file__, "--serve", str(port), "--nodes", str(nodes),
               "--spacing", str(spacing)]  # fmt: skip
    child = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_serving(url, child, what=f"the bot of {tree or 'this tree'}", seconds=120)
        yield url, child.pid
    finally:
        child.terminate()
        child.wait(timeout=60)


@dataclass
class Bot:
    """One bot under measurement and what the sender saw of it."""

    name: str
    url: str
    pid: int
    http: httpx.Client
    process: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    latency: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    codes: set[int] = field(default_factory=set)

    def post(self, kind: str, body: bytes, *, settle: float) -> None:
        cpu = process_cpu_ns(self.pid)
        sent = time.perf_counter()
        reply = self.http.post("/alerts", content=body, headers=_JSON)
        self.latency[kind].append((time.perf_counter() - sent) * 1000)
        self.codes.add(reply.status_code)
        time.sleep(settle / 1000)  # what the webhook queued runs, and is counted
        self.process[kind].append((process_cpu_ns(self.pid) - cpu) / 1e6)

    def figures(self, skip: int) -> dict[str, Any]:
        if self.codes != {200}:
            raise RuntimeError(f"{self.name}: answers other than 200: {sorted(self.codes)}")
        handler = self.http.get("/bench/cpu").json()
        return {
            kind: {
                "handler_cpu_ms": _median(handler[kind][skip:]),
                "process_cpu_ms": _median(self.process[kind][skip:]),
                "latency_p50_ms": _median(self.latency[kind][skip:]),
            }
            for kind in KINDS
        }


_JSON = {"content-type": "application/json"}


def measure(trees: list[tuple[str, Path | None]], args: argparse.Namespace) -> list[Any]:
    """One bot per tree, all started together; each cycle goes to every bot in turn (the
    first one alternating), so the trees share the machine's load webhook by webhook."""
    with ExitStack() as stack:
        bots = []
        for name, tree in trees:
            url, pid = stack.enter_context(bot(tree, args.nodes, args.spacing))
            http = stack.enter_context(httpx.Client(base_url=url))
            bots.append(Bot(name, url, pid, http))
        origin = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
        for cycle in range(args.cycles):
            starts = origin + timedelta(seconds=cycle)
            for one in bots if cycle % 2 == 0 else bots[::-1]:
                for kind in KINDS:
                    ends = starts + timedelta(seconds=30) if kind == "resolved" else None
                    body = webhook(kind, starts=starts, ends=ends, nodes=args.nodes)
                    one.post(kind, body, settle=args.settle)
        return [(one.name, one.figures(args.warmup)) for one in bots]


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another tree (git archive) to compare")
    parser.add_argument("--cycles", type=int, default=200, help="firing+resolved pairs per bot")
    parser.add_argument("--rounds", type=int, default=3, help="bots per tree, one after another")
    parser.add_argument("--warmup", type=int, default=10, help="first cycles not counted")
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--spacing", type=float, default=30.0,
                        help="seconds the bot's clock moves between webhooks")  # fmt: skip
    parser.add_argument("--settle", type=float, default=5.0,
                        help="ms to wait after an answer before reading the CPU")  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.nodes, args.spacing)
        return
    if args.cycles <= args.warmup:
        parser.error(f"--cycles ({args.cycles}) must be more than --warmup ({args.warmup})")
    trees: list[tuple[str, Path | None]] = [("after", None)]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve()))
    results = []
    for index in range(args.rounds):
        load = round(os.getloadavg()[0], 2)
        for name, figures in measure(trees, args):
            result = {"round": index + 1, "tree": name, "load_1m": load, **figures}
            print(json.dumps(result), flush=True)
            results.append(result)
    if args.json:
        report = {"machine": machine(), "args": vars(args) | {"before": str(args.before)}}
        args.json.write_text(json.dumps(report | {"results": results}, indent=2, default=str))


if __name__ == "__main__":
    main()
