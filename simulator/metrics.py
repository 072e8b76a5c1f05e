"""The metrics the simulated exporters expose, with real names, labels and healthy baselines.

dcgm-exporter (per GPU), node_exporter's infiniband collector (per HCA port),
kube-state-metrics (per node) and Prometheus' own `up` — DOMAIN.md §1, §3, §7. Each metric says
which series a node has and their healthy `base + slope·t`; faults change them elsewhere
(faults.py). Training-job and vLLM series are in workload_metrics.py, pod series in
pod_metrics.py; `METRICS` is every metric of every family.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.entities import EntityKey, Family, gpu_entity, hca_entity
from simulator.metric_base import MetricDef, NodeView, Seed
from simulator.pod_metrics import POD_METRICS
from simulator.topology import GpuSpec, HcaSpec
from simulator.workload_metrics import WORKLOAD_METRICS
from simulator.xids import xid_info

__all__ = ["METRICS", "EntityKey", "Family", "MetricDef", "NodeView", "Seed"]
__all__ += ["gpu_entity", "hca_entity"]

H100_FB_MIB = 81559.0

GpuBaseline = Callable[[GpuSpec, bool], tuple[float, float]]
HcaBaseline = Callable[[HcaSpec, bool], tuple[float, float]]


def _gpu(baseline: GpuBaseline) -> Callable[[NodeView], list[Seed]]:
    def seeds(view: NodeView) -> list[Seed]:
        return [
            Seed(gpu_entity(g.index), labels, *baseline(g, view.busy))
            for g, labels in zip(view.spec.gpus, view.gpu_labels, strict=True)
        ]

    return seeds


def _hca(baseline: HcaBaseline) -> Callable[[NodeView], list[Seed]]:
    def seeds(view: NodeView) -> list[Seed]:
        return [
            Seed(hca_entity(h.index), labels, *baseline(h, view.busy))
            for h, labels in zip(view.spec.hcas, view.hca_labels, strict=True)
        ]

    return seeds


def _const(value: float) -> Callable[[object, bool], tuple[float, float]]:
    return lambda _spec, _busy: (value, 0.0)


def _load(busy_value: float, idle_value: float) -> Callable[[object, bool], tuple[float, float]]:
    return lambda _spec, busy: (busy_value if busy else idle_value, 0.0)


def _xid_labels(value: float) -> dict[str, str]:
    code = int(value)
    return {"err_code": str(code), "err_msg": xid_info(code).err_msg}


_CONDITIONS = {
    "Ready": "true",
    "MemoryPressure": "false",
    "DiskPressure": "false",
    "PIDPressure": "false",
}
_RESOURCES = {  # resource -> (unit, capacity, allocatable); GPUs come from the node spec
    "cpu": ("core", 224.0, 222.0),
    "memory": ("byte", 2.0 * 2**40, 2.0 * 2**40 - 32 * 2**30),
    "pods": ("integer", 110.0, 110.0),
}


def _conditions(view: NodeView) -> list[Seed]:
    name = view.spec.name
    return [
        Seed(
            ("condition", cond, status),
            {"node": name, "condition": cond, "status": status},
            1.0 if status == healthy else 0.0,
        )
        for cond, healthy in _CONDITIONS.items()
        for status in ("true", "false", "unknown")
    ]


def _resources(column: int) -> Callable[[NodeView], list[Seed]]:
    def seeds(view: NodeView) -> list[Seed]:
        gpus = float(len(view.spec.gpus))
        table = {"nvidia_com_gpu": ("integer", gpus, gpus), **_RESOURCES}
        return [
            Seed(
                ("resource", res),
                {"node": view.spec.name, "resource": res, "unit": row[0]},
                float(row[column]),
            )
            for res, row in table.items()
        ]

    return seeds


def _node_info(view: NodeView) -> list[Seed]:
    labels = {
        "node": view.spec.name,
        "kernel_version": "5.15.0-105-generic",
        "kubelet_version": "v1.30.4",
        "container_runtime_version": "containerd://1.7.20",
        "os_image": "Ubuntu 22.04.4 LTS",
        "internal_ip": f"10.64.{view.spec.index // 256}.{view.spec.index % 256}",
    }
    return [Seed(("node",), labels, 1.0)]


def _node(value: float) -> Callable[[NodeView], list[Seed]]:
    return lambda view: [Seed(("node",), view.node_labels, value)]


#: Node labels kube-state-metrics exports (`--metric-labels-allowlist=nodes=[...]`), sanitized.
def _node_labels(view: NodeView) -> list[Seed]:
    labels = {
        "node": view.spec.name,
        "label_kubernetes_io_hostname": view.spec.name,
        "label_gpu_oncall_io_rack": view.spec.rack,
        "label_gpu_oncall_io_leaf_switch": view.spec.leaf_switch,
    }
    return [Seed(("node",), labels, 1.0)]


SCRAPE_JOBS = ("dcgm-exporter", "node-exporter")
"""Scrape jobs whose `up` the fleet reports per node, and the exporter family each watches."""
SCRAPE_FAMILY: dict[str, Family] = {"dcgm-exporter": "dcgm", "node-exporter": "node_exporter"}


def _up(view: NodeView) -> list[Seed]:
    name, index = view.spec.name, view.spec.index
    instances = {
        "dcgm-exporter": f"10.233.{index // 256}.{index % 256}:9400",
        "node-exporter": name,
    }
    return [
        Seed(("scrape", job), {"job": job, "instance": instances[job], "node": name}, 1.0)
        for job in SCRAPE_JOBS
    ]


def _dcgm(
    name: str, baseline: GpuBaseline, *, help: str, counter: bool = False, default_on: bool = True
) -> MetricDef:
    return MetricDef(
        name=name,
        family="dcgm",
        kind="counter" if counter else "gauge",
        help=help,
        seeds=_gpu(baseline),
        default_on=default_on,
    )


def _ib(name: str, baseline: HcaBaseline, *, help: str, counter: bool = False) -> MetricDef:
    return MetricDef(
        name=name,
        family="node_exporter",
        kind="counter" if counter else "gauge",
        help=help,
        seeds=_hca(baseline),
    )


def _ksm(name: str, seeds: Callable[[NodeView], list[Seed]], *, help: str) -> MetricDef:
    return MetricDef(name=name, family="kube_state_metrics", kind="gauge", help=help, seeds=seeds)


def _power(g: GpuSpec, _busy: bool) -> tuple[float, float]:
    return g.power_w, 0.0


def _energy(g: GpuSpec, _busy: bool) -> tuple[float, float]:
    return 4.0e12, g.power_w * 1000.0


def _traffic(
    busy_rate: float, idle_rate: float, base: float
) -> Callable[[object, bool], tuple[float, float]]:
    return lambda _spec, busy: (base, busy_rate if busy else idle_rate)


_DCGM = [
    _dcgm("DCGM_FI_DEV_SM_CLOCK", _const(1980.0), help="SM clock frequency (in MHz)."),
    _dcgm("DCGM_FI_DEV_MEM_CLOCK", _const(2619.0), help="Memory clock frequency (in MHz)."),
    _dcgm("DCGM_FI_DEV_GPU_TEMP", lambda g, _b: (g.temp_c, 0.0), help="GPU temperature (in C)."),
    _dcgm(
        "DCGM_FI_DEV_MEMORY_TEMP",
        lambda g, _b: (g.temp_c + 6.0, 0.0),
        help="Memory temperature (in C).",
    ),
    _dcgm("DCGM_FI_DEV_POWER_USAGE", _power, help="Power draw (in W)."),
    _dcgm(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        _energy,
        counter=True,
        help="Total energy consumption since boot (in mJ).",
    ),
    _dcgm(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        _const(0.0),
        counter=True,
        help="Total number of PCIe retries.",
    ),
    _dcgm("DCGM_FI_DEV_GPU_UTIL", _load(100.0, 0.0), help="GPU utilization (in %)."),
    _dcgm("DCGM_FI_DEV_MEM_COPY_UTIL", _load(38.0, 0.0), help="Memory utilization (in %)."),
    _dcgm(
        "DCGM_FI_DEV_FB_FREE",
        _load(H100_FB_MIB - 74000.0, H100_FB_MIB),
        help="Framebuffer memory free (in MiB).",
    ),
    _dcgm("DCGM_FI_DEV_FB_USED", _load(74000.0, 0.0), help="Framebuffer memory used (in MiB)."),
    MetricDef(
        name="DCGM_FI_DEV_XID_ERRORS",
        family="dcgm",
        kind="gauge",
        help="Value of the last XID error encountered.",
        seeds=_gpu(_const(0.0)),
        value_labels=_xid_labels,
    ),
    _dcgm(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        _const(0.0),
        counter=True,
        help="Number of remapped rows for uncorrectable errors",
    ),
    _dcgm(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        _const(0.0),
        counter=True,
        help="Number of remapped rows for correctable errors",
    ),
    _dcgm(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", _const(0.0), help="Whether remapping of rows has failed"
    ),
    _dcgm(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        _traffic(2.0e10, 0.0, 9.0e14),
        counter=True,
        help="Total number of NVLink bandwidth counters for all lanes.",
    ),
    _dcgm(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        _load(0.97, 0.0),
        help="Ratio of time the graphics engine is active.",
    ),
    _dcgm(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        _load(0.45, 0.0),
        help="Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    _dcgm(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        _load(0.38, 0.0),
        help="Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    # Off in dcgm-exporter's default CSV: absent unless the scenario enables all counters.
    _dcgm(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Total number of single-bit volatile ECC errors.",
    ),
    _dcgm(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Total number of double-bit volatile ECC errors.",
    ),
    _dcgm(
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        _const(3.0),
        counter=True,
        default_on=False,
        help="Total number of single-bit persistent ECC errors.",
    ),
    _dcgm(
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Total number of double-bit persistent ECC errors.",
    ),
    _dcgm(
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        _const(0.0),
        default_on=False,
        help="Whether a row remap is pending (takes effect at the next GPU reset).",
    ),
    _dcgm(
        "DCGM_FI_DEV_PCIE_LINK_GEN",
        _const(5.0),
        default_on=False,
        help="PCIe current link generation.",
    ),
    _dcgm(
        "DCGM_FI_DEV_PCIE_LINK_WIDTH",
        _const(16.0),
        default_on=False,
        help="PCIe current link width.",
    ),
    _dcgm(
        "DCGM_FI_DEV_PCIE_MAX_LINK_GEN",
        _const(5.0),
        default_on=False,
        help="PCIe maximum link generation.",
    ),
    _dcgm(
        "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH",
        _const(16.0),
        default_on=False,
        help="PCIe maximum link width.",
    ),
    _dcgm(
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Total number of NVLink flow-control CRC errors.",
    ),
    _dcgm(
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Total number of NVLink data CRC errors.",
    ),
    _dcgm(
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Total number of NVLink retries.",
    ),
    _dcgm(
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Total number of NVLink recovery errors.",
    ),
    _dcgm(
        "DCGM_FI_DEV_POWER_VIOLATION",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Throttling duration due to power constraints (in ns).",
    ),
    _dcgm(
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        _const(0.0),
        counter=True,
        default_on=False,
        help="Throttling duration due to thermal constraints (in ns).",
    ),
    # Not in the shipped CSVs: operators add this line (DOMAIN.md §1.3), and so does the sim.
    _dcgm(
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        _load(0.0, 1.0),
        help="Current clock event (throttle) reasons, a bitmask.",
    ),
]

_NODE_EXPORTER = [
    _ib("node_infiniband_state_id", _const(4.0), help="State of the InfiniBand port (4 = ACTIVE)"),
    _ib(
        "node_infiniband_physical_state_id",
        _const(5.0),
        help="Physical state of the InfiniBand port (5 = LinkUp)",
    ),
    _ib(
        "node_infiniband_rate_bytes_per_second", _const(5.0e10), help="Maximum signal transfer rate"
    ),
    _ib(
        "node_infiniband_symbol_error_total",
        _const(0.0),
        counter=True,
        help="Number of minor link errors detected on one or more physical lanes.",
    ),
    _ib(
        "node_infiniband_link_error_recovery_total",
        _const(0.0),
        counter=True,
        help="Number of times the link successfully recovered from an error state.",
    ),
    _ib(
        "node_infiniband_link_downed_total",
        _const(0.0),
        counter=True,
        help="Number of times the link failed to recover from an error state and went down",
    ),
    _ib(
        "node_infiniband_port_errors_received_total",
        _const(0.0),
        counter=True,
        help="Number of packets containing an error that were received on this port",
    ),
    _ib(
        "node_infiniband_local_link_integrity_errors_total",
        _const(0.0),
        counter=True,
        help="Number of times that the count of local physical errors exceeded the threshold",
    ),
    _ib(
        "node_infiniband_port_data_received_bytes_total",
        _traffic(2.2e10, 1.0e6, 7.0e14),
        counter=True,
        help="Number of data octets received on all links",
    ),
    _ib(
        "node_infiniband_port_data_transmitted_bytes_total",
        _traffic(2.2e10, 1.0e6, 7.0e14),
        counter=True,
        help="Number of data octets transmitted on all links",
    ),
]

_KSM = [
    _ksm("kube_node_status_condition", _conditions, help="The condition of a cluster node."),
    _ksm(
        "kube_node_status_capacity",
        _resources(1),
        help="The capacity for different resources of a node.",
    ),
    _ksm(
        "kube_node_status_allocatable",
        _resources(2),
        help="The allocatable for different resources of a node that are available for scheduling.",
    ),
    _ksm("kube_node_spec_unschedulable", _node(0.0), help="Whether a node can schedule new pods."),
    _ksm("kube_node_info", _node_info, help="Information about a cluster node."),
    _ksm(
        "kube_node_labels", _node_labels, help="Kubernetes labels converted to Prometheus labels."
    ),
]

_SCRAPE = [
    MetricDef(
        name="up",
        family="scrape",
        kind="gauge",
        help="1 if the instance is healthy (scraped successfully), 0 otherwise.",
        seeds=_up,
    )
]

NODE_METRICS: dict[str, MetricDef] = {m.name: m for m in (*_DCGM, *_NODE_EXPORTER, *_KSM, *_SCRAPE)}

#: Every metric of every family the simulated fleet exposes, by name.
METRICS: dict[str, MetricDef] = {**NODE_METRICS, **WORKLOAD_METRICS, **POD_METRICS}
