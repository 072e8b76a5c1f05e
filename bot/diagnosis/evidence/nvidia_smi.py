"""`nvidia-smi -q`: ECC counters, remapped rows, retired pages, reset status and recovery action,
clocks-event (throttle) reasons, temperatures against their slowdown/shutdown limits, and the
PCIe link's current vs max generation and width, per GPU.

The text is a tree indented by 4 spaces: a `GPU 00000000:18:00.0` header per GPU, sections
without a colon (`ECC Errors`, `Volatile`) and `Key : Value` leaves. Older drivers say `Clocks
Throttle Reasons` and `Single Bit`/`Double Bit`; newer ones `Clocks Event Reasons` and `SRAM`/
`DRAM`; both are read. GPUs are numbered in the order printed (nvidia-smi sorts by PCI bus id,
which is also the default CUDA/NVML order). A pasted section without its `GPU 0000:..` header
(`Remapped Rows`, `Clocks Event Reasons`, `ECC Errors` ...) is read as one unnamed GPU: the
sections are recognised by content, and prompts, blank lines and indentation do not matter.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bot.diagnosis.evidence.model import (
    EvidenceFinding,
    Parsed,
    SourceText,
    Target,
    at_line_start,
    normalize_pci,
)
from bot.diagnosis.layers import Layer, Severity

FORMAT = "nvidia-smi -q"
_GPU_HEADER = re.compile(r"^GPU (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_LEAF = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s+:\s?(?P<value>.*)$")
_NUMBER = re.compile(r"^-?\d+")
_THROTTLE_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
_ANY_GPU_HEADER = re.compile(_GPU_HEADER.pattern, re.MULTILINE)
_SECTION_NAMES = ("Remapped Rows", "Clocks Event Reasons", "Clocks Throttle Reasons", "ECC Errors",
                  "Retired Pages", "GPU Reset Status")
_FRAGMENT_SECTIONS = re.compile(
    r"^\s*(?:Remapped Rows|Clocks Event Reasons|Clocks Throttle Reasons|ECC Errors|Retired Pages"
    r"|GPU Reset Status)\s*$",
    re.MULTILINE,
)


@dataclass
class _Gpu:
    header: int | None  # None: a pasted section without its `GPU 0000:..` header
    pci: str | None
    index: int | None
    #: "Section/Sub/Key" -> (value, 0-based line index)
    fields: dict[str, tuple[str, int]] = field(default_factory=dict)

    def get(self, path: str) -> tuple[str, int] | None:
        return self.fields.get(path)


def detect(text: str) -> bool:
    return "NVSMI LOG" in text or any(_GPU_HEADER.match(line) for line in text.splitlines()[:400])


def parse(src: SourceText) -> Parsed | None:
    gpus = list(_gpus(src))
    if not gpus:
        return None
    findings: list[EvidenceFinding] = []
    inventory: list[Target] = []
    for gpu in gpus:
        target = _target(gpu)
        inventory.append(target)
        findings += _ecc(src, gpu, target)
        findings += _remap(src, gpu, target)
        findings += _reset(src, gpu, target)
        findings += _throttle(src, gpu, target)
        findings += _temperature(src, gpu, target)
        findings += _pcie(src, gpu, target)
    return Parsed(FORMAT, tuple(findings), tuple(inventory))


def _gpus(src: SourceText) -> Iterator[_Gpu]:
    if not (at_line_start(src.text, "GPU ") and _ANY_GPU_HEADER.search(src.text)):
        if any(name in src.text for name in _SECTION_NAMES) and _FRAGMENT_SECTIONS.search(src.text):
            yield _fragment(src)
        return
    gpu: _Gpu | None = None
    stack: list[tuple[int, str]] = []
    count = 0
    for i, line in enumerate(src.lines):
        header = _GPU_HEADER.match(line)
        if header:
            if gpu is not None:
                yield gpu
            gpu = _Gpu(header=i, pci=normalize_pci(header["pci"]) or header["pci"], index=count)
            count += 1
            stack = []
            continue
        if gpu is None or not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        if indent == 0:  # the GPU's block ended (next tool's output in a bundle)
            yield gpu
            gpu = None
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        leaf = _LEAF.match(line)
        if leaf is None:  # a section: `ECC Errors`, `Volatile`
            stack.append((indent, line.strip()))
            continue
        path = "/".join([name for _, name in stack] + [leaf["key"].strip()])
        gpu.fields.setdefault(path, (leaf["value"].strip(), i))
    if gpu is not None:
        yield gpu


def _fragment(src: SourceText) -> _Gpu:
    """Sections pasted without their GPU header: one unnamed GPU; a line at the left margin
    (a prompt, a note) closes the open sections instead of the GPU."""
    gpu = _Gpu(header=None, pci=None, index=None)
    stack: list[tuple[int, str]] = []
    for i, line in enumerate(src.lines):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        leaf = _LEAF.match(line)
        if leaf is None:
            stack.append((indent, line.strip()))
            continue
        path = "/".join([name for _, name in stack] + [leaf["key"].strip()])
        gpu.fields.setdefault(path, (leaf["value"].strip(), i))
    return gpu


def _target(gpu: _Gpu) -> Target:
    uuid = gpu.get("GPU UUID")
    index = None if gpu.index is None else str(gpu.index)
    return Target(gpu_index=index, pci=gpu.pci, uuid=uuid[0] if uuid else None)


def _count(value: str) -> int | None:
    found = _NUMBER.match(value.strip())
    return int(found.group()) if found else None


def _finding(
    src: SourceText,
    gpu: _Gpu,
    target: Target,
    *,
    code: str,
    layer: Layer,
    severity: Severity,
    summary: str,
    at: list[int],
) -> EvidenceFinding:
    header = [] if gpu.header is None else [gpu.header]
    lines = tuple(src.cite(i) for i in sorted(set([*header, *at])))
    return EvidenceFinding(FORMAT, code, layer, severity, summary, target, lines)


def _sum(gpu: _Gpu, prefix: str, names: tuple[str, ...]) -> tuple[int, list[int]]:
    total, at = 0, []
    for name in names:
        row = gpu.get(f"{prefix}/{name}")
        value = _count(row[0]) if row else None
        if row and value:
            total += value
            at.append(row[1])
    return total, at


_UNCORRECTABLE = (
    "DRAM Uncorrectable",
    "SRAM Uncorrectable",
    "SRAM Uncorrectable Parity",
    "SRAM Uncorrectable SEC-DED",
    "Double Bit/Total",
)
_CORRECTABLE = ("DRAM Correctable", "SRAM Correctable", "Single Bit/Total")


def _ecc(src: SourceText, gpu: _Gpu, target: Target) -> Iterator[EvidenceFinding]:
    volatile, v_at = _sum(gpu, "ECC Errors/Volatile", _UNCORRECTABLE)
    aggregate, a_at = _sum(gpu, "ECC Errors/Aggregate", _UNCORRECTABLE)
    corrected, c_at = _sum(gpu, "ECC Errors/Volatile", _CORRECTABLE)
    if volatile:
        yield _finding(
            src, gpu, target, code="nvidia_smi.ecc_uncorrectable_volatile",
            layer=Layer.GPU_HARDWARE, severity=Severity.CRITICAL,
            summary=f"{volatile} uncorrectable ECC error(s) since the driver loaded", at=v_at,
        )
    elif aggregate:
        yield _finding(
            src, gpu, target, code="nvidia_smi.ecc_uncorrectable_aggregate",
            layer=Layer.GPU_HARDWARE, severity=Severity.WARNING,
            summary=f"{aggregate} uncorrectable ECC error(s) in the GPU's lifetime (none since "
            "the driver loaded)", at=a_at,
        )
    if corrected:
        yield _finding(
            src, gpu, target, code="nvidia_smi.ecc_correctable", layer=Layer.GPU_HARDWARE,
            severity=Severity.INFO, summary=f"{corrected} corrected ECC error(s) since the "
            "driver loaded", at=c_at,
        )
    threshold = gpu.get("ECC Errors/Aggregate/SRAM Threshold Exceeded")
    if threshold and threshold[0].lower() == "yes":
        yield _finding(
            src, gpu, target, code="nvidia_smi.sram_threshold_exceeded",
            layer=Layer.GPU_HARDWARE, severity=Severity.CRITICAL,
            summary="SRAM threshold exceeded (NVIDIA's RMA criterion for SRAM)", at=[threshold[1]],
        )


def _yes(gpu: _Gpu, path: str) -> tuple[str, int] | None:
    row = gpu.get(path)
    return row if row and row[0].strip().lower() == "yes" else None


def _remap(src: SourceText, gpu: _Gpu, target: Target) -> Iterator[EvidenceFinding]:
    failure = _yes(gpu, "Remapped Rows/Remapping Failure Occurred")
    if failure:
        yield _finding(
            src, gpu, target, code="nvidia_smi.row_remap_failure", layer=Layer.GPU_HARDWARE,
            severity=Severity.CRITICAL,
            summary="row remapping failed (NVIDIA's HBM RMA criterion, after field diagnostics)",
            at=[failure[1]],
        )
    pending = _yes(gpu, "Remapped Rows/Pending")
    if pending:
        yield _finding(
            src, gpu, target, code="nvidia_smi.row_remap_pending", layer=Layer.GPU_HARDWARE,
            severity=Severity.WARNING,
            summary="a row remap is pending: reset the GPU at the next drain", at=[pending[1]],
        )
    uncorrectable = gpu.get("Remapped Rows/Uncorrectable Error")
    count = _count(uncorrectable[0]) if uncorrectable else None
    if uncorrectable and count:
        yield _finding(
            src, gpu, target, code="nvidia_smi.rows_remapped_uncorrectable",
            layer=Layer.GPU_HARDWARE, severity=Severity.WARNING,
            summary=f"{count} row(s) remapped for uncorrectable errors", at=[uncorrectable[1]],
        )
    for key in ("Double Bit ECC", "Single Bit ECC"):
        row = gpu.get(f"Retired Pages/{key}")
        retired = _count(row[0]) if row else None
        if row and retired:
            yield _finding(
                src, gpu, target, code="nvidia_smi.retired_pages", layer=Layer.GPU_HARDWARE,
                severity=Severity.WARNING if key.startswith("Double") else Severity.INFO,
                summary=f"{retired} page(s) retired for {key.lower()} errors", at=[row[1]],
            )
    for key in ("Pending Page Blacklist", "Pending Page Retirement", "Pending"):
        row = _yes(gpu, f"Retired Pages/{key}")
        if row:
            yield _finding(
                src, gpu, target, code="nvidia_smi.page_retirement_pending",
                layer=Layer.GPU_HARDWARE, severity=Severity.WARNING,
                summary="a page retirement is pending: reboot or reload the driver", at=[row[1]],
            )
            break


def _reset(src: SourceText, gpu: _Gpu, target: Target) -> Iterator[EvidenceFinding]:
    for key in ("Reset Required", "Drain and Reset Recommended"):
        row = _yes(gpu, f"GPU Reset Status/{key}")
        if row:
            yield _finding(
                src, gpu, target, code="nvidia_smi.reset_required", layer=Layer.GPU_HARDWARE,
                severity=Severity.CRITICAL,
                summary=f"GPU reset status: {key} (an uncorrectable error occurred)", at=[row[1]],
            )
            return
    action = gpu.get("GPU Recovery Action")
    if action and action[0].strip().lower() not in ("none", "n/a", ""):
        yield _finding(
            src, gpu, target, code="nvidia_smi.recovery_action", layer=Layer.GPU_HARDWARE,
            severity=Severity.CRITICAL, summary=f"GPU recovery action: {action[0].strip()}",
            at=[action[1]],
        )


def _active(gpu: _Gpu, key: str) -> tuple[str, int] | None:
    for section in _THROTTLE_SECTIONS:
        for path in (f"{section}/{key}", f"{section}/HW Slowdown/{key}"):
            row = gpu.get(path)
            if row and row[0].strip().lower() == "active":
                return row
    return None


#: Active clock-event reasons worth a finding, in this order: (reason as nvidia-smi prints it,
#: finding code, severity, summary). All are facility: the GPU is slowed from outside.
_CLOCK_EVENTS = (
    ("HW Power Brake Slowdown", "hw_power_brake", Severity.CRITICAL, "HW power brake slowdown "
     "active: an external power brake is asserted (PSU / rack power); not a GPU fault"),
    ("HW Thermal Slowdown", "hw_thermal_slowdown", Severity.CRITICAL,
     "HW thermal slowdown active: check cooling"),
    ("HW Slowdown", "hw_slowdown", Severity.WARNING, "HW slowdown active (clocks cut by half or "
     "more: temperature, power brake or fast power protection)"),
    ("SW Thermal Slowdown", "sw_thermal_slowdown", Severity.WARNING, "SW thermal slowdown "
     "active: the GPU or HBM is at its max operating temperature"),
    ("SW Power Cap", "sw_power_cap", Severity.INFO, "SW power cap active (normal at full load; "
     "check the power limit if it is below the default)"),
)  # fmt: skip
_HW_SPECIFIC = ("HW Power Brake Slowdown", "HW Thermal Slowdown")
"""Reasons that explain a generic `HW Slowdown`, which then gets no finding of its own."""


def _throttle(src: SourceText, gpu: _Gpu, target: Target) -> Iterator[EvidenceFinding]:
    explained = any(_active(gpu, reason) for reason in _HW_SPECIFIC)
    for reason, code, severity, summary in _CLOCK_EVENTS:
        row = _active(gpu, reason)
        if row is None or (reason == "HW Slowdown" and explained):
            continue
        yield _finding(
            src, gpu, target, code=f"nvidia_smi.{code}", layer=Layer.FACILITY,
            severity=severity, summary=summary, at=[row[1]],
        )


def _temperature(src: SourceText, gpu: _Gpu, target: Target) -> Iterator[EvidenceFinding]:
    current = gpu.get("Temperature/GPU Current Temp")
    value = _count(current[0]) if current else None
    if current is None or value is None:
        return
    for key, severity in (("Shutdown", Severity.CRITICAL), ("Slowdown", Severity.CRITICAL)):
        limit = gpu.get(f"Temperature/GPU {key} Temp")
        bound = _count(limit[0]) if limit else None
        if limit and bound is not None and value >= bound:
            yield _finding(
                src, gpu, target, code=f"nvidia_smi.temperature_{key.lower()}",
                layer=Layer.FACILITY, severity=severity,
                summary=f"GPU at {value} C, at or above its {key.lower()} temperature "
                f"({bound} C): check cooling", at=[current[1], limit[1]],
            )
            return
    # Newer drivers print margins to T.Limit: slowdown starts when the margin reaches the
    # `Slowdown T.Limit` value (negative numbers are below the limit).
    margin = gpu.get("Temperature/GPU T.Limit Temp")
    slow = gpu.get("Temperature/GPU Slowdown T.Limit Temp")
    m, s = (_count(margin[0]) if margin else None), (_count(slow[0]) if slow else None)
    if margin and slow and m is not None and s is not None and m <= s:
        yield _finding(
            src, gpu, target, code="nvidia_smi.temperature_slowdown", layer=Layer.FACILITY,
            severity=Severity.CRITICAL, summary=f"GPU {m} C from its T.Limit, at or past the "
            f"slowdown margin ({s} C): check cooling", at=[current[1], margin[1], slow[1]],
        )


def _pcie(src: SourceText, gpu: _Gpu, target: Target) -> Iterator[EvidenceFinding]:
    base = "PCI/GPU Link Info"
    width_max, width_now = gpu.get(f"{base}/Link Width/Max"), gpu.get(f"{base}/Link Width/Current")
    wm = _count(width_max[0]) if width_max else None
    wn = _count(width_now[0]) if width_now else None
    if width_max and width_now and wm and wn is not None and wn < wm:
        yield _finding(
            src, gpu, target, code="nvidia_smi.pcie_width_degraded", layer=Layer.GPU_HARDWARE,
            severity=Severity.WARNING, summary=f"PCIe link width x{wn} of x{wm}: the link "
            "trained narrow (slot, riser or GPU seating)", at=[width_max[1], width_now[1]],
        )
    gen_max = gpu.get(f"{base}/PCIe Generation/Max")
    gen_now = gpu.get(f"{base}/PCIe Generation/Current")
    gm = _count(gen_max[0]) if gen_max else None
    gn = _count(gen_now[0]) if gen_now else None
    if gen_max and gen_now and gm and gn is not None and gn < gm:
        idle = _idle(gpu)
        yield _finding(
            src, gpu, target, code="nvidia_smi.pcie_gen_degraded", layer=Layer.GPU_HARDWARE,
            severity=Severity.INFO if idle else Severity.WARNING,
            summary=f"PCIe gen {gn} of {gm}"
            + (" while idle (GPUs lower the link speed at idle)" if idle else " under load"),
            at=[gen_max[1], gen_now[1]],
        )
    replays = gpu.get("PCI/Replays Since Reset")
    count = _count(replays[0]) if replays else None
    if replays and count:
        yield _finding(
            src, gpu, target, code="nvidia_smi.pcie_replays", layer=Layer.GPU_HARDWARE,
            severity=Severity.INFO, summary=f"{count} PCIe replay(s) since reset (link retries; "
            "compare the rate with peers)", at=[replays[1]],
        )


def _idle(gpu: _Gpu) -> bool:
    return _active(gpu, "Idle") is not None or _active(gpu, "GPU Idle") is not None

