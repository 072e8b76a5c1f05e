"""GPU fault kinds: ECC storms, row remapping, XIDs, fallen off the bus, NVLink, PCIe, and the
facility faults seen through GPU sensors (thermal throttle, power cap).

Each class changes the dcgm-exporter series a real GPU would show, writes the verbatim driver
lines, and, for XIDs the device plugin treats as critical, lowers allocatable nvidia.com/gpu.
A throttled node slows the training job / inference replica on it (straggler symptoms with the
clock-event bits set); a DBE storm or a lost GPU kills the rank, so the job's collectives hang.
"""

from __future__ import annotations

from simulator.fault_base import (
    ActiveFault,
    FaultKind,
    Impact,
    JobEffect,
    LogLine,
    ServiceEffect,
    WorkloadEffect,
    gpu_impacts,
    node_impact,
    occurrences,
    per_second,
    xid_lines,
)
from simulator.pods import SimPod
from simulator.tracks import Effect, Gone, Hold, Ramp, Scale, Step
from simulator.xids import is_device_critical

GPU_RESOURCE = ("resource", "nvidia_com_gpu")

# Clock-event reason bits (DOMAIN.md §1.3).
SW_POWER_CAP = 0x4
SW_THERMAL = 0x20
HW_THERMAL = 0x40


def unhealthy_gpu(fault: ActiveFault) -> Impact:
    """The device plugin marks the GPU unhealthy: allocatable drops by one until the plugin
    restarts. The plugin never marks a GPU healthy again by itself (NVIDIA/k8s-device-plugin
    #234), so the drop lasts as long as the fault's window, whose end is its repair: a GPU
    reset or a reboot restarts the node's GPU pods, the plugin among them. A plugin that keeps
    holding a GPU after the fault is gone is its own kind, `device_plugin_unhealthy`."""
    drop = Step(fault.window, -1.0, persist=False)
    return node_impact(fault, "kube_node_status_allocatable", effect=drop, entity=GPU_RESOURCE)


def xid_gauge(fault: ActiveFault, code: int) -> dict[str, Effect]:
    """`DCGM_FI_DEV_XID_ERRORS` holds the last XID code (kept after the fault, as DCGM does)."""
    return {"DCGM_FI_DEV_XID_ERRORS": Hold(fault.window, float(code), persist=True)}


def slowed(fault: ActiveFault, *, clock: float) -> list[WorkloadEffect]:
    """A node whose GPUs run at `clock` x their speed: its rank computes slower (the whole job
    waits for it) and its inference replica answers slower."""
    factor = 1.0 / clock
    node = fault.node_name
    return [
        JobEffect(fault.window, node=node, compute=factor),
        ServiceEffect(fault.window, node=node, compute=factor),
    ]


def rank_lost(fault: ActiveFault) -> list[WorkloadEffect]:
    """The rank on the node died with its GPU: every other rank waits in a collective."""
    return [JobEffect(fault.window, node=fault.node_name, hang="collective")]


def _cuda_error_lines(fault: ActiveFault, pod: SimPod, *, error: str) -> list[LogLine]:
    if pod.daemonset or fault.gpu is None:
        return []
    rank = int(pod.labels.get("gpu-oncall.io/rank", "0")) * max(pod.gpus, 1) + fault.gpu.index
    t = fault.window.start + 1.0
    return [
        LogLine(
            t,
            f"[rank{rank}]:[E ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
            f"Rank {rank}] Process group watchdog thread terminated with exception: "
            f"CUDA error: {error}",
        ),
        LogLine(t + 0.001, f"RuntimeError: CUDA error: {error}"),
    ]


class EccDbeStorm(FaultKind):
    """Uncorrectable (double-bit) ECC errors keep arriving on one GPU: XID 48 each time."""

    name = "ecc_dbe_storm"
    layer = "gpu_hardware"
    target = "gpu"
    per_minute = 6.0

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        rate = per_second(self.per_minute, fault)
        w = fault.window
        effects: dict[str, Effect] = {
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": Ramp(w, rate),
            "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": Ramp(w, rate),
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": Ramp(w, rate / 3.0),
            "DCGM_FI_DEV_ROW_REMAP_PENDING": Hold(w, 1.0, persist=True),
            **xid_gauge(fault, 48),
        }
        return [*gpu_impacts(fault, effects), unhealthy_gpu(fault)]

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        every = 1.0 / per_second(self.per_minute, fault)
        times = occurrences(fault.window, every_s=every, until=until, first_s=every)
        return xid_lines(fault, 48, times=times)

    def pod_log(self, fault: ActiveFault, pod: SimPod, *, until: float) -> list[LogLine]:
        if until < fault.window.start + 1.0:
            return []
        return _cuda_error_lines(fault, pod, error="uncorrectable ECC error encountered")

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return rank_lost(fault)


class EccSbeStorm(FaultKind):
    """Correctable (single-bit) ECC errors at a high rate: XID 92, an early warning."""

    name = "ecc_sbe_storm"
    layer = "gpu_hardware"
    target = "gpu"
    per_minute = 120.0

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        rate = per_second(self.per_minute, fault)
        effects: dict[str, Effect] = {
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": Ramp(fault.window, rate),
            "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": Ramp(fault.window, rate),
            **xid_gauge(fault, 92),
        }
        return [*gpu_impacts(fault, effects), unhealthy_gpu(fault)]

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        times = occurrences(fault.window, every_s=300.0, until=until)
        return xid_lines(fault, 92, times=times)


class RowRemapFailure(FaultKind):
    """An uncorrectable error hit a bank with no spare rows left: remapping failed (RMA)."""

    name = "row_remap_failure"
    layer = "gpu_hardware"
    target = "gpu"

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        w = fault.window
        effects: dict[str, Effect] = {
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": Hold(w, 1.0, persist=True),
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": Step(w, 8.0),
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": Step(w, 1.0),
            "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": Step(w, 1.0),
            **xid_gauge(fault, 64),
        }
        return [*gpu_impacts(fault, effects), unhealthy_gpu(fault)]

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        start = fault.window.start
        if until < start:
            return []
        return xid_lines(fault, 48, times=[start]) + xid_lines(fault, 64, times=[start + 0.002])[2:]


class Xid(FaultKind):
    """One XID `code` on one GPU: the gauge and `err_code` label, and the kernel line."""

    name = "xid"
    layer = "gpu_hardware"
    target = "gpu"
    needs = frozenset({"code"})

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        code = fault.code or 0
        impacts = gpu_impacts(fault, xid_gauge(fault, code))
        if is_device_critical(code):
            impacts.append(unhealthy_gpu(fault))
        return impacts

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        start = fault.window.start
        if until < start or fault.gpu is None:
            return []
        lines = xid_lines(fault, fault.code or 0, times=[start])
        if fault.code == 79:
            pci = fault.gpu.kernel_pci
            lines.append(LogLine(start + 0.001, f"NVRM: GPU {pci}.0: GPU has fallen off the bus."))
        return lines


class GpuFallenOffBus(FaultKind):
    """The GPU dropped off PCIe: XID 79, and dcgm-exporter stops reporting that GPU."""

    name = "gpu_fallen_off_bus"
    layer = "gpu_hardware"
    target = "gpu"
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        assert fault.node is not None and fault.gpu is not None
        gone = Impact(
            fault.node.name, Gone(fault.window), family="dcgm", entity=("gpu", str(fault.gpu.index))
        )
        return [gone, unhealthy_gpu(fault)]

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        start = fault.window.start
        if until < start or fault.gpu is None:
            return []
        pci = fault.gpu.kernel_pci
        aer = LogLine(
            start - 2.0,
            f"pcieport 0000:{pci[5:7]}:01.0: PCIe Bus Error: "
            "severity=Corrected, type=Data Link Layer, (Transmitter ID)",
        )
        fell = LogLine(start + 0.001, f"NVRM: GPU {pci}.0: GPU has fallen off the bus.")
        return [aer, *xid_lines(fault, 79, times=[start]), fell]

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return rank_lost(fault)


#: From this intensity on an NVLink fault is fatal to the CUDA context (the rank dies).
NVLINK_FATAL_INTENSITY = 0.8


class NvlinkErrors(FaultKind):
    """NVLink CRC/replay/recovery errors on one GPU and XID 74 (counters off by default).

    The job's intra-node collectives cross that GPU's links: they slow down (replays), and a
    fatal NVLink error (intensity >= 0.8) kills the rank, so the job hangs. With dcgm-exporter's
    default CSV the XID 74 gauge and kernel lines are all that shows."""

    name = "nvlink_errors"
    layer = "fabric"
    target = "gpu"

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        w = fault.window
        rates = {"CRC_FLIT": 30.0, "CRC_DATA": 5.0, "REPLAY": 10.0, "RECOVERY": 0.5}
        effects: dict[str, Effect] = {
            f"DCGM_FI_DEV_NVLINK_{name}_ERROR_COUNT_TOTAL": Ramp(w, per_second(per_min, fault))
            for name, per_min in rates.items()
        }
        return [*gpu_impacts(fault, effects | xid_gauge(fault, 74)), unhealthy_gpu(fault)]

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        times = occurrences(fault.window, every_s=300.0, until=until)
        return xid_lines(fault, 74, times=times)

    def pod_log(self, fault: ActiveFault, pod: SimPod, *, until: float) -> list[LogLine]:
        if fault.intensity < NVLINK_FATAL_INTENSITY or until < fault.window.start + 1.0:
            return []
        return _cuda_error_lines(fault, pod, error="uncorrectable NVLink error detected")

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        if fault.intensity >= NVLINK_FATAL_INTENSITY:
            return rank_lost(fault)
        node = fault.node_name
        return [JobEffect(fault.window, node=node, network=1.0 - 0.5 * fault.intensity)]


#: From this intensity the marginal link retrains to x8 (`DCGM_FI_DEV_PCIE_LINK_WIDTH`).
PCIE_DOWNTRAIN_INTENSITY = 0.5


class PcieDowngrade(FaultKind):
    """A marginal PCIe link: replays climb, the root port logs corrected AER errors, and from
    intensity 0.5 the link retrains to x8 (of x16)."""

    name = "pcie_downgrade"
    layer = "gpu_hardware"
    target = "gpu"
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        ramp = Ramp(fault.window, per_second(20.0, fault))
        effects: dict[str, Effect] = {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ramp}
        if fault.intensity >= PCIE_DOWNTRAIN_INTENSITY:
            effects["DCGM_FI_DEV_PCIE_LINK_WIDTH"] = Hold(fault.window, 8.0)
        return gpu_impacts(fault, effects)

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        # Host-device copies and GPUDirect RDMA cross the marginal link: the rank computes and
        # communicates slower, the whole synchronous job waits for it.
        k, node = fault.intensity, fault.node_name
        return [
            JobEffect(fault.window, node=node, compute=1.0 + 0.3 * k, network=1.0 - 0.3 * k),
            ServiceEffect(fault.window, node=node, compute=1.0 + 0.3 * k),
        ]

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        assert fault.gpu is not None
        port = f"pcieport 0000:{fault.gpu.kernel_pci[5:7]}:01.0"
        return [
            LogLine(
                t,
                f"{port}: PCIe Bus Error: severity=Corrected, type=Data Link Layer, "
                "(Transmitter ID)",
            )
            for t in occurrences(fault.window, every_s=60.0, until=until)
        ]


class ThermalThrottle(FaultKind):
    """Cooling trouble: GPUs run hot and clocks drop (thermal slowdown bits set)."""

    name = "thermal_throttle"
    layer = "facility"
    target = "node"
    accepts_gpu = True

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        w, k = fault.window, fault.intensity
        effects: dict[str, Effect] = {
            "DCGM_FI_DEV_GPU_TEMP": Hold(w, 84.0 + 6.0 * k),
            "DCGM_FI_DEV_MEMORY_TEMP": Hold(w, 92.0 + 4.0 * k),
            "DCGM_FI_DEV_SM_CLOCK": Scale(w, 1.0 - 0.45 * k),
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": Hold(w, float(SW_THERMAL | HW_THERMAL)),
            "DCGM_FI_DEV_THERMAL_VIOLATION": Ramp(w, 1e9 * k),
        }
        return [i for gpu in fault.gpus() for i in gpu_impacts(fault, effects, gpu=gpu)]

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return slowed(fault, clock=1.0 - 0.45 * fault.intensity)


class PowerCap(FaultKind):
    """A power limit below spec: power pinned at the cap, clocks down, SW power-cap bit set."""

    name = "power_cap"
    layer = "facility"
    target = "node"
    accepts_gpu = True
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        w, k = fault.window, fault.intensity
        effects: dict[str, Effect] = {
            "DCGM_FI_DEV_POWER_USAGE": Hold(w, 700.0 - 350.0 * k),
            "DCGM_FI_DEV_SM_CLOCK": Scale(w, 1.0 - 0.3 * k),
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": Hold(w, float(SW_POWER_CAP)),
            "DCGM_FI_DEV_POWER_VIOLATION": Ramp(w, 1e9 * k),
        }
        return [i for gpu in fault.gpus() for i in gpu_impacts(fault, effects, gpu=gpu)]

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return slowed(fault, clock=1.0 - 0.3 * fault.intensity)


GPU_FAULTS: tuple[FaultKind, ...] = (
    EccDbeStorm(),
    EccSbeStorm(),
    RowRemapFailure(),
    Xid(),
    GpuFallenOffBus(),
    NvlinkErrors(),
    PcieDowngrade(),
    ThermalThrottle(),
    PowerCap(),
)
