"""Fault history per GPU and the escalation ladder it drives. Pure: no I/O.

A GPU is known by its UUID (it follows the board to another slot or node), else by
`node/gpu<index>`. Every finding that named a GPU and every action on it is kept across
incidents (storage/gpu_history.py). Before proposing, the run counts, within `WINDOW`, how often
this same fault (`xid 48`, or the check that fired) hit this GPU and how many resets it had, and
climbs the ladder (docs/evidence.md, "Fault history and the escalation ladder"):

- `reset`: the first time in the window, never reset: the runbook's proposals as they are.
- `drain_reset`: the second time, or reset once already: drain and gpu_reset are proposed.
- `rma`: the third time or more, or reset twice already: cordon and an RMA ticket; no further
  gpu_reset (it did not hold).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from bot.diagnosis.findings import Finding
from bot.diagnosis.localizing import Verdict

#: How far back a GPU's history counts towards the ladder.
WINDOW = timedelta(days=30)
#: Findings of another incident closer to now than this are the same episode (two alerts, or an
#: alert and a person's diagnose, about one storm), not a recurrence.
EPISODE = timedelta(hours=1)
#: Actions that count as a reset of the GPU.
RESETS = frozenset({"gpu_reset", "reboot"})


class Rung(StrEnum):
    RESET = "reset"
    DRAIN_RESET = "drain_reset"
    RMA = "rma"


@dataclass(frozen=True)
class GpuFact:
    """One stored fact about one GPU: a finding (`what` = `xid 48` or a check id) or an action
    (`what` = the action's name)."""

    gpu_key: str
    kind: str  # finding | action
    what: str
    at: datetime
    incident: str | None = None


class GpuHistory(Protocol):
    """Reads the facts stored about some GPUs since a time (implemented over the database by
    bot.engine.gpu_records.StoredGpuHistory)."""

    def read(self, keys: Sequence[str], *, since: datetime) -> list[GpuFact]: ...


@dataclass(frozen=True)
class CulpritGpu:
    """A GPU the verdict names, with the fault it is blamed for this time."""

    gpu_key: str
    node: str
    gpu: str | None
    uuid: str | None
    what: str


@dataclass(frozen=True)
class GpuRecord:
    """What the history says about one culprit GPU, including this occurrence."""

    gpu: CulpritGpu
    occurrences: int
    resets: int
    rung: Rung

    @property
    def text(self) -> str:
        """E.g. "3rd XID 48 on this GPU in 30 days, after 2 resets"."""
        fault = self.gpu.what.upper() if self.gpu.what.startswith("xid") else self.gpu.what
        resets = {0: "no reset before", 1: "after 1 reset"}.get(
            self.resets, f"after {self.resets} resets"
        )
        return f"{ordinal(self.occurrences)} {fault} on this GPU in {WINDOW.days} days, {resets}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_key": self.gpu.gpu_key,
            "node": self.gpu.node,
            "gpu": self.gpu.gpu,
            "uuid": self.gpu.uuid,
            "what": self.gpu.what,
            "occurrences": self.occurrences,
            "resets": self.resets,
            "rung": self.rung.value,
            "text": self.text,
        }


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def gpu_key(*, node: str, gpu: str | None, uuid: str | None) -> str:
    """The key a GPU's history is stored under: its UUID, else `node/gpu<index>`."""
    return uuid or f"{node}/gpu{gpu if gpu is not None else '?'}"


def culprit_gpus(verdict: Verdict) -> list[CulpritGpu]:
    """The GPUs a `gpu_hardware` verdict blames, each with its fault: the XID code when a
    finding's evidence carries one for that GPU, else the id of the check that named it."""
    if verdict.layer.value != "gpu_hardware":
        return []
    return named_gpus(verdict.findings)


def named_gpus(findings: Sequence[Finding]) -> list[CulpritGpu]:
    """The GPUs the `gpu_hardware` findings among `findings` name, each with its fault (as
    `culprit_gpus`, whose verdict's findings these are)."""
    found: dict[str, CulpritGpu] = {}
    for finding in findings:
        culprit = finding.culprit
        if finding.layer.value != "gpu_hardware" or not culprit.node or culprit.gpu in (None, ""):
            continue
        rows = [  # this GPU's own evidence rows, from any finding (the XID gauge may be another's)
            e
            for f in findings
            for e in f.evidence
            if e.labels.get("node") == culprit.node and e.labels.get("gpu") == culprit.gpu
        ]
        uuid = culprit.uuid or next((e.labels["UUID"] for e in rows if "UUID" in e.labels), None)
        xid = next((e.labels["err_code"] for e in rows if e.labels.get("err_code")), None)
        what = f"xid {xid}" if xid and xid != "0" else finding.check_id
        key = gpu_key(node=culprit.node, gpu=culprit.gpu, uuid=uuid)
        found.setdefault(key, CulpritGpu(key, culprit.node, culprit.gpu, uuid, what))
    return list(found.values())


def climb(
    gpu: CulpritGpu, facts: Iterable[GpuFact], *, now: datetime, incident: str | None = None
) -> GpuRecord:
    """Count this fault (once per earlier incident, this one included) and the resets of `gpu`
    within WINDOW, and pick the rung. An earlier incident counts only when its last finding of
    this fault is at least EPISODE old: a concurrent incident about the same storm is the same
    occurrence."""
    recent = [f for f in facts if f.gpu_key == gpu.gpu_key and now - f.at <= WINDOW]
    same = [f for f in recent if f.kind == "finding" and f.what == gpu.what]
    # Once per earlier incident (a re-run of this incident is not a recurrence).
    last: dict[str, datetime] = {}
    for f in same:
        if f.incident and f.incident == incident:
            continue
        key = f.incident or f.at.isoformat()
        last[key] = max(f.at, last.get(key, f.at))
    occurrences = 1 + sum(1 for at in last.values() if now - at >= EPISODE)
    resets = sum(1 for f in recent if f.kind == "action" and f.what in RESETS)
    if occurrences >= 3 or resets >= 2:
        rung = Rung.RMA
    elif occurrences == 2 or resets == 1:
        rung = Rung.DRAIN_RESET
    else:
        rung = Rung.RESET
    return GpuRecord(gpu=gpu, occurrences=occurrences, resets=resets, rung=rung)
