"""Evidence findings: what a tool output or log line shows, where, and about which GPU / HCA.

Frozen dataclasses with `to_dict` for the CLI's `--json` and the timeline. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from bot.diagnosis.layers import Layer, Severity

_PCI = re.compile(
    r"(?:PCI:)?(?P<domain>[0-9A-Fa-f]{4,8}):(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})"
    r"(?:\.(?P<fn>[0-7]))?"
)


def at_line_start(text: str, prefix: str) -> bool:
    """Whether some line of `text` starts with `prefix`: a C substring search that lets a
    parser skip its per-line regexes on a large text without its header."""
    return text.startswith(prefix) or f"\n{prefix}" in text


def normalize_pci(text: str) -> str | None:
    """`00000000:2B:00.0`, `PCI:0000:2b:00` and `0000:2b:00.0` all become `0000:2b:00.0`."""
    found = _PCI.search(text)
    if found is None:
        return None
    domain = found["domain"][-4:].lower()
    return f"{domain}:{found['bus'].lower()}:{found['dev'].lower()}.{found['fn'] or '0'}"


@dataclass(frozen=True)
class EvidenceLine:
    """One line of an input, cited as `source:line_no` (line numbers are 1-based)."""

    source: str
    line_no: int
    text: str

    def cite(self) -> str:
        return f"{self.source}:{self.line_no}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line_no": self.line_no, "text": self.text}


@dataclass(frozen=True)
class Target:
    """What a finding is about: a node, a GPU (index, PCI bus id, UUID), an HCA port, a link."""

    node: str | None = None
    gpu_index: str | None = None
    pci: str | None = None
    uuid: str | None = None
    hca: str | None = None
    port: str | None = None
    link: str | None = None

    def describe(self) -> str:
        parts = [self.node] if self.node else []
        if self.gpu_index is not None:
            parts.append(f"GPU {self.gpu_index}")
        parts += [p for p in (self.pci, self.uuid) if p]
        if self.hca:
            parts.append(f"HCA {self.hca}" + (f" port {self.port}" if self.port else ""))
        elif self.port:
            parts.append(f"port {self.port}")
        if self.link is not None:
            parts.append(f"link {self.link}")
        return " / ".join(parts)

    def merged(self, other: Target) -> Target:
        """This target with the blanks filled from `other` (same GPU seen by another tool)."""
        return replace(
            self, **{k: v for k, v in other.to_dict().items() if getattr(self, k) is None}
        )

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class EvidenceFinding:
    """One conclusion drawn from a tool output or log: layer, severity, target, cited lines.

    `context` findings (consequences such as `caused by previous Xid`, or NCCL errors after a
    lost GPU) are reported but never decide the verdict."""

    tool: str
    code: str
    layer: Layer
    severity: Severity
    summary: str
    target: Target = field(default_factory=Target)
    lines: tuple[EvidenceLine, ...] = ()
    context: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "code": self.code,
            "layer": self.layer.value,
            "severity": self.severity.value,
            "summary": self.summary,
            "target": self.target.to_dict(),
            "lines": [line.to_dict() for line in self.lines],
            "context": self.context,
        }


@dataclass(frozen=True)
class Parsed:
    """What one parser made of a text: the format it recognised and its findings. A format
    recognised with no findings is evidence too: that tool's checks passed."""

    format: str
    findings: tuple[EvidenceFinding, ...] = ()
    inventory: tuple[Target, ...] = ()
    """GPUs the text lists (index, PCI bus id, UUID), used to name other findings' GPUs."""


class SourceText:
    """A text split into lines once, with helpers to cite them."""

    def __init__(self, text: str, *, source: str) -> None:
        self.source = source
        self.text = text
        self.lines: list[str] = text.splitlines()

    def cite(self, index: int) -> EvidenceLine:
        """The line at 0-based `index`, cited 1-based."""
        return EvidenceLine(self.source, index + 1, self.lines[index].rstrip()[:300])
