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


_KERNEL_MARKERS = ("Kernel Module", "Driver Version:")
_USER_MARKERS = ("NVIDIA-SMI", "NVML library version:", "ii  ")


def _found(pattern: re.Pattern[str], markers: tuple[str, ...], src: SourceText) -> dict[str, int]:
    """Version -> 0-based line of its first mention. Only lines holding a marker are matched
    (str.find runs at C speed, so a 10 MB log without markers costs one pass per marker)."""
    text, starts = src.text, set()
    for marker in markers:
        at = text.find(marker)
        while at >= 0:
            starts.add(text.rfind("\n", 0, at) + 1)
            end = text.find("\n", at)
            at = -1 if end < 0 else text.find(marker, end)
    versions: dict[str, int] = {}
    line_no, counted = 0, 0
    for start in sorted(starts):
        line_no, counted = line_no + text.count("\n", counted, start), start
        end = text.find("\n", start)
        for m in pattern.finditer(text[start : len(text) if end < 0 else end]):
            versions.setdefault(next(v for v in m.groups() if v), line_no)
    return versions


def _same(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def parse(src: SourceText) -> Parsed | None:
    kernel, user = _found(_KERNEL, _KERNEL_MARKERS, src), _found(_USER, _USER_MARKERS, src)
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
