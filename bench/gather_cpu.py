"""The gather steps' own CPU (issue 21 item 2): the kernel-log classification and each gather
step of the ecc-storm runbook, before and after a change, interleaved in one run.

Each measurement runs in a child process on one source tree (`--tree DIR`, put first on
PYTHONPATH; `git archive main bot integrations storage simulator runbooks | tar -x -C DIR`
makes a "before"), so both trees meet the same machine load; CPU time (time.process_time, every
thread: a gather step's outside call runs on the step-call pool) per call, the median of
`--repeat` batches:

- `classify ecc node`: `classify_text` on the kernel log the ecc-storm `kernel` step reads on
  the simulated fleet (bench/common.py `ecc_fleet(N)`, node FAULTY: boot lines and an Xid 48
  storm every 10 s);
- `classify large log`: on a larger real-looking kernel log: the verbatim public text of
  tests/diagnosis/fixtures/evidence (an nvidia-bug-report excerpt, dmesg XID chains, an mlx5
  cable fault) with the simulated node's lines, stamped over two days (`--large-lines` lines);
- one row per gather step of ecc-storm (its node function called as the engine calls it,
  telemetry and cluster reads included), and `gather super-step` (their sum);
- `node_logs read`, `telemetry reads`: the simulated cluster's and telemetry's own reads for
  the same steps, so a step's own CPU is its row minus its read.

    python bench/gather_cpu.py --tree /tmp/before --tree . --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from common import FAULTY, ROOT, ecc_fleet, machine, node

FIXTURES = ROOT / "tests" / "diagnosis" / "fixtures" / "evidence"
REAL_TEXT = ("nvidia-bug-report.log", "dmesg-xid-chain.txt", "dmesg-gsp-timeout.txt",
             "dmesg-mlx5-cable.txt", "dmesg-chain-only.txt")  # fmt: skip


def large_log(base: list[str], *, lines: int, now: datetime, host: str) -> str:
    """`lines` kernel-log lines over the last two days: the fixtures' verbatim text (their own
    dmesg stamps dropped) and the simulated node's lines, in a fixed pseudo-random order."""
    pool = [line.split("] ", 1)[-1] for line in base]
    for name in REAL_TEXT:
        text = (FIXTURES / name).read_text(encoding="utf-8", errors="replace")
        pool += [line.split("] ", 1)[-1] for line in text.splitlines() if line.strip()]
    chooser = random.Random(21)
    start = now - timedelta(days=2)
    step = timedelta(days=2) / lines
    out = []
    for i in range(lines):
        at = start + step * i
        uptime = 352811.0 + (at - start).total_seconds()
        body = chooser.choice(pool)
        out.append(f"{at.isoformat()} {host} kernel: [{uptime:14.6f}] {body}")
    return "\n".join(out)


def cpu_ms(call: Callable[[], Any], *, calls: int, repeat: int) -> float:
    """The median over `repeat` batches of the CPU milliseconds per call."""
    call()
    batches = []
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(calls):
            call()
        batches.append((time.process_time() - start) * 1000 / calls)
    return round(statistics.median(batches), 3)


def child(nodes: int, calls: int, repeat: int, large_lines: int) -> dict[str, float]:
    """Measure on the tree this process imported (PYTHONPATH)."""
    from langgraph.runtime import Runtime as GraphRuntime

    from bot.config import Settings, StorageSettings
    from bot.diagnosis.logs import classify_text
    from bot.engine.schema import StepKind
    from bot.engine.steps.gather import make_cluster_node, make_signal_node
    from bot.wiring.runtime import open_runtime
    from integrations.telemetry import SignalQuery

    rows: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(storage=StorageSettings(url=f"sqlite:///{Path(tmp) / 'bench.db'}"))
        with open_runtime(settings, scenario=ecc_fleet(nodes), fresh=True) as rt:
            deps, loaded = rt.deps, rt.catalog.get("ecc-storm")
            target = node(FAULTY, nodes)
            log = deps.cluster.node_logs(target)
            catalog = deps.log_catalog
            big = large_log(log.splitlines(), lines=large_lines, now=rt.clock.now(), host=target)
            rows["classify ecc node"] = cpu_ms(
                lambda: classify_text(log, catalog), calls=calls, repeat=repeat
            )
            rows["classify large log"] = cpu_ms(
                lambda: classify_text(big, catalog), calls=max(1, calls // 20), repeat=repeat
            )
            state: Any = {"inputs": {"node": target, "window": "15m", "sbe_threshold": 10.0},
                          "steps": {}, "target": target}  # fmt: skip
            runtime = GraphRuntime(context=deps)
            total = reads = 0.0
            for step in loaded.runbook.steps:
                if step.kind is StepKind.SIGNAL:
                    fn = make_signal_node(step, loaded)
                    query = SignalQuery(signal=step.signal or "", nodes=(target,),
                                        window=timedelta(minutes=15))  # fmt: skip
                    reads += cpu_ms(partial(deps.telemetry.read, query), calls=calls,
                                    repeat=repeat)  # fmt: skip
                elif step.kind is StepKind.CLUSTER:
                    fn = make_cluster_node(step, loaded)
                    if step.cluster == "node_logs":
                        rows["node_logs read"] = cpu_ms(
                            lambda: deps.cluster.node_logs(target), calls=calls, repeat=repeat
                        )
                else:
                    continue
                rows[f"step {step.id}"] = cpu_ms(
                    partial(fn, state, runtime), calls=calls, repeat=repeat
                )
                total += rows[f"step {step.id}"]
            rows["telemetry reads"] = round(reads, 3)
            rows["gather super-step"] = round(total, 3)
    return rows


def measure(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    command = [sys.executable, __file__, "--child", "--nodes", str(args.nodes),
               "--calls", str(args.calls), "--repeat", str(args.repeat),
               "--large-lines", str(args.large_lines)]  # fmt: skip
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", help="source trees, in order")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per tree")
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=40, help="calls per batch")
    parser.add_argument("--repeat", type=int, default=5, help="batches (the median is kept)")
    parser.add_argument("--large-lines", type=int, default=5000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.nodes, args.calls, args.repeat, args.large_lines)))
        return
    trees = args.tree or [ROOT]
    runs: dict[str, list[dict[str, float]]] = {str(t): [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            runs[str(tree)].append(measure(tree, args))
    names = list(runs[str(trees[0])][0])
    print(f"CPU ms per call, min-max over {args.rounds} rounds, {args.nodes} nodes; "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'':<22}" + "".join(f"{t.name or str(t):>22}" for t in trees))
    for name in names:
        cells = []
        for tree in trees:
            values = [r[name] for r in runs[str(tree)] if name in r]
            cells.append(f"{min(values):.3f}-{max(values):.3f}" if values else "-")
        print(f"{name:<22}" + "".join(f"{c:>22}" for c in cells))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
