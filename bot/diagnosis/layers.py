"""Fault layers, bottom-up, and severities (DESIGN §5).

A failure is cheapest to localize at the layer where it originates, so localization prefers the
lowest layer with strong evidence.
"""

from __future__ import annotations

from enum import StrEnum


class Layer(StrEnum):
    FACILITY = "facility"
    FABRIC = "fabric"
    GPU_HARDWARE = "gpu_hardware"
    NODE_SOFTWARE = "node_software"
    KUBERNETES = "kubernetes"
    TELEMETRY = "telemetry"
    WORKLOAD = "workload"
    NONE = "none"  # the target is healthy: nothing to localize


#: Bottom-up order used to break ties (index 0 = lowest layer).
LAYER_ORDER: tuple[Layer, ...] = (
    Layer.FACILITY,
    Layer.FABRIC,
    Layer.GPU_HARDWARE,
    Layer.NODE_SOFTWARE,
    Layer.KUBERNETES,
    Layer.TELEMETRY,
    Layer.WORKLOAD,
)


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


SEVERITY_WEIGHT: dict[Severity, float] = {
    Severity.INFO: 0.25,
    Severity.WARNING: 1.0,
    Severity.CRITICAL: 3.0,
}


def layer_rank(layer: Layer) -> int:
    """Position in the bottom-up order (lower = closer to the metal)."""
    return LAYER_ORDER.index(layer) if layer in LAYER_ORDER else len(LAYER_ORDER)
