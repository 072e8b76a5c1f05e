"""`nvidia-smi`'s default table: one block per GPU (`| 14  NVIDIA RTX 4000 ... On | 0000:CC:00.0
Off | Off |` then `|ERR!   68C    P2   99W / 130W | ... |`), whole or as a fragment.

An `ERR!` cell is NVML failing to read that field. In the fan column, where fans can be read
(another GPU of the table shows a percentage, or the table has one GPU), it is that GPU's fan or
its controller failing: `gpu_hardware`, a warning on that GPU; every fan `ERR!` on a multi-GPU
table is NVML itself, listed as context. Elsewhere (a power reading, most often) it is a sensor
read that fails now and then: listed as context, never a fault by itself (the maintainers of
azhpc-diagnostics called an `ERR!` power reading transient). A table read with no `ERR!` fan
cell is a recognised, healthy output. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from bot.diagnosis.evidence.model import (
    EvidenceFinding,
    Parsed,
    SourceText,
    Target,
    normalize_pci,
)
from bot.diagnosis.layers import Layer, Severity

FORMAT = "nvidia-smi"
ERR = "ERR!"
_GPU_ROW = re.compile(
    r"^\s*\|\s*(?P<index>\d+)\s+(?P<name>\S.*?)\s+(?:On|Off)\s*\|\s*"
    r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b[^|]*\|[^|]*\|\s*$"
)
_STATS_ROW = re.compile(r"^\s*\|(?P<first>[^|]*)\|[^|]*MiB\s*/\s*\d+MiB\s*\|[^|]*\|\s*$")


@dataclass(frozen=True)
class _Gpu:
    index: str
    pci: str | None
    row: int
    stats: int | None
    fan: str  # the first word of the stats row's first cell: `30%`, `N/A` or `ERR!`
    errors: tuple[int, ...]  # lines of this GPU's block holding ERR!


def parse(src: SourceText) -> Parsed | None:
    if "MiB" not in src.text or "|" not in src.text:
        return None
    gpus = list(_gpus(src))
    if not gpus:
        return None
    has_fans = any(g.fan.endswith("%") for g in gpus)
    findings: list[EvidenceFinding] = []
    for gpu in gpus:
        target = Target(gpu_index=gpu.index, pci=gpu.pci)
        if gpu.fan == ERR and (has_fans or len(gpus) == 1):
            lines = tuple(src.cite(i) for i in (gpu.row, gpu.stats) if i is not None)
            summary = (f"GPU {gpu.index}: nvidia-smi reads its fan as ERR! (the fan or its "
                       "controller failed; check nvidia-smi -q and the XIDs)")
            findings.append(EvidenceFinding(FORMAT, "smi.fan_unreadable", Layer.GPU_HARDWARE,
                                            Severity.WARNING, summary, target, lines))
        elif gpu.errors:
            lines = (src.cite(gpu.row), *(src.cite(i) for i in gpu.errors))
            summary = f"GPU {gpu.index}: a sensor reads ERR! (a failed NVML read, often transient)"
            findings.append(EvidenceFinding(FORMAT, "smi.sensor_unreadable", Layer.GPU_HARDWARE,
                                            Severity.INFO, summary, target, lines, context=True))
    return Parsed(FORMAT, tuple(findings), tuple(Target(gpu_index=g.index, pci=g.pci)
                                                for g in gpus))


def _gpus(src: SourceText) -> Iterator[_Gpu]:
    lines = src.lines
    for i, line in enumerate(lines):
        row = _GPU_ROW.match(line)
        if row is None:
            continue
        block = [i]
        for j in range(i + 1, min(i + 4, len(lines))):
            if not lines[j].lstrip().startswith("|") or _GPU_ROW.match(lines[j]):
                break
            block.append(j)
        stats = next((j for j in block if _STATS_ROW.match(lines[j])), None)
        first = _STATS_ROW.match(lines[stats]) if stats is not None else None
        words = first["first"].split() if first else []
        yield _Gpu(
            index=row["index"],
            pci=normalize_pci(row["bus"]),
            row=i,
            stats=stats,
            fan=words[0] if words else "",
            errors=tuple(j for j in block if ERR in lines[j]),
        )
