"""Driver versions a pasted text states on both sides of the user/kernel boundary: the loaded
kernel module (`/proc/driver/nvidia/version`, NVRM's `loading ... Kernel Module 570.158.01`,
nvidia-smi's `Driver Version:`) against the user-space tools and libraries (`NVIDIA-SMI 525.85`,
`NVML library version:`, `dpkg -l` rows of nvidia-smi / nvidia-utils / libnvidia-compute).

Different versions on the two sides are the `Driver/library version mismatch` state even when
that message itself was not pasted: node software (DOMAIN §4.5, §8). A text stating only one
side says nothing. Pure: no I/O.
"""

from __future__ import annotations

import re

from bot.diagnosis.evidence.model import EvidenceFinding, Parsed, SourceText, Target
from bot.diagnosis.layers import Layer, Severity

FORMAT = "driver versions"
_VERSION = r"(\d{3}\.\d{1,3}(?:\.\d{1,3})?)"
_KERNEL = re.compile(rf"Kernel Module(?: for \S+)?\s+{_VERSION}\b|\bDriver Version:\s*{_VERSION}")
_USER = re.compile(
    rf"\bNVIDIA-SMI\s+{_VERSION}\b|\bNVML library version:\s*{_VERSION}"
    rf"|^ii\s+(?:nvidia-smi|nvidia-utils-\d+|libnvidia-compute-\d+|nvidia-driver-\d+)\S*\s+"
    rf"{_VERSION}",
    re.MULTILINE,
)


def _found(pattern: re.Pattern[str], src: SourceText) -> dict[str, int]:
    versions: dict[str, int] = {}
    for i, line in enumerate(src.lines):
        for m in pattern.finditer(line):
            version = next(v for v in m.groups() if v)
            versions.setdefault(version, i)
    return versions


def _same(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def parse(src: SourceText) -> Parsed | None:
    kernel, user = _found(_KERNEL, src), _found(_USER, src)
    if not kernel or not user:
        return None
    skew = [(k, u) for k in kernel for u in user if not _same(k, u)]
    if not skew:
        return Parsed(FORMAT)
    k, u = skew[0]
    summary = (f"kernel module {k} but user-space driver {u}: the driver was upgraded without a "
               "reboot (Driver/library version mismatch); drain and reboot, pin the packages")
    lines = tuple(src.cite(i) for i in sorted({kernel[k], user[u]}))
    finding = EvidenceFinding(FORMAT, "driver.version_skew", Layer.NODE_SOFTWARE,
                              Severity.CRITICAL, summary, Target(), lines)
    return Parsed(FORMAT, (finding,))
