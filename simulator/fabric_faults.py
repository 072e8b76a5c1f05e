"""InfiniBand fault kinds: symbol errors (bad cable/optic), link flaps, a port down.

They change node_exporter's infiniband series for one HCA port. A cable does not heal when the
node is drained, so these outlast a drain; only a repair ends them. On a node that runs a
training job they are also the job's problem (the masquerade): its all-reduce ring runs at the
sick link's pace, or stops, and the ranks on the node and its ring peers log NCCL IB errors.
"""

from __future__ import annotations

from typing import Literal

from simulator.fault_base import (
    ActiveFault,
    FaultKind,
    Impact,
    JobEffect,
    LogLine,
    WorkloadEffect,
    hca_impacts,
    occurrences,
    per_second,
)
from simulator.tracks import Flap, Hold, Ramp, Step

PORT_DOWN = 1.0
PHYS_POLLING = 2.0


def _netdev(fault: ActiveFault) -> str:
    """The IPoIB interface name of the HCA, e.g. `ibp26s0` for PCI bus 0x1a."""
    assert fault.hca is not None
    return f"ibp{int(fault.hca.pci[5:7], 16)}s0"


def job_effect(
    fault: ActiveFault, *, network: float, warn: Literal["ib_completion", "port_event"]
) -> list[WorkloadEffect]:
    """The rank on the node gets `network` x its bandwidth (0: its collectives never finish)."""
    assert fault.hca is not None
    return [
        JobEffect(
            fault.window,
            node=fault.node_name,
            network=network,
            nccl_warn=warn,
            hca=fault.hca.device,
        )
    ]


def _link_line(fault: ActiveFault, t: float, *, state: str) -> LogLine:
    assert fault.hca is not None
    return LogLine(t, f"mlx5_core {fault.hca.pci} {_netdev(fault)}: Link {state}")


class IbSymbolErrors(FaultKind):
    """Sustained symbol errors on one port: a bad cable or transceiver."""

    name = "ib_symbol_errors"
    layer = "fabric"
    target = "hca"
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        w = fault.window
        return hca_impacts(
            fault,
            {
                "node_infiniband_symbol_error_total": Ramp(w, per_second(60.0, fault)),
                "node_infiniband_link_error_recovery_total": Ramp(w, per_second(0.5, fault)),
                "node_infiniband_port_errors_received_total": Ramp(w, per_second(20.0, fault)),
            },
        )

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return job_effect(fault, network=1.0 - 0.4 * fault.intensity, warn="ib_completion")


class IbLinkFlap(FaultKind):
    """The link keeps going down and coming back (LinkDowned climbs; state drops to DOWN)."""

    name = "ib_link_flap"
    layer = "fabric"
    target = "hca"
    ends_on_drain = False
    # 12 s down in every 40 s: a 30 s scrape grid always lands on at least one down sample.
    period_s = 40.0
    down_s = 12.0

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        w, period, down = fault.window, self.period_s, self.down_s
        return hca_impacts(
            fault,
            {
                "node_infiniband_link_downed_total": Ramp(w, 1.0 / period),
                "node_infiniband_link_error_recovery_total": Ramp(w, 3.0 / period),
                "node_infiniband_state_id": Flap(w, low=PORT_DOWN, period_s=period, down_s=down),
                "node_infiniband_physical_state_id": Flap(
                    w, low=PHYS_POLLING, period_s=period, down_s=down
                ),
            },
        )

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        lines: list[LogLine] = []
        for t in occurrences(fault.window, every_s=self.period_s, until=until):
            lines.append(_link_line(fault, t, state="down"))
            if t + self.down_s <= until:
                lines.append(_link_line(fault, t + self.down_s, state="up"))
        return lines

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return job_effect(fault, network=1.0 - 0.65 * fault.intensity, warn="port_event")


class IbPortDown(FaultKind):
    """The port went down and stays down (state DOWN, physical state Polling)."""

    name = "ib_port_down"
    layer = "fabric"
    target = "hca"
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        w = fault.window
        return hca_impacts(
            fault,
            {
                "node_infiniband_state_id": Hold(w, PORT_DOWN),
                "node_infiniband_physical_state_id": Hold(w, PHYS_POLLING),
                "node_infiniband_link_downed_total": Step(w, 1.0),
            },
        )

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        if until < fault.window.start:
            return []
        return [_link_line(fault, fault.window.start, state="down")]

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return job_effect(fault, network=0.0, warn="ib_completion")


FABRIC_FAULTS: tuple[FaultKind, ...] = (IbSymbolErrors(), IbLinkFlap(), IbPortDown())
