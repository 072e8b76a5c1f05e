"""Which device a finding may name: only one its evidence singles out. Pure: no I/O.

A gauge reading 0 on a GPU, like its peers', says nothing about that GPU: when the XID gauge
reads 0 everywhere but the kernel log has XIDs, "last XID on GPU 0 = 0" must not put GPU 0 among
the culprits (the `argmax` of all-zero samples is simply the first GPU). The node stays the
culprit; the GPU is named only when some reading of it is non-zero or differs from its peers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.diagnosis.findings import Culprit, Evidence


def backed_culprit(culprit: Culprit, evidence: Sequence[Evidence]) -> Culprit:
    """`culprit` without its GPU when every numeric reading of that GPU in `evidence` is 0
    and its peers read 0 too (or were not read). A GPU with no reading (gone from the
    exporter) keeps its name: its absence is the evidence."""
    if culprit.gpu in (None, ""):
        return culprit
    own = [
        e
        for e in evidence
        if e.labels.get("gpu") == culprit.gpu
        and e.labels.get("node", culprit.node) == culprit.node
        and isinstance(e.value, int | float)
    ]
    if own and all(e.value == 0 and not e.peer_median for e in own):
        return replace(culprit, gpu=None, uuid=None)
    return culprit
