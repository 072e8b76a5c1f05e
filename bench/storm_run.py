"""One storm run over all its members: the node-storm runbook with N alerting nodes as its
`nodes` input, in-process (SimTelemetry over the benchmark fleet, SQLite), to its verdict.

Per size: wall time and process CPU (every thread) from the run's start to its verdict (the
localize step reported, its records committed) and to its stop at the approval (after the
verdict: proposals with their impact, whose fleet-wide reads are issue 21's item 3), the
telemetry queries, and whether the verdict names the faulty node. Issue 21's bar: CPU to the
verdict from 1,024 to 4,096 members grows at most 4x, and 4,096 members reach a verdict in
<= 5 s. Both ratios are printed: of the medians, and of the least CPU of each size (on a
shared machine the least is the run other processes disturbed least).
`--profile` prints the top functions by cumulative time of the last run of each size.
`--single` runs ecc-storm for the one faulty node instead, on fleets of each size: what one
incident costs after its verdict (snapshot peers, impact spares, limits) must not follow the
fleet (issue 21 item 3: at 4,096 nodes <= 1.5x that at 64).

    python bench/storm_run.py --sizes 1024 4096 --runs 3
    python bench/storm_run.py --single --sizes 64 4096 --runs 5
    python bench/storm_run.py --alternate --sizes 1024 4096 --runs 9
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sqlmodel import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FAULTY, ecc_fleet, node, percentile, run_sizes  # noqa: E402

from bot.config import Settings, StorageSettings  # noqa: E402
from bot.wiring.runtime import Runtime, make_guard, open_runtime  # noqa: E402


def measure(nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    walls, cpus, queries, named = [], [], set(), []
    verdict_walls: list[float] = []
    verdict_cpus: list[float] = []
    after_cpus: list[float] = []
    node_rows: list[int] = []
    if args.single:
        runbook, inputs = "ecc-storm", {"node": node(FAULTY, nodes)}
    else:
        runbook, inputs = "node-storm", {"nodes": ",".join(node(i, nodes) for i in range(nodes))}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(storage=StorageSettings(url=f"sqlite:///{Path(tmp) / 'oncall.db'}"))
        with open_runtime(settings, scenario=ecc_fleet(nodes), fresh=True) as rt:
            loaded = rt.catalog.get(runbook)
            rows = count_node_rows(rt)
            profile = cProfile.Profile() if args.profile else None
            for index in range(args.runs + 1):  # the first run warms caches, not counted
                incident_id, _ = rt.engine.open_incident(loaded, inputs, actor="bench")
                last = profile is not None and index == args.runs
                if last and profile is not None:
                    profile.enable()
                rows.clear()
                at_verdict, on_step = verdict_marks()
                wall, cpu = time.perf_counter(), time.process_time()
                outcome = rt.engine.start(
                    loaded,
                    inputs=inputs,
                    incident_id=incident_id,
                    requester="bench",
                    on_step=on_step,
                )
                verdict_walls.append(at_verdict[0] - wall)
                verdict_cpus.append(at_verdict[1] - cpu)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                if last and profile is not None:
                    profile.disable()
                if index == 0:
                    verdict_walls.pop()
                    verdict_cpus.pop()
                    continue
                walls.append(wall)
                cpus.append(cpu)
                queries.add(sum(int(o.get("queries", 0)) for o in outcome.steps.values()))
                named.append(node(FAULTY, nodes) in outcome.verdict.get("culprits", []))
                after_cpus.append(cpu - verdict_cpus[-1])
                node_rows.append(sum(rows))
            if profile is not None:
                pstats.Stats(profile).sort_stats(args.sort).print_stats(40)
            claim_cpus = [claim_check(rt, node(FAULTY, nodes)) for _ in range(args.runs)]
    return {
        "runbook": runbook,
        "members": nodes,
        "runs": args.runs,
        "verdict_wall_p50_s": round(percentile(verdict_walls, 0.5), 3),
        "verdict_cpu_p50_s": round(percentile(verdict_cpus, 0.5), 3),
        "verdict_cpu_min_s": round(min(verdict_cpus), 3),
        "wall_p50_s": round(percentile(walls, 0.5), 3),
        "cpu_p50_s": round(percentile(cpus, 0.5), 3),
        "after_verdict_cpu_p50_s": round(percentile(after_cpus, 0.5), 3),
        "after_verdict_cpu_min_s": round(min(after_cpus), 3),
        "node_rows_per_run": max(node_rows),
        "claim_check_cpu_p50_ms": round(percentile(claim_cpus, 0.5) * 1000, 2),
        "queries": sorted(queries),
        "verdict_names_the_faulty_node": all(named),
    }


def alternate(args: argparse.Namespace) -> None:
    """Both sizes' runtimes open in one process, their runs alternating (small, large, small,
    ...): each pair of runs meets the same machine, so the ratio of a pair is not the ratio of
    two moments of a shared machine (which, measured one size after the other, moved it by
    ±15 %). Prints each pair's CPU to the verdict and the median of the pairs' ratios."""
    small, large = args.sizes[0], args.sizes[-1]
    with ExitStack() as stack:
        opened = {}
        for members in (small, large):
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            url = f"sqlite:///{Path(tmp) / 'oncall.db'}"
            settings = Settings(storage=StorageSettings(url=url))
            fleet = ecc_fleet(members)
            rt = stack.enter_context(open_runtime(settings, scenario=fleet, fresh=True))
            inputs = {"nodes": ",".join(node(i, members) for i in range(members))}
            opened[members] = (rt, rt.catalog.get("node-storm"), inputs)
            to_verdict(*opened[members])  # warms caches, not counted
        ratios = []
        for index in range(args.runs):
            pair = {members: to_verdict(*opened[members]) for members in (small, large)}
            ratios.append(pair[large] / pair[small])
            print(json.dumps({"pair": index, **{str(m): round(c, 3) for m, c in pair.items()}}))
    print(f"cpu to verdict {large}/{small}, median of {len(ratios)} alternating pairs: "
          f"{percentile(ratios, 0.5):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip


def to_verdict(rt: Runtime, loaded: Any, inputs: dict[str, str]) -> float:
    """One storm run to its approval; the process CPU from its start to its verdict."""
    incident_id, _ = rt.engine.open_incident(loaded, inputs, actor="bench")
    marks, on_step = verdict_marks()
    cpu = time.process_time()
    rt.engine.start(
        loaded, inputs=inputs, incident_id=incident_id, requester="bench", on_step=on_step
    )
    return marks[1] - cpu


def verdict_marks() -> tuple[list[float], Callable[[str, Any], None]]:
    """A step callback, and the list it fills with the wall and process CPU times at which the
    run's verdict (its localize step, recorded) is reported."""
    marks: list[float] = []

    def on_step(_step: str, output: Any) -> None:
        if output.get("kind") == "localize":
            marks.extend((time.perf_counter(), time.process_time()))

    return marks, on_step


def count_node_rows(rt: Runtime) -> list[int]:
    """The nodes each node read of the cluster port returns (by name, by label, bounded) are
    appended to the list returned: how much of the fleet a run looks at, whatever the load."""
    rows: list[int] = []
    cluster: Any = rt.deps.cluster
    for name in ("nodes", "first_nodes"):  # first_nodes: absent before the bounded read
        read = getattr(cluster, name, None)
        if read is not None:
            setattr(cluster, name, _counted(read, rows))
    return rows


def _counted(read: Any, rows: list[int]) -> Any:
    def counted(*args: Any, **kw: Any) -> Any:
        found = read(*args, **kw)
        rows.append(len(getattr(found, "nodes", found)))
        return found

    return counted


def claim_check(rt: Runtime, target: str) -> float:
    """CPU seconds of the claim-time safety check of a cordon of `target` (what the ledger
    runs before it claims the action: the observation, then the limits against the stored
    safety state), without claiming anything."""
    guard = make_guard(rt.settings, cluster=rt.deps.cluster, clock=rt.clock)
    cpu = time.process_time()
    observed = guard.observe(action="cordon", target=target, target_kind="node")
    with Session(rt.db) as session:
        at = rt.clock.now()
        guard.check(session, observed=observed, action="cordon", target=target, key="bench", at=at)
        session.rollback()  # a check that blocks records its block: never keep it
    return time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--single", action="store_true", help="ecc-storm on the faulty node")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="cumulative", help="pstats order of --profile")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--alternate", action="store_true", help="the first and last size's runs alternating"
    )
    args = parser.parse_args()
    if args.alternate:
        alternate(args)
        return
    results = run_sizes(args, measure)
    if len(results) > 1 and results[0]["verdict_cpu_p50_s"]:
        ratio = results[-1]["verdict_cpu_p50_s"] / results[0]["verdict_cpu_p50_s"]
        print(f"cpu to verdict {results[-1]['members']}/{results[0]['members']}: {ratio:.2f}")
        least = results[-1]["verdict_cpu_min_s"] / max(results[0]["verdict_cpu_min_s"], 1e-6)
        print(f"least cpu to verdict {results[-1]['members']}/{results[0]['members']}: {least:.2f}")
        after = results[-1]["after_verdict_cpu_p50_s"] / max(
            results[0]["after_verdict_cpu_p50_s"], 1e-6
        )
        print(f"cpu after verdict {results[-1]['members']}/{results[0]['members']}: {after:.2f}")
        claim = results[-1]["claim_check_cpu_p50_ms"] / max(
            results[0]["claim_check_cpu_p50_ms"], 1e-6
        )
        print(f"claim check cpu {results[-1]['members']}/{results[0]['members']}: {claim:.2f}")


if __name__ == "__main__":
    main()
