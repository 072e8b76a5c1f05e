"""Turning a validated FaultSpec into the ActiveFaults the fleet registers.

A spec names one node (optionally a GPU or HCA), a group of nodes (`nodes`, `rack`, `leaf`:
one fault per node; an HCA fault on a group without `hca` hits every port, as a dead leaf
switch would), or a workload (optionally pinned to one of its nodes). Pure: the fleet passes
in what it knows and registers the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from integrations.errors import ScenarioError
from simulator.fault_base import ActiveFault
from simulator.faults import FAULT_KINDS
from simulator.scenario_specs import FaultSpec, FleetSpec
from simulator.topology import GpuSpec, HcaSpec, NodeSpec
from simulator.tracks import FaultWindow

Target = tuple[NodeSpec | None, GpuSpec | None, HcaSpec | None]


def fault_targets(
    spec: FaultSpec,
    *,
    fleet: FleetSpec,
    nodes: Mapping[str, NodeSpec],
    workload_nodes: list[str],
) -> list[Target]:
    """Every (node, gpu, hca) the spec hits; `(None, None, None)` for a workload-wide fault."""
    kind = FAULT_KINDS[spec.kind]
    if spec.missing is not None and spec.missing > len(workload_nodes):
        raise ScenarioError(
            f"fault '{spec.kind}': missing={spec.missing} exceeds the "
            f"{len(workload_nodes)} pods of workload '{spec.workload}'"
        )
    names = spec.target_nodes(fleet)
    if not names and kind.pins_node and workload_nodes:
        names = [workload_nodes[0]]
    if not names:
        return [(None, None, None)]
    targets: list[Target] = []
    for name in names:
        node = nodes[name]
        gpu = node.gpus[spec.gpu] if spec.gpu is not None else None
        if kind.target == "hca" and spec.hca is None:
            targets += [(node, gpu, hca) for hca in node.hcas]
        else:
            targets.append((node, gpu, node.hcas[spec.hca] if spec.hca is not None else None))
    return targets


def active_faults(
    spec: FaultSpec,
    *,
    origin: float,
    targets: list[Target],
    pid_on: Callable[[str | None], int],
    fleet_size: int,
    workload_size: int,
) -> list[ActiveFault]:
    """One ActiveFault per target and episode, starting at `origin + start` (each with its own
    window, so repairing one node ends only that node's share). A transient fault's window
    ends after `duration`; a flapping fault is one window per episode."""
    start = origin + spec.start.total_seconds()
    return [
        ActiveFault(
            kind=spec.kind,
            window=window,
            intensity=spec.intensity,
            node=node,
            gpu=gpu,
            hca=hca,
            workload=spec.workload,
            code=spec.code,
            version=spec.version,
            missing=spec.missing,
            pid=pid_on(node.name if node else None),
            fleet_size=fleet_size,
            workload_size=workload_size,
        )
        for node, gpu, hca in targets
        for window in episodes(spec, start=start, origin=origin)
    ]


#: A flapping fault without a `duration` flaps for this long after `start` (or until now).
FLAP_HORIZON_S = 2 * 3600.0
#: At most this many episodes of one flapping fault (the newest are kept).
MAX_EPISODES = 48


def episodes(spec: FaultSpec, *, start: float, origin: float) -> list[FaultWindow]:
    """The windows the fault acts in: one (open, or ending after `duration`), or one per
    episode of a flapping fault."""
    duration = spec.duration.total_seconds() if spec.duration is not None else None
    if spec.flap is None:
        return [FaultWindow(start, None if duration is None else start + duration)]
    period, on = spec.flap.period.total_seconds(), spec.flap.on.total_seconds()
    until = start + duration if duration is not None else max(origin, start) + FLAP_HORIZON_S
    count = max(1, int((until - start) // period) + (1 if (until - start) % period else 0))
    first = max(0, count - MAX_EPISODES)
    return [
        FaultWindow(start + k * period, min(start + k * period + on, until))
        for k in range(first, count)
    ]
