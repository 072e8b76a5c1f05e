"""The CPU after one triage's verdict (issue 21 item 2): the evidence snapshot, the proposal
(its proposals, their impact), the verdict's look back at GPU history, the GPU facts recorded
and, at resolution, the GPU-hours read.

Serves the bot in-process on a simulated fleet (triage_latency.py's set-up, SimTelemetry) and
posts one GPUEccStorm alert at a time; each run stops at its approval, then the alert resolves.
The parts are timed by wrapping the functions the engine calls (by module attribute, so the
same script times an older tree) with the thread CPU of the worker that runs them. With
`--tree DIR` (repeatable) each tree runs in its own child process, the trees interleaved per
round, so a before/after pair shares the machine's load:

    git archive main bot simulator storage runbooks bench | tar -x -C /tmp/after-before
    python bench/after_verdict.py --tree /tmp/after-before --tree . --rounds 2 --runs 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: (module, attribute, label): what is timed. A missing attribute (an older tree) is skipped.
PARTS = (
    ("bot.engine.running", "snapshot_verdicts", "snapshot"),
    ("bot.engine.steps.remediate", "_proposals", "proposals"),
    ("bot.engine.steps.remediate", "_with_impact", "impact"),
    ("bot.engine.steps.localize", "with_history", "history read"),
    ("storage.gpu_history", "record_facts", "facts recorded"),
    ("bot.incidents.lifecycle", "read_gpu_hours", "gpu-hours read"),
)


def _timed(fn: Callable[..., Any], totals: dict[str, float], label: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[label] = totals.get(label, 0.0) + time.thread_time() - start

    return wrapper


def child(nodes: int, runs: int) -> dict[str, Any]:
    """Time the parts over `runs` triages (one more warms up) in this process's tree."""
    import importlib

    import httpx
    from triage_latency import serving, webhook

    totals: dict[str, float] = {}
    for module_name, attribute, label in PARTS:
        module = importlib.import_module(module_name)
        if hasattr(module, attribute):
            setattr(module, attribute, _timed(getattr(module, attribute), totals, label))
    per_run: dict[str, list[float]] = {}
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, serving(nodes, "inprocess", Path(tmp),
                                                       sync="full") as (rt, server, _):  # fmt: skip
        http = httpx.Client(base_url=server.url, timeout=60.0)
        for index in range(runs + 1):
            totals.clear()
            before = time.process_time()
            http.post("/alerts", json=webhook(rt, nodes, status="firing", index=index))
            assert server.app.workers.wait_idle(120)
            http.post("/alerts", json=webhook(rt, nodes, status="resolved", index=index))
            assert server.app.workers.wait_idle(120)
            spent = time.process_time() - before
            if index == 0:
                continue
            cpu.append(spent)
            for label, seconds in totals.items():
                per_run.setdefault(label, []).append(seconds)
    return {
        "tree": os.environ.get("PYTHONPATH", "."),
        "runs": runs,
        "parts_ms": {k: round(1000 * sum(v) / runs, 2) for k, v in per_run.items()},
        "after_verdict_ms": round(1000 * sum(sum(v) for v in per_run.values()) / runs, 2),
        "process_cpu_per_cycle_ms": round(1000 * sorted(cpu)[len(cpu) // 2], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tree", action="append", default=[], help="a tree to time (repeat)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or not args.tree:
        print(json.dumps(child(args.nodes, args.runs)))
        return
    here = Path(__file__).resolve().parent
    rows = []
    for round_ in range(args.rounds):
        for tree in args.tree:
            root = Path(tree).resolve()
            env = dict(os.environ, PYTHONPATH=f"{root}:{here}:{here.parent / 'tests'}")
            out = subprocess.run(
                [sys.executable, str(here / "after_verdict.py"), "--child",
                 "--nodes", str(args.nodes), "--runs", str(args.runs)],
                env=env, check=True, capture_output=True, text=True, cwd=root,
            ).stdout  # fmt: skip
            row = json.loads(out.strip().splitlines()[-1]) | {"round": round_, "tree": tree}
            rows.append(row)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
