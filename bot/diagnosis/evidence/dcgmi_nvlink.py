"""`dcgmi nvlink --link-status` (`-s`): one row of link states per GPU and NvSwitch, keyed
`Up=U, Down=D, Disabled=X, Not Supported=_`.

A link Down on a GPU is the NVLink fabric (DOMAIN §8); Disabled and Not Supported are not
faults. Pure: no I/O.
"""

from __future__ import annotations

import re

from bot.diagnosis.evidence.model import EvidenceFinding, Parsed, SourceText, Target
from bot.diagnosis.layers import Layer, Severity

FORMAT = "dcgmi nvlink"
_ENTITY = re.compile(r"^\s*(?P<kind>gpuId|physicalId|switchId)\s+(?P<id>\d+):\s*$")
_STATES = re.compile(r"^\s*(?P<states>(?:[UDX_]\s+)*[UDX_])\s*$")


def parse(src: SourceText) -> Parsed | None:
    if "NvLink Link Status" not in src.text:
        return None
    findings: list[EvidenceFinding] = []
    for i, line in enumerate(src.lines[:-1]):
        entity, states = _ENTITY.match(line), _STATES.match(src.lines[i + 1])
        if entity is None or states is None:
            continue
        links = states["states"].split()
        down = [n for n, state in enumerate(links) if state == "D"]
        if not down:
            continue
        gpu = entity["id"] if entity["kind"] == "gpuId" else None
        what = f"GPU {gpu}" if gpu is not None else f"NvSwitch {entity['id']}"
        severity = Severity.CRITICAL if len(down) == len(links) else Severity.WARNING
        findings.append(EvidenceFinding(
            FORMAT, "dcgmi.nvlink_down", Layer.FABRIC, severity,
            f"{len(down)} of {len(links)} NVLinks down on {what}",
            Target(gpu_index=gpu, link=str(down[0]) if len(down) == 1 else None),
            (src.cite(i), src.cite(i + 1)),
        ))
    return Parsed(FORMAT, tuple(findings))
