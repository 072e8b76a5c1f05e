"""vLLM engine logs: the periodic stats line (`Running: N reqs, Waiting: N reqs, GPU KV cache
usage: X%`, V1; `Pending:` in V0) and preemption warnings.

A KV cache at or above KV_SATURATED percent with requests waiting is a capacity problem of the
deployment (`workload`, DOMAIN §8). Preemption lines are read by the log catalog. Pure: no I/O.
"""

from __future__ import annotations

import re

from bot.diagnosis.evidence.model import EvidenceFinding, Parsed, SourceText, Target
from bot.diagnosis.layers import Layer, Severity

FORMAT = "vllm engine stats"
KV_SATURATED = 95.0
_STATS = re.compile(
    r"(?:Engine (?P<engine>\d+): )?Avg prompt throughput: [\d.]+ tokens/s, .*?Running: "
    r"(?P<running>\d+) reqs,.*?(?:Waiting|Pending): (?P<waiting>\d+) reqs, GPU KV cache usage: "
    r"(?P<kv>[\d.]+)%"
)


def parse(src: SourceText) -> Parsed | None:
    rows = [
        (float(m["kv"]), int(m["waiting"]), i)
        for i, line in enumerate(src.lines)
        if "KV cache usage" in line and (m := _STATS.search(line))
    ]
    if not rows:
        return None
    saturated = [r for r in rows if r[0] >= KV_SATURATED and r[1] > 0]
    if not saturated:
        return Parsed(FORMAT)
    peak = max(saturated, key=lambda r: (r[0], r[1]))
    summary = (f"KV cache at {peak[0]:g}% with {peak[1]} request(s) waiting in "
               f"{len(saturated)} of {len(rows)} stats lines: the engine is out of KV capacity")
    lines = (src.cite(saturated[0][2]), src.cite(peak[2]))
    finding = EvidenceFinding(FORMAT, "vllm.kv_saturated", Layer.WORKLOAD, Severity.WARNING,
                              summary, Target(), tuple(dict.fromkeys(lines)))
    return Parsed(FORMAT, (finding,))
