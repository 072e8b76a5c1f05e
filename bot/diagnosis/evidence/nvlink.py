"""`nvidia-smi nvlink -e` (per-link error counters) and `nvidia-smi nvlink -s` (per-link speed
or `<inactive>`), under `GPU N: <name> (UUID: GPU-…)` headers.

NVLink faults are the node's NVLink fabric (`fabric`, DOMAIN §8). CRC and recovery errors are
warnings (the counters run since the driver loaded, so compare two reads); replays alone are
info. An inactive link is critical only when other links of the same GPU are up: GPUs whose
links are all inactive have no NVLink (or it is off by design), a known false positive of
other tools (DOMAIN §2.4). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.diagnosis.evidence.model import (
    EvidenceFinding,
    Parsed,
    SourceText,
    Target,
    at_line_start,
)
from bot.diagnosis.layers import Layer, Severity

FORMAT = "nvidia-smi nvlink"
_HEADER = re.compile(
    r"^GPU (?P<index>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>GPU-[0-9a-fA-F-]+)\))?\s*$"
)
_ERROR = re.compile(
    r"^\s+Link (?P<link>\d+): (?P<counter>[A-Za-z][\w .-]*?(?:Errors?|Count(?:er)?)): "
    r"(?P<value>\d+)\s*$"
)
_SPEED = re.compile(
    r"^\s+Link (?P<link>\d+): (?:(?P<speed>[\d.]+) GB/s|(?P<inactive><inactive>))\s*$"
)
_WARNING_COUNTERS = ("crc", "recovery", "ecc")


@dataclass
class _Gpu:
    header: int
    target: Target
    errors: list[tuple[str, str, int, int]] = field(default_factory=list)  # link, counter, n, line
    speeds: list[tuple[str, float | None, int]] = field(default_factory=list)


def parse(src: SourceText) -> Parsed | None:
    if not at_line_start(src.text, "GPU "):
        return None
    gpus: list[_Gpu] = []
    for i, line in enumerate(src.lines):
        header = _HEADER.match(line)
        if header:
            target = Target(gpu_index=header["index"], uuid=header["uuid"])
            gpus.append(_Gpu(header=i, target=target))
            continue
        if not gpus:
            continue
        error, speed = _ERROR.match(line), _SPEED.match(line)
        if error:
            gpus[-1].errors.append((error["link"], error["counter"], int(error["value"]), i))
        elif speed:
            value = None if speed["inactive"] else float(speed["speed"])
            gpus[-1].speeds.append((speed["link"], value, i))
    gpus = [g for g in gpus if g.errors or g.speeds]
    if not gpus:
        return None
    findings: list[EvidenceFinding] = []
    top = max((s for g in gpus for _, s, _ in g.speeds if s is not None), default=None)
    for gpu in gpus:
        findings += _errors(src, gpu)
        findings += _links(src, gpu, top)
    inventory = tuple(g.target for g in gpus)
    return Parsed(FORMAT, tuple(findings), inventory)


def _errors(src: SourceText, gpu: _Gpu) -> list[EvidenceFinding]:
    found = []
    for link in dict.fromkeys(link for link, _, _, _ in gpu.errors):
        rows = [(c, n, i) for lk, c, n, i in gpu.errors if lk == link and n > 0]
        if not rows:
            continue
        serious = [r for r in rows if any(w in r[0].lower() for w in _WARNING_COUNTERS)]
        counts = ", ".join(f"{c} {n}" for c, n, _ in rows)
        lines = tuple(src.cite(i) for i in [gpu.header, *(i for _, _, i in rows)])
        found.append(
            EvidenceFinding(
                FORMAT,
                "nvlink.errors" if serious else "nvlink.replays",
                Layer.FABRIC,
                Severity.WARNING if serious else Severity.INFO,
                f"NVLink {link}: {counts} (since the driver loaded)",
                _on_link(gpu.target, link),
                lines,
            )
        )
    return found


def _links(src: SourceText, gpu: _Gpu, top: float | None) -> list[EvidenceFinding]:
    active = [s for _, s, _ in gpu.speeds if s is not None]
    found = []
    for link, speed, i in gpu.speeds:
        lines = (src.cite(gpu.header), src.cite(i))
        if speed is None and active:
            found.append(
                EvidenceFinding(
                    FORMAT, "nvlink.link_inactive", Layer.FABRIC, Severity.CRITICAL,
                    f"NVLink {link} inactive while {len(active)} other link(s) of this GPU are up",
                    _on_link(gpu.target, link), lines,
                )
            )
        elif speed is not None and top and speed < top:
            found.append(
                EvidenceFinding(
                    FORMAT, "nvlink.link_slow", Layer.FABRIC, Severity.WARNING,
                    f"NVLink {link} at {speed:g} GB/s, peers' links at {top:g} GB/s",
                    _on_link(gpu.target, link), lines,
                )
            )
    return found


def _on_link(target: Target, link: str) -> Target:
    return Target(gpu_index=target.gpu_index, uuid=target.uuid, link=link)
