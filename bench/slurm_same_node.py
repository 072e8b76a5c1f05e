"""Does slurmctld survive the bot's reads? Concurrent reads against real Slurm 22.05 daemons on
loopback (the tests' throw-away cluster), for `--seconds`, then whether slurmctld still runs.

`--load` chooses who reads, each from `--threads` threads:
- `same-raw`: `GET node/<one node>` through slurmrestd with plain httpx, no turns (what crashed
  22.05.8: docs/slurm.md, "Reads of one node take turns");
- `different-raw`: the same, each thread its own node;
- `product`: SlurmCluster adapters (their reads of one node take turns, integrations/slurm/
  turns.py) reading that node, plus two threads listing the node's jobs and every node, while
  the main thread submits a job to it, drains it, cancels the job and resumes it in a loop.

    python bench/slurm_same_node.py --load same-raw --threads 2 --seconds 60
    python bench/slurm_same_node.py --load product --threads 4 --seconds 180
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from tests.servers.slurm import (  # noqa: E402
    REST_VERSIONS,
    SlurmServers,
    make_slurm_cluster,
    start_slurm,
)

NODE = "gpu-node-03"


def raw_reader(slurm: SlurmServers, node: str, counts: Counter[str], stop: threading.Event) -> None:
    headers = {"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": slurm.token()}
    with httpx.Client(base_url=slurm.rest_url, headers=headers, timeout=10.0) as http:
        while not stop.is_set():
            try:
                http.get(f"/slurm/{REST_VERSIONS[0]}/node/{node}")
                counts["node reads"] += 1
            except httpx.TransportError:
                counts["errors"] += 1
                time.sleep(0.5)


def adapter_reader(
    slurm: SlurmServers, read: str, counts: Counter[str], stop: threading.Event
) -> None:
    cluster = make_slurm_cluster(slurm)
    try:
        while not stop.is_set():
            try:
                if read == "node":
                    cluster.nodes([NODE])
                else:
                    cluster.pods_on(NODE)
                    cluster.nodes()
                counts[f"{read} reads"] += 1
            except Exception:  # noqa: BLE001 - counted: the controller may be gone
                counts["errors"] += 1
                time.sleep(0.5)
    finally:
        cluster.close()


def cycle(slurm: SlurmServers, counts: Counter[str]) -> None:
    """A job on the node, an NHC-style drain, the job cancelled, the node resumed."""
    job = slurm.submit(node=NODE, name="bench", gpus=8)
    slurm.drain(NODE, "NHC: bench")
    slurm.run("scancel", job, check=False)
    slurm.resume(NODE)
    counts["cycles"] += 1


def run(args: argparse.Namespace) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    stop = threading.Event()
    with start_slurm() as slurm:
        work: list[Callable[[], None]] = []
        for index in range(args.threads):
            if args.load == "product":
                work.append(partial(adapter_reader, slurm, "node", counts, stop))
            else:
                node = NODE if args.load == "same-raw" else f"gpu-node-{index:02d}"
                work.append(partial(raw_reader, slurm, node, counts, stop))
        if args.load == "product":
            work += [partial(adapter_reader, slurm, "jobs", counts, stop)] * 2
        threads = [threading.Thread(target=one, daemon=True) for one in work]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        controller = slurm.slurmctld
        assert controller is not None
        while time.monotonic() - started < args.seconds and controller.poll() is None:
            if args.load == "product":
                try:
                    cycle(slurm, counts)
                except BaseException:  # noqa: BLE001 - pytest.fail from a poll when it died
                    counts["errors"] += 1
            else:
                time.sleep(0.2)
        lasted = time.monotonic() - started
        stop.set()
        for thread in threads:
            thread.join(15)
        return {
            "load": args.load,
            "threads": args.threads,
            "slurmctld": "running" if controller.poll() is None else f"exited {controller.poll()}",
            "seconds": round(lasted, 1),
            **dict(sorted(counts.items())),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    loads = ["same-raw", "different-raw", "product"]
    parser.add_argument("--load", choices=loads, default="product")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
