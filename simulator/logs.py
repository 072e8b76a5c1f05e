"""Healthy log lines of the simulated fleet and the kernel-log line format.

Boot messages (kernel, NVIDIA driver, mlx5 HCAs) and dcgm-exporter start-up. Benign on purpose:
a log classifier must not find a fault in them. Workload pods' output (training steps, NCCL,
vLLM stats) comes from the job and service models in job_logs.py; fault lines come from the
fault kinds; this module only renders.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from simulator.fault_base import LogLine
from simulator.pods import SimPod
from simulator.topology import NodeSpec

#: How far back healthy workload output goes, and how often it logs.
POD_HISTORY_S = 1200.0
POD_EVERY_S = 60.0


def render_kernel_line(line: LogLine, *, boot_offset_s: float, at: datetime, host: str) -> str:
    """As /var/log/kern.log holds it (what the kubelet's node-log query returns): rsyslog's
    RFC 3339 stamp, the host, `kernel:`, then the dmesg stamp (seconds since boot) and the
    text, e.g. `2026-11-22T10:01:02.123456+00:00 gpu-node-07 kernel: [352811.123456] NVRM: ...`.
    """
    stamp = at.isoformat(timespec="microseconds")
    return f"{stamp} {host} kernel: [{line.t + boot_offset_s:12.6f}] {line.text}"


def boot_lines(node: NodeSpec, *, driver_version: str) -> list[LogLine]:
    """What the node logged at boot, at fleet times before t0."""
    boot = -node.boot_offset_s
    lines = [
        LogLine(
            boot,
            "Linux version 5.15.0-105-generic (buildd@lcy02-amd64-054) (gcc (Ubuntu "
            "11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) "
            "#115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024",
        ),
        LogLine(boot + 11.20, "nvidia: loading out-of-tree module taints kernel."),
        LogLine(
            boot + 11.43,
            f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver_version}"
            "  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 20 "
            "23:29:52 UTC 2024",
        ),
        LogLine(
            boot + 12.05,
            "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for "
            f"UNIX platforms  {driver_version}  Release Build",
        ),
    ]
    for hca in node.hcas:
        at = boot + 9.0 + 0.05 * hca.index
        lines.append(LogLine(at, f"mlx5_core {hca.pci}: firmware version: 28.39.1002"))
        netdev = f"ibp{int(hca.pci[5:7], 16)}s0"
        lines.append(LogLine(at + 20.0, f"mlx5_core {hca.pci} {netdev}: Link up"))
    return lines


def pod_lines(pod: SimPod, *, until: float, wall: Callable[[float], datetime]) -> list[LogLine]:
    """Steady output of a DaemonSet pod (dcgm-exporter) up to `until` (or its eviction).
    Workload pods are rendered by job_logs.py; anything else prints nothing."""
    stop = until if pod.stopped_at is None else min(until, pod.stopped_at)
    if not pod.daemonset:
        return []
    begin = stop - POD_HISTORY_S
    return [
        LogLine(begin, 'level=info msg="Starting webserver"'),
        LogLine(begin + 0.1, 'level=info msg="Pipeline starting"'),
    ]
