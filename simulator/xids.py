"""NVIDIA XID codes as the simulated fleet reports them (DOMAIN.md §2).

Owns the text a GPU would print: the dcgm-exporter `err_msg` label value and the detail after
`NVRM: Xid (PCI:...): <code>, ` in the kernel log. Pure data; knows nothing about the fleet.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class XidInfo:
    """One XID code: what dcgm-exporter calls it and what the driver prints."""

    code: int
    err_msg: str
    """dcgm-exporter `err_msg` label (internal/pkg/collector/xid_errors.go)."""
    detail: str
    """Kernel log text after the code; `{pid}` and `{proc}` are filled in per line."""


#: XIDs the NVIDIA device plugin treats as application errors: the GPU stays healthy
#: (k8s-device-plugin internal/rm/health.go). Every other XID marks the device unhealthy.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})

_PROC = "pid={pid}, name={proc}, "
_NO_PROC = "pid='<unknown>', name=<unknown>, "

XIDS: dict[int, XidInfo] = {
    x.code: x
    for x in (
        XidInfo(0, "No Error", ""),
        XidInfo(8, "GPU stopped processing", _PROC + "Ch 00000010"),
        XidInfo(
            13,
            "Graphics Engine Exception",
            _PROC + "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1): Out Of Range Address",
        ),
        XidInfo(
            31,
            "GPU memory page fault",
            _PROC + "channel 0x0000000c, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC2 "
            "GPCCLIENT_PROP_0 faulted @ 0x0_00000000. Fault is of type FAULT_PDE "
            "ACCESS_TYPE_VIRT_READ",
        ),
        XidInfo(43, "GPU stopped processing", _PROC + "Ch 00000008"),
        XidInfo(
            45,
            "Preemptive cleanup, due to previous errors -- Most likely to see when running "
            "multiple cuda",
            _PROC + "Ch 00000010",
        ),
        XidInfo(
            48,
            "Double Bit ECC Error",
            _PROC + "Ch 00000008, An uncorrectable double bit error (DBE) has been detected on "
            "GPU in the framebuffer at partition 0, subpartition 0.",
        ),
        XidInfo(61, "Internal micro-controller breakpoint/warning", "0cc4(3044) 00000000 00000000"),
        XidInfo(62, "Internal micro-controller halt", "0cc4(3044) 00000000 00000000"),
        XidInfo(
            63,
            "ECC page retirement or row remapping recording event",
            _NO_PROC + "Row Remapper: New row (0x0000000001fe1200) marked for remapping, reset "
            "gpu to activate.",
        ),
        XidInfo(
            64,
            "ECC page retirement or row remapper recording failure",
            _NO_PROC + "Row Remapper Error: Failed to remap row (0x0000000001fe1200): no spare "
            "rows left in bank.",
        ),
        XidInfo(
            69, "Graphics Engine class error", _PROC + "Class Error: ChId 0008, Class 0000c7c0"
        ),
        XidInfo(
            74,
            "NVLINK Error",
            _PROC + "NVLink: fatal error detected on link 11(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, "
            "0x0)",
        ),
        XidInfo(79, "GPU has fallen off the bus", "GPU has fallen off the bus."),
        XidInfo(
            92,
            "High single-bit ECC error rate",
            _NO_PROC + "High single-bit ECC error rate detected, the errors were corrected.",
        ),
        XidInfo(
            94,
            "Contained ECC error",
            _PROC + "Contained: SM (0x1). RST: No, D-RST: No",
        ),
        XidInfo(
            95,
            "Uncontained ECC error",
            _PROC + "Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No",
        ),
        XidInfo(
            109,
            "Context Switch Timeout Error",
            _PROC + "Ch 00000010, errorString CTX SWITCH TIMEOUT, Info 0x3c000",
        ),
        XidInfo(
            119,
            "GSP RPC Timeout",
            _PROC + "Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected "
            "function 76 (GSP_RM_CONTROL) (0x2080014b 0x5).",
        ),
        XidInfo(120, "GSP Error", _PROC + "GSP task timeout @ pc:0x4bd36ec, task: 1"),
        XidInfo(
            154,
            "GPU Recovery Action Changed",
            "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
        ),
    )
}


def xid_info(code: int) -> XidInfo:
    """The catalog entry for `code`; unknown codes get dcgm-exporter's generic text."""
    known = XIDS.get(code)
    if known is not None:
        return known
    return XidInfo(code, "Unknown Error", _PROC + f"Xid {code} reported by the driver")


def is_device_critical(code: int) -> bool:
    """Whether the device plugin marks the GPU unhealthy for this XID (allocatable drops)."""
    return code != 0 and code not in APPLICATION_XIDS


def render_xid_line(*, pci: str, code: int, pid: int, proc: str = "python") -> str:
    """The verbatim driver line, e.g. `NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.`

    `pci` is the kernel form `0000:44:00` (domain:bus:device, lower case). With no process on
    the GPU (`pid` 0) the driver prints `pid='<unknown>', name=<unknown>`.
    """
    info = xid_info(code)
    if pid > 0:
        detail = info.detail.format(pid=pid, proc=proc)
    else:
        detail = info.detail.format(pid="'<unknown>'", proc="<unknown>")
    return f"NVRM: Xid (PCI:{pci}): {code}, {detail}"
