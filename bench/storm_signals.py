"""The node-storm runbook's signal reads and their summaries one at a time, at each size.

Per size, per gathered signal: the CPU of one read for every member (SimTelemetry over the
benchmark fleet, with the freshness check the signal step makes) and of its summary
(`summarize_signal`), each the least of `--repeat` calls in one thread. Without the storm run's
concurrency (its nine reads interleave on a pool) this is each step's own cost per member, so
how it grows from size to size is the steps', not the interleaving's or the collector's.

    python bench/storm_signals.py --sizes 1024 4096 --repeat 5
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ecc_fleet, node  # noqa: E402

from bot.config import Settings, StorageSettings  # noqa: E402
from bot.engine.steps import gather  # noqa: E402
from bot.engine.steps.common import parse_duration  # noqa: E402
from bot.wiring.runtime import open_runtime  # noqa: E402
from integrations.telemetry import SignalQuery  # noqa: E402

FLEET_WIDE = ("node.driver_version", "k8s.node.topology")


def least(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The least thread CPU of `repeat` calls, and the last call's result."""
    times, found = [], None
    for _ in range(repeat):
        start = time.thread_time()
        found = call()
        times.append(time.thread_time() - start)
    return min(times), found


def measure(members: int, repeat: int) -> dict[str, tuple[float, float, int]]:
    """signal -> (read CPU s, summary CPU s, samples) at `members` alerting nodes."""
    nodes = [node(i, members) for i in range(members)]
    window = parse_duration("15m")
    out: dict[str, tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(storage=StorageSettings(url=f"sqlite:///{Path(tmp) / 'oncall.db'}"))
        with open_runtime(settings, scenario=ecc_fleet(members), fresh=True) as rt:
            deps, storm = rt.deps, rt.catalog.get("node-storm")
            for step in storm.runbook.steps:
                if not step.signal:
                    continue
                spec = deps.signals.get(step.signal)
                query = SignalQuery(
                    signal=step.signal,
                    nodes=() if step.signal in FLEET_WIDE else tuple(nodes),
                    window=window,
                )
                gather._read_fresh(deps, query)  # warm the simulated series
                read_cpu, held = least(partial(gather._read_fresh, deps, query), repeat)
                result = held.result
                summarize = partial(
                    gather.summarize_signal,
                    result,
                    nodes=nodes,
                    window=window,
                    keep_labels=spec.keep_labels,
                    bitmask=spec.unit == "bitmask",
                )
                summary_cpu, _ = least(summarize, repeat)
                out[step.signal] = (read_cpu, summary_cpu, len(result.samples))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    by_size = {members: measure(members, args.repeat) for members in args.sizes}
    first, last = args.sizes[0], args.sizes[-1]
    for signal in by_size[first]:
        a, b = by_size[first][signal], by_size[last][signal]
        print(
            f"{signal:32s} samples {a[2]:6d} -> {b[2]:6d}"
            f"  read {a[0] * 1e3:7.1f} -> {b[0] * 1e3:7.1f} ms"
            f"  summary {a[1] * 1e3:6.1f} -> {b[1] * 1e3:6.1f} ms"
        )
    for label, index in (("reads", 0), ("summaries", 1)):
        low = sum(v[index] for v in by_size[first].values())
        high = sum(v[index] for v in by_size[last].values())
        print(f"{label}: {low * 1e3:.1f} -> {high * 1e3:.1f} ms, x{high / max(low, 1e-9):.2f}")


if __name__ == "__main__":
    main()
