"""The fault kinds a scenario may place on the simulated fleet (DESIGN.md §10), by name.

Each kind is one small class (see `fault_base.FaultKind`) in a module per layer: gpu_faults,
fabric_faults, node_faults, workload_faults, training_faults, serving_faults. Adding a kind
means writing its class and listing it there; scenario validation and the fleet pick it up
from `FAULT_KINDS`. Every DESIGN.md §10 kind is simulated.
"""

from __future__ import annotations

from simulator.fabric_faults import FABRIC_FAULTS
from simulator.fault_base import ActiveFault, FaultEvent, FaultKind, Impact, LogLine
from simulator.gpu_faults import GPU_FAULTS
from simulator.node_faults import NODE_FAULTS
from simulator.serving_faults import SERVING_FAULTS
from simulator.training_faults import TRAINING_FAULTS
from simulator.workload_faults import WORKLOAD_FAULTS

FAULT_KINDS: dict[str, FaultKind] = {
    kind.name: kind
    for kind in (
        *GPU_FAULTS,
        *FABRIC_FAULTS,
        *NODE_FAULTS,
        *WORKLOAD_FAULTS,
        *TRAINING_FAULTS,
        *SERVING_FAULTS,
    )
}

#: DESIGN.md §10 kinds not simulated yet: none left.
PLANNED_KINDS: tuple[str, ...] = ()

__all__ = [
    "FAULT_KINDS",
    "PLANNED_KINDS",
    "ActiveFault",
    "FaultEvent",
    "FaultKind",
    "Impact",
    "LogLine",
    "fault_kind",
]


def fault_kind(name: str) -> FaultKind:
    """The kind called `name`. KeyError names the valid kinds."""
    try:
        return FAULT_KINDS[name]
    except KeyError:
        raise KeyError(
            f"unknown fault kind '{name}' (kinds: {', '.join(sorted(FAULT_KINDS))})"
        ) from None
