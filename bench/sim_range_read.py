"""The evidence snapshot's read on the simulated telemetry: CPU per `SimTelemetry.read_range`.

When a run localizes, the bot reads the cited signal for the culprit and three peer nodes over
`window_for`'s span and step (bot/engine/snapshotting.py): here `gpu.ecc.dbe_rate` (a rate over
the ecc-storm runbook's 15-minute window) for node 3 (its DBE storm on GPU 5) and nodes 0-2,
from 10 minutes before the alert fired to now, ~120 points. In-process benches charge this
read to the bot's CPU, so it is timed alone: CPU time (`time.thread_time`) per read, and per
instant `read` of the same query, each in a fresh process per size.

`--before DIR` also measures an older tree (`git archive <ref> bot integrations simulator
storage runbooks | tar -x -C DIR`), interleaved round by round with this one, and checks that
both trees return the same series (a digest of every node, label, time and value).

    python bench/sim_range_read.py --sizes 1024 4096 --reads 50 --rounds 3 --before /tmp/before
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import FAULTY, ROOT, ecc_fleet, machine, node

SIGNAL = "gpu.ecc.dbe_rate"
WINDOW = timedelta(minutes=15)
"""The ecc-storm runbook's default window: each point is a rate over it."""


def measure(size: int, reads: int) -> dict[str, Any]:
    """Build a fleet of `size` nodes and time `reads` snapshot reads (after one warm-up)."""
    from bot.engine.snapshotting import PEERS, window_for
    from integrations.signals import load_signal_catalog
    from integrations.telemetry import SignalQuery
    from simulator.fleet import Fleet
    from simulator.telemetry import SimTelemetry

    now = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
    fleet = Fleet.from_scenario(ecc_fleet(size), now=lambda: now, t0=now)
    catalog = load_signal_catalog(Path("runbooks/signals.yaml").resolve())
    telemetry = SimTelemetry(fleet, catalog)
    nodes = (node(FAULTY, size), *(node(i, size) for i in range(PEERS)))
    query = SignalQuery(signal=SIGNAL, nodes=nodes, window=WINDOW)
    start, end, step = window_for(anchor=now - timedelta(minutes=2), until=now)
    series = telemetry.read_range(query, start=start, end=end, step=step)
    ranged = []
    for _ in range(reads):
        began = time.thread_time()
        telemetry.read_range(query, start=start, end=end, step=step)
        ranged.append((time.thread_time() - began) * 1000)
    instant = []
    for _ in range(reads):
        began = time.thread_time()
        telemetry.read(query)
        instant.append((time.thread_time() - began) * 1000)
    digest = hashlib.sha256(
        repr(
            [
                (s.node, sorted(s.labels.items()), [(a.isoformat(), v) for a, v in s.points])
                for s in series
            ]  # fmt: skip
        ).encode()
    ).hexdigest()[:12]
    return {
        "nodes": size,
        "series": len(series),
        "points": sum(len(s.points) for s in series),
        "range_cpu_ms_median": round(statistics.median(ranged), 3),
        "range_cpu_ms_min": round(min(ranged), 3),
        "read_cpu_ms_median": round(statistics.median(instant), 3),
        "digest": digest,
    }


def in_child(tree: Path | None, size: int, reads: int) -> dict[str, Any]:
    """`measure` in a fresh interpreter on `tree` (None: this one)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    command = [sys.executable, __file__, "--child", str(size), "--reads", str(reads)]
    done = subprocess.run(
        command, env=env, cwd=tree or ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {size} nodes on {tree or ROOT} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--reads", type=int, default=50, help="timed reads per process")
    parser.add_argument("--rounds", type=int, default=3, help="processes per tree and size")
    parser.add_argument("--before", type=Path, help="an older tree, measured interleaved")
    parser.add_argument("--json", type=Path, help="also write the machine and results here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.reads)))
        return
    trees: dict[str, Path | None] = {"after": None}
    if args.before is not None:
        trees = {"before": args.before.resolve(), "after": None}
    print(json.dumps({"machine": machine()}), flush=True)
    results = []
    for size in args.sizes:
        for round_ in range(args.rounds):
            for name, tree in trees.items():
                row = {"tree": name, "round": round_} | in_child(tree, size, args.reads)
                results.append(row)
                print(json.dumps(row), flush=True)
    digests = {(r["nodes"], r["digest"]) for r in results}
    same = len(digests) == len({r["nodes"] for r in results})
    print(f"every tree returned the same series at each size: {same}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))
    if not same:
        raise SystemExit("the trees returned different series")


if __name__ == "__main__":
    main()
