"""Log lines (kernel XIDs and their chains, GSP timeouts, mlx5 link/cable events, NCCL and
PyTorch lines, CUDA errors, device plugin, vLLM preemptions) as evidence findings.

The log-signature catalog (runbooks/log_signatures.yaml) does the matching, so XID layers have
one source of truth: its `xids` table. Repeated lines (the same XID on the same GPU) become one
finding citing up to MAX_CITED lines. Secondary matches (`caused by previous Xid N`, NCCL errors
after a lost GPU, torch's teardown) are context findings: shown, never deciding. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bot.diagnosis.evidence.model import (
    EvidenceFinding,
    Parsed,
    SourceText,
    Target,
    normalize_pci,
)
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.logs import LogCatalog, LogMatch, classify_text

FORMATS = {
    "kernel": "kernel log",
    "nccl": "NCCL log",
    "torch": "PyTorch log",
    "cuda": "CUDA error",
    "nvml": "NVML error",
    "k8s": "Kubernetes event",
    "device_plugin": "device plugin log",
    "vllm": "vllm engine log",
    "exporter": "dcgm-exporter log",
    "dcgm": "DCGM health",
}
MAX_CITED = 5
_GPU_AT = re.compile(r"NVRM: GPU at PCI:(?P<pci>[0-9A-Fa-f:.]+): (?P<uuid>GPU-[0-9a-fA-F-]+)")
_LINK = re.compile(r"\bLink (?P<link>\d+)\b")


def parse(src: SourceText, *, catalog: LogCatalog) -> list[Parsed]:
    """One Parsed per kind of log found (kernel log, NCCL log, ...)."""
    found = classify_text(src.text, catalog)
    inventory = tuple(_inventory(src))
    if not found.matches:
        return [Parsed(FORMATS["kernel"], (), inventory)] if inventory else []
    groups: dict[tuple[object, ...], list[LogMatch]] = {}
    for match in found.matches:
        if match.layer is None:
            continue
        key = (match.signature, match.layer, match.severity, match.xid, match.caused_by,
               match.secondary, _target(match))
        groups.setdefault(key, []).append(match)
    by_format: dict[str, list[EvidenceFinding]] = {}
    for matches in groups.values():
        finding = _finding(src, matches)
        by_format.setdefault(finding.tool, []).append(finding)
    formats = {_format(m.signature) for m in found.matches}
    return [
        Parsed(name, tuple(by_format.get(name, ())), inventory if name == FORMATS["kernel"] else ())
        for name in sorted(formats)
    ]


def _format(signature: str) -> str:
    return FORMATS.get(signature.split(".", 1)[0], "log")


def _target(match: LogMatch) -> Target:
    fields = match.fields
    pci = normalize_pci(fields["pci"]) if "pci" in fields else None
    gpu = fields.get("gpu_index") or fields.get("gpu")
    hca = fields.get("hca") or fields.get("device") if match.signature.startswith("nccl") else None
    link = _LINK.search(fields.get("detail", "")) if match.xid and match.layer == "fabric" else None
    return Target(
        pci=pci,
        gpu_index=gpu,
        uuid=fields["device"] if fields.get("device", "").startswith("GPU-") else None,
        hca=hca or (fields.get("interface") if match.signature.startswith("kernel.mlx5") else None),
        port=fields.get("port"),
        link=link["link"] if link else None,
    )


def _finding(src: SourceText, matches: list[LogMatch]) -> EvidenceFinding:
    first = matches[0]
    count = f" ({len(matches)} lines)" if len(matches) > 1 else ""
    lines = tuple(src.cite(m.line_no - 1) for m in matches[:MAX_CITED])
    return EvidenceFinding(
        tool=_format(first.signature),
        code=first.signature + (f".{first.xid}" if first.xid is not None else ""),
        layer=Layer(first.layer or Layer.NONE),
        severity=Severity(first.severity),
        summary=first.meaning + count,
        target=_target(first),
        lines=lines,
        context=first.secondary,
    )


def _inventory(src: SourceText) -> Iterable[Target]:
    for found in _GPU_AT.finditer(src.text):
        yield Target(pci=normalize_pci(found["pci"]), uuid=found["uuid"])
